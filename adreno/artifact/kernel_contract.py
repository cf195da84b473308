"""What each program was lowered for, written into its own kernel source, and the plan's dataflow, checked at load.

The launch plan and the kernels are separate files. A plan edited consistently with itself (two arguments of the
same type swapped, launch sizes halved, steps reordered or dropped, a tensor's shape or dtype changed with the
manifest to match) passes every structural check and runs to a wrong result, and rewriting the manifest's hashes
defeats the SHA-256 check. So at compile every program's source gets a first line, a C comment the OpenCL compiler
ignores (the kernels' behaviour is unchanged), that records what TVM lowered it for::

    // adreno-contract: {"args": [{"shape", "dtype", "scope"}, ...], "writes": N, "workspaces": [...],
    //                   "kernels": [{"name", "args", "global_size", "local_size", "local_mem_bytes"}, ...]}

(on one line). `check` compares every step with the contract of the program it runs (its tensors' shapes, dtypes
and scopes, position by position; each launch's argument binding and sizes; its workspaces) and walks the plan's
dataflow: a step reads only inputs, params or tensors an earlier step wrote, writes (its last `writes` arguments,
as `call_tir` appends its outputs) only fresh intermediates or outputs, and every output is written.

What this cannot catch: an edit of both the plan and the kernel source that keeps them consistent (a rewritten
contract line, or another kernel under the same contract). The kernel source is code; only a signature with a key
the tamperer lacks could tell, and artifacts carry none (docs/reliability.md)."""

from __future__ import annotations

import json
from dataclasses import asdict

from ..errors import ArtifactError

MARK = "// adreno-contract: "
WRITTEN_KINDS = {"intermediate", "output"}


def stamped(plan, sources: dict[str, str]) -> dict[str, str]:
    """`sources` (program -> OpenCL source) each with its contract line first, taken from the first step that
    runs the program (every step of one program has the same function, so the same tensors and launches)."""
    contracts: dict[str, dict] = {}
    available = set(plan.inputs) | {n for n, t in plan.tensors.items() if t.kind == "param"}
    for step in plan.steps:
        fresh = [n for n in step.args if n not in available]
        available.update(fresh)
        contracts.setdefault(step.program, _contract(plan, step, len(fresh)))
    return {program: f"{MARK}{json.dumps(contracts[program], separators=(',', ':'))}\n{source}"
            for program, source in sources.items()}


def _contract(plan, step, writes: int) -> dict:
    tensors = plan.tensors
    return {"args": [_arg_spec(tensors[n]) for n in step.args], "writes": writes, "workspaces": step.workspaces,
            "kernels": [asdict(k) for k in step.kernels]}


def _arg_spec(tensor) -> dict:
    return {"shape": tensor.shape, "dtype": tensor.dtype, "scope": tensor.scope}


def check(plan, source_of) -> None:
    """Every step agrees with its program's contract and the dataflow is whole (see the module doc); else an
    ArtifactError of one line naming the step and tensor. `source_of(program)`: the program's kernel source."""
    contracts: dict[str, dict] = {}
    available = set(plan.inputs) | {n for n, t in plan.tensors.items() if t.kind == "param"}
    for index, step in enumerate(plan.steps):
        where = f"step {index} ({step.func})"
        if step.program not in contracts:
            contracts[step.program] = _read(step.program, source_of(step.program))
        contract = contracts[step.program]
        _check_step(where, plan, step, contract)
        split = len(step.args) - contract["writes"]
        for name in step.args[:split]:
            if name not in available:
                _fail(f"{where} reads tensor {name} before any step writes it (steps reordered or removed)")
        for name in step.args[split:]:
            kind = plan.tensors[name].kind
            if kind not in WRITTEN_KINDS:
                _fail(f"{where} writes tensor {name}, the model's {kind}, which no kernel may write")
            if name in available:
                _fail(f"{where} writes tensor {name}, which an earlier step wrote (steps reordered)")
            available.add(name)
    unwritten = [n for n in plan.outputs if n not in available and plan.tensors[n].storage]
    if unwritten:
        _fail(f"output {unwritten[0]} is written by no step (a step was removed)")


def _check_step(where: str, plan, step, contract: dict) -> None:
    wanted = contract["args"]
    if len(step.args) != len(wanted):
        _fail(f"{where} names {len(step.args)} tensors, its kernels were lowered for {len(wanted)}")
    for position, (name, spec) in enumerate(zip(step.args, wanted)):
        given = _arg_spec(plan.tensors[name])
        if given != spec:
            _fail(f"{where}: argument {position} is tensor {name} {given['dtype']} {given['shape']} "
                  f"{given['scope']}, its kernel was lowered for {spec['dtype']} {spec['shape']} {spec['scope']}")
    launches = [asdict(k) for k in step.kernels]
    if len(launches) != len(contract["kernels"]):
        _fail(f"{where} launches {len(launches)} kernels, its program has {len(contract['kernels'])}")
    for launch, lowered in zip(launches, contract["kernels"]):
        differing = [key for key in lowered if launch.get(key) != lowered[key]]
        if differing or launch.keys() != lowered.keys():
            key = (differing or ["fields"])[0]
            given, wanted = launch.get(key), lowered.get(key)
            if key == "args":
                given, wanted = _binding(given), _binding(wanted)
            _fail(f"{where}: kernel {launch['name']} {key} {given} differs from what it was lowered for ({wanted})")
    if step.workspaces != contract["workspaces"]:
        _fail(f"{where}: workspaces {step.workspaces} differ from its kernels' {contract['workspaces']}")


def _binding(args) -> list:
    """Kernel arguments as a short list for messages: a step tensor's index, `w<n>` for a workspace, a scalar."""
    if not isinstance(args, list) or not all(isinstance(a, dict) for a in args):
        return args
    return [a.get("arg") if a.get("arg") is not None else f"w{a['workspace']}" if a.get("workspace") is not None
            else a.get("scalar") for a in args]


def _read(program: str, source: str) -> dict:
    first = source.split("\n", 1)[0]
    if not first.startswith(MARK):
        _fail(f"kernel source of {program} has no contract line (an older adreno, or edited)")
    try:
        contract = json.loads(first[len(MARK):])
        if not (isinstance(contract, dict) and isinstance(contract["args"], list)
                and all(isinstance(a, dict) for a in contract["args"]) and isinstance(contract["kernels"], list)
                and all(isinstance(k, dict) for k in contract["kernels"])
                and isinstance(contract["writes"], int) and 0 <= contract["writes"] <= len(contract["args"])):
            raise ValueError("fields of the wrong type")
    except (ValueError, KeyError, TypeError, RecursionError) as err:
        _fail(f"kernel source of {program}: its contract line is malformed ({type(err).__name__})")
    return contract


def _fail(what: str) -> None:
    raise ArtifactError(f"launch plan: {what}; recompile the model")
