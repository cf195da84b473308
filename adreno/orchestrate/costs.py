"""Costs from the device: each candidate's module (`subgraph.py`) compiled through the normal lowering into a small
artifact, measured through a Runner with its outputs checked, and kept in the records database.

A candidate is compiled as `adreno compile` compiles a model (`compile.lower_relax` with our schedules, then the
launch plan) into a one-candidate artifact of kind "kernel", without the host library: the Runner measures the plan.
Its time is the sum of the artifact's kernel times, so a group the normal lowering cannot make one kernel of
(FuseOps splits a softmax's reductions) costs what its kernels cost together; the record's `extra["kernels"]` says
how many there were. The cost the choice sees adds each of those kernels' launch, measured on the device
(`launch.py`): what fusing saves, and what no device time shows. Its inputs are seeded uniform in [0.5, 1.5):
whatever a group's input stands for (a variance under an rsqrt, a sum under a log), the outputs stay finite. The
reference is TVM's LLVM build of the same module on the same inputs; a candidate whose outputs differ fails its
measurement and gets no cost (it is left out of the choice, never given one made up).

Records (`adreno.records.Database`): one line per candidate under the workload key
`orchestrate|<memory>|<target>|cold|code-<fingerprint>|<structural hash>|<parameter shapes>|<outputs>` and the
measuring device's fingerprint, config `{}`. The code fingerprint (`adreno.support.code_version`) keeps a cost measured
before a schedule changed from standing for the kernel the changed schedule makes: after an upgrade the candidates
are measured again. A failed measurement is a record too, so a second run over the same blocks measures nothing;
so are the two launch-cost artifacts (`orchestrate|launch|<target>|<kernels>|w<width>|code-<fingerprint>`). A compile's
`--records` passes over these keys (`TunedConfigs.load`), so one file may hold both. In texture memory a candidate
reads its packed inputs from images, as in the model (`extract_plan(input_images=True)`), and keeps its weights as
constants, which the plan makes param images as in the model (`subgraph.py`).
"""

from __future__ import annotations

import collections
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tvm

from adreno.support.code_version import code_fingerprint
from adreno.compile import lower_relax
from adreno.targets.devices import get_device
from adreno.errors import TVM_ERRORS, AdrenoError
from adreno.options import Host, Memory, Schedules
from adreno.orchestrate.launch import CHAIN, LaunchCost, chain_module, from_records, launch_key
from adreno.orchestrate.subgraph import subgraph
from adreno.compiler.plan import extract_plan
from adreno.records import ORCHESTRATE_OP, Record
from adreno.runners.interface import RunInput
from adreno.runners.kernel_artifact import write_kernel_artifact
from adreno.runners.offline import seeded_inputs
from adreno.schedules.context import ScheduleContext

INPUT_LOW, INPUT_HIGH = 0.5, 1.5
LAUNCH_REPEAT = 50  # the launch-cost artifacts take microseconds a run: enough runs for a stable median wall time


class CostTable:
    """Measured costs of candidate kernels on one device, read from and written to `database`."""

    def __init__(self, database, runner, device: str, target_name: str, memory: Memory = Memory.BUFFER, repeat: int = 5,
                 progress=None):
        """`runner`: a `runners.interface.Runner`; `device`: its device's fingerprint (`DeviceIdentity.fingerprint`);
        `progress`: called with one line per measurement."""
        self.database, self.runner, self.device = database, runner, device
        self.target_name, self.memory, self.repeat = target_name, memory, repeat
        self.say = progress or (lambda line: None)
        self.measured = 0  # measurements made by this table (not found in the records)
        self.launches = {}  # group -> how many kernels the normal lowering made of it (its record's extra)
        self.launch = None  # the device's launch.LaunchCost, measured (or read) by the first `costs`

    def in_memory(self, memory: Memory) -> CostTable:
        """A table of the same records, runner, device and launch cost measuring in `memory` (`adreno compile
        --orchestrate` without `--memory` measures in both). The launch cost is the device's, whatever the memory:
        it is read (or measured) here once for all the tables."""
        self.launch = self.launch or self._launch_cost()
        table = CostTable(self.database, self.runner, self.device, self.target_name, memory, self.repeat, self.say)
        table.launch = self.launch
        return table

    def costs(self, graph, kernels) -> dict:
        """Group (frozenset of primitives) -> seconds, or None where the measurement failed, for `kernels`
        (`blp.Kernel`s over `graph`): the device time of its kernels in its fastest cold repeat, plus their launches
        (`launch.py`). What the records lack is measured, one line of progress each.

        The fastest repeat, not the median: on a shared device a repeat now and then runs twice as long (PoCL on 2
        cores when another process takes one), and a median of 5 caught such repeats for some candidates and not
        for others, so the BLP chose what the noise favoured (docs/orchestrate.md)."""
        keyed = self._keyed(graph, kernels)
        self.launch = self.launch or self._launch_cost()
        with tempfile.TemporaryDirectory(prefix="adreno-orchestrate-") as work:
            self._measure_all(self._missing(keyed), Path(work))
        best = {group: self.database.best(key, self.device) for group, (key, _) in keyed.items()}
        self.launches.update({group: r.extra.get("kernels") for group, r in best.items() if r is not None})
        return {group: None if r is None else r.fastest + r.extra.get("kernels", 1) * self.launch.per_launch_s
                for group, r in best.items()}

    def jobs(self, graph, kernels) -> list[Job]:
        """The distinct candidates of `kernels` the records lack on this device, in order."""
        return self._missing(self._keyed(graph, kernels))

    def _keyed(self, graph, kernels) -> dict:
        """Group -> (its record key, its `subgraph.Subgraph`), each group's module built and hashed once."""
        return {k.primitives: self._key(graph, k) for k in kernels}

    def _missing(self, keyed: dict) -> list[Job]:
        """The jobs of the distinct keys of `keyed` the records lack on this device, in order."""
        found = {}
        for group, (key, sg) in keyed.items():
            if key not in found and not self.database.query(key, self.device):
                found[key] = Job(key, sg.mod, {"primitives": len(group)})
        return list(found.values())

    def launch_jobs(self) -> list[Job]:
        """The launch-cost artifacts (`launch.py`) the records lack on this device."""
        return [Job(key, chain_module(kernels), {}, fuse=UNFUSED, repeat=max(self.repeat, LAUNCH_REPEAT))
                for kernels in (1, CHAIN)
                if not self.database.query(key := launch_key(self.target_name, kernels), self.device)]

    def _launch_cost(self) -> LaunchCost:
        """The device's launch cost from its two records, measuring those the records lack."""
        missing = self.launch_jobs()
        if missing:
            self.say(f"measuring the launch cost (one add, and a chain of {CHAIN} adds)")
            with tempfile.TemporaryDirectory(prefix="adreno-orchestrate-launch-") as work:
                for n, job in enumerate(missing):
                    self.database.append([self._measure(job, Path(work) / str(n))])
        found = {kernels: self.database.best(launch_key(self.target_name, kernels), self.device)
                 for kernels in (1, CHAIN)}
        cost = from_records(found[1], found[CHAIN])
        if cost is None:
            raise AdrenoError(f"the launch-cost artifacts of {self.target_name} did not measure on this device; "
                              f"see the records under {launch_key(self.target_name, 1)}")
        self.say(f"launch cost {cost.per_launch_s * 1e6:.1f} us a kernel, {cost.per_run_s * 1e6:.1f} us a run")
        return cost

    def _measure_all(self, jobs: list[Job], work: Path) -> None:
        """Measure `jobs`, recording each result in order, one line of progress each. A remote runner (the farm)
        measures while the next candidates compile here, on every device of its key at once; a local one measures
        each candidate before the next compiles, so compiling never disturbs a timing."""
        pending, finished = collections.deque(), []

        def finish(record: Record, future) -> None:
            if future is not None:
                self._complete(record, future.result())
            self.database.append([record])
            self.measured += 1
            finished.append(record)
            cost = f"{record.fastest * 1e6:.1f} us" if record.ok else f"failed ({record.stage}: {record.error})"
            self.say(f"measured {len(finished)}/{len(jobs)}: {cost}")

        for n, job in enumerate(jobs, 1):
            record, run = self.prepare(job, work / str(n))
            pending.append((record, None if run is None else self.runner.submit(run)))
            while pending and (not self.runner.remote or pending[0][1] is None or pending[0][1].done()):
                finish(*pending.popleft())
        while pending:
            finish(*pending.popleft())

    def _key(self, graph, kernel):
        sg = subgraph(graph, kernel, self.memory)
        return (f"{ORCHESTRATE_OP}|{self.memory.value}|{self.target_name}|{MEASURED}|code-{code_fingerprint()}|"
                f"{sg.key}"), sg

    def _measure(self, job: Job, out: Path) -> Record:
        record, run = self.prepare(job, out)
        if run is not None:
            self._complete(record, self.runner.submit(run).result())
        return record

    def prepare(self, job: Job, out: Path) -> tuple[Record, RunInput | None]:
        """The job's record and its run: compiled into `out`, with seeded inputs and the LLVM reference; or the
        record of its build failure and None."""
        record = Record(job.key, self.device, {}, timestamp=time.time(), strategy=ORCHESTRATE_OP,
                        extra=dict(job.extra))
        specs = input_specs(job.mod["main"])
        if specs is None:
            record.error, record.stage = "a parameter is not floating point: no seeded input for it", "build"
            return record, None
        inputs = seeded_inputs(specs, 0)
        try:
            record.extra["kernels"] = build_artifact(job.mod, job.key, self.target_name, out, job.fuse, self.memory)
            reference = llvm_reference(job.mod, inputs)
        except (*TVM_ERRORS, AdrenoError) as err:
            record.error, record.stage = f"{type(err).__name__}: {str(err).strip().splitlines()[-1][:300]}", "build"
            return record, None
        return record, RunInput(str(out), inputs, reference, repeat=job.repeat or self.repeat, tag=job.key, cold=True)

    def _complete(self, record: Record, result) -> None:
        """Fill `record` from the runner's `result`; the farm's own failure raises (nothing is recorded for it)."""
        if result.infrastructure:  # the farm's, not the candidate's: nothing is recorded, a rerun measures it
            raise AdrenoError(f"cannot measure a candidate: {result.error} (the costs measured before it are in "
                              "the records)")
        record.seconds, record.error, record.stage = result.seconds, result.error, result.stage
        if result.ok and result.extra.get("wall_ms"):
            record.extra["wall_s"] = float(np.median(result.extra["wall_ms"])) * 1e-3


@dataclass(frozen=True)
class Job:
    """One artifact to measure: its record key, its Relax module, the record's extra, the pass in place of FuseOps
    (None: FuseOps) and its timed runs (None: the table's)."""

    key: str
    mod: object
    extra: dict
    fuse: object = None
    repeat: int | None = None


# How a candidate is measured, part of its key so that records of another way are never mixed with these: each
# timed run starts with the device's caches evicted (`RunInput.cold`). Measured warm, a candidate kept its weights
# in the cache between repeats, while in a model the other kernels' weights push them out (docs/orchestrate.md).
MEASURED = "cold"


@tvm.transform.module_pass(opt_level=0, name="NoFusion")
def UNFUSED(mod, _ctx):  # noqa: N802 - a pass value: every operator stays a kernel of its own
    return mod


def build_artifact(mod, key: str, target_name: str, out: Path, fuse=None, memory: Memory = Memory.BUFFER) -> int:
    """Compile `mod` as `adreno compile` would (in `memory`, our schedules; `fuse` in place of FuseOps, when given)
    into a kernel artifact at `out`, its packed inputs images in texture memory as in the model; the number of
    kernels its plan launches."""
    ctx = ScheduleContext.for_device(get_device(target_name), host=Host.NATIVE)
    lowered = lower_relax(mod, ctx, Schedules.ADRENO, memory=memory, fuse=fuse)
    plan, sources, params = extract_plan(lowered, ctx.target, memory=memory, device=ctx.device, input_images=True)
    write_kernel_artifact(str(out), plan, sources, params, key, target_name, {})
    return len(plan.steps)


def input_specs(func) -> list[dict] | None:
    """The seeded-input spec (`adreno.runners.offline.seeded_inputs`) of every parameter: uniform in
    [INPUT_LOW, INPUT_HIGH); None if one is not floating point."""
    specs = []
    for param in func.params:
        dtype = str(param.ty.dtype)
        if not dtype.startswith("float"):
            return None
        specs.append({"shape": [int(d) for d in param.ty.shape], "dtype": dtype, "uniform": [INPUT_LOW, INPUT_HIGH]})
    return specs


# The reference is built once per candidate and run once: LLVM's optimisations cost more than they save there
# (MobileNetV3-small's 234 references 22.4 s optimised, 13.0 s not; ResNet-18's 90, 11.7 and 10.7 s).
REFERENCE_TARGET = {"kind": "llvm", "opt-level": 0}


def llvm_reference(mod, inputs) -> list[np.ndarray]:
    """`mod` built by TVM for the CPU (LLVM, unoptimised: `REFERENCE_TARGET`) and run on `inputs`: the outputs a
    candidate must match."""
    import tvm
    from tvm import relax

    vm = relax.VirtualMachine(tvm.compile(mod, target=tvm.target.Target(REFERENCE_TARGET)), tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(a) for a in inputs])
    return [out.numpy()] if hasattr(out, "numpy") else [o.numpy() for o in out]
