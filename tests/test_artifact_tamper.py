"""Tampered and damaged artifacts: every case is refused with one line (exit status 2), or runs to exactly the
untampered output. Never a crash, a traceback, a hang, or a silently different output.

One small artifact (the bundled `tiny`, texture memory: buffers and images) is compiled once; each case copies it
and changes it. "hashed" cases leave the manifest alone (the SHA-256 check must catch them); "resigned" cases also
rewrite the manifest's hashes, as one who edits the manifest would, so the path and launch-plan checks alone must
catch them. The cases run in one worker process through the library (load, executor, run: what `adreno run` does);
a crash kills the worker and fails the test with the case's name. A few run through the CLI as well."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from .resign import resign

HERE = Path(__file__).resolve().parent.parent


def _edit_json(rel, change):
    def tamper(root: Path):
        data = json.loads((root / rel).read_text())
        changed = change(data)
        (root / rel).write_text(json.dumps(data if changed is None else changed))
    return tamper


def _plan(change):
    return _edit_json("plan.json", change)


def _kernel(step, key, value):
    def change(plan):
        plan["steps"][step]["kernels"][0][key] = value
    return _plan(change)


def _arg(step, index, **value):
    def change(plan):
        plan["steps"][step]["kernels"][0]["args"][index] = {"arg": None, "workspace": None, "scalar": None,
                                                            "dtype": None, **value}
    return _plan(change)


def _tensor(name, key, value):
    def change(plan):
        plan["tensors"][name][key] = value
    return _plan(change)


def _image(name, key, value):
    def change(plan):
        plan["tensors"][name]["image"][key] = value
        plan["images"][plan["tensors"][name]["storage"]][key] = value
    return _plan(change)


def _swap(items, i, j):
    items[i], items[j] = items[j], items[i]


def _step_args(step, i, j):
    return _plan(lambda p: _swap(p["steps"][step]["args"], i, j))


def _launch_args(step, i, j):
    return _plan(lambda p: _swap(p["steps"][step]["kernels"][0]["args"], i, j))


def _update_all(entries: dict, change: dict) -> None:
    for entry in entries.values():
        entry.update(change)


def _output_everywhere(key, value):
    """The output tensor changed in the plan and in the manifest alike (so the manifest check agrees)."""
    def tamper(root: Path):
        _tensor("gv", key, value)(root)
        _edit_json("manifest.json", lambda m: _update_all(m["outputs"], {key: value}))(root)
    return tamper


def _input_everywhere(shape):
    def tamper(root: Path):
        _tensor("input", "shape", shape)(root)
        _edit_json("manifest.json", lambda m: _update_all(m["inputs"], {"shape": shape}))(root)
    return tamper


def _kernel_text(change):
    def tamper(root: Path):
        path = root / "kernels" / _first_kernel_file(root)
        path.write_bytes(gzip.compress(change(gzip.decompress(path.read_bytes()).decode()).encode()))
    return tamper


def _flip(rel, offset):
    def tamper(root: Path):
        data = bytearray((root / rel).read_bytes())
        data[offset % len(data)] ^= 0x5A
        (root / rel).write_bytes(bytes(data))
    return tamper


def _replace(rel, make):
    def tamper(root: Path):
        target = root / rel
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        make(target)
    return tamper


def _params(change):
    def tamper(root: Path):
        with np.load(root / "params.npz") as npz:
            params = {k: npz[k] for k in npz.files}
        np.savez(root / "params.npz", **change(params))
    return tamper


def _perturb(params):
    return {k: v + np.float32(0.01) for k, v in params.items()}


def _zip_declaring(path: Path, member: str, nbytes: int) -> None:
    """A params.npz whose `member` inflates to `nbytes` of zeros (a small file declaring a large one)."""
    import zipfile

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(member, bytes(nbytes))


def _first_kernel_file(root: Path) -> str:
    return sorted(p.name for p in (root / "kernels").iterdir())[0]


def _manifest_files(change):
    return _edit_json("manifest.json", lambda m: change(m["files"]))


HASHED = {  # the manifest is left alone: its sizes and hashes catch these
    **{f"params byte {o}": _flip("params.npz", o) for o in (0, 40, 300, 2000, -30, -1)},
    "params other weights, same size": _params(_perturb),
    "params truncated": lambda r: (r / "params.npz").write_bytes((r / "params.npz").read_bytes()[:500]),
    "params is a directory": _replace("params.npz", lambda p: p.mkdir()),
    "params is a FIFO": _replace("params.npz", lambda p: os.mkfifo(p)),
    **{f"plan byte {o}": _flip("plan.json", o) for o in (5, 900, -10)},
    "plan global size x64": _kernel(1, "global_size", [2048, 512, 64]),
    "plan local size 0": _kernel(0, "local_size", [0]),
    "plan is a FIFO": _replace("plan.json", lambda p: os.mkfifo(p)),
    "plan links outside": _replace("plan.json", lambda p: p.symlink_to("/etc/hostname")),
    "plan missing": lambda r: (r / "plan.json").unlink(),
    **{f"kernel {i} byte flip":
       (lambda i: lambda r: _flip(f"kernels/{sorted(os.listdir(r / 'kernels'))[i]}", 200)(r))(i)
       for i in range(9)},
    "kernel links outside": lambda r: _replace(f"kernels/{_first_kernel_file(r)}",
                                               lambda p: p.symlink_to("/etc/hostname"))(r),
    "kernel is a FIFO": lambda r: _replace(f"kernels/{_first_kernel_file(r)}", lambda p: os.mkfifo(p))(r),
    "kernels removed": lambda r: shutil.rmtree(r / "kernels"),
    "host library byte flip": _flip("lib.so", 5000),
    "manifest lists ../": _manifest_files(lambda f: f.update({"../outside.txt": {"bytes": 1, "sha256": "0"}})),
    "manifest lists an absolute path": _manifest_files(lambda f: f.update({"/etc/hostname": {"bytes": 1,
                                                                                              "sha256": "0"}})),
    "manifest of sizes only": _manifest_files(lambda f: f.update({k: 1 for k in f})),
    "manifest drops plan": _manifest_files(lambda f: f.__delitem__("plan.json")),
    "manifest not JSON": lambda r: (r / "manifest.json").write_text("{oops"),
    "manifest a list": lambda r: (r / "manifest.json").write_text("[]"),
    "manifest nested deep": lambda r: (r / "manifest.json").write_text("[" * 100_000 + "]" * 100_000),
    "manifest is a FIFO": _replace("manifest.json", lambda p: os.mkfifo(p)),
    "manifest missing": lambda r: (r / "manifest.json").unlink(),
}

RESIGNED = {  # the manifest's hashes are rewritten too: the path and plan checks must catch these
    "local size 0": _kernel(0, "local_size", [0]),
    "local size negative": _kernel(0, "local_size", [-64]),
    "global not a multiple of local": _kernel(0, "global_size", [1000]),
    "work-group over the device's": _plan(lambda p: p["steps"][0]["kernels"][0].update(global_size=[1 << 20],
                                                                                       local_size=[1 << 20])),
    "four launch dimensions": _kernel(1, "local_size", [8, 8, 1, 1]),
    "global sizes as text": _kernel(0, "global_size", ["1024"]),
    "global sizes a number": _kernel(0, "global_size", 1024),
    "local memory 1 TiB": _kernel(0, "local_mem_bytes", 1 << 40),
    "unknown kernel": _kernel(0, "name", "no_such_kernel"),
    "kernel name a path": _kernel(0, "name", "../../etc/passwd"),
    "arg index 99": _arg(0, 0, arg=99),
    "arg index -1": _arg(0, 1, arg=-1),
    "arg both tensor and scalar": _arg(0, 0, arg=0, scalar=1.0, dtype="float32"),
    "arg of nothing": _arg(0, 0),
    "arg workspace 5": _arg(1, 0, workspace=5),
    "scalar of dtype float99": _arg(1, 0, scalar=1, dtype="float99"),
    "scalar text": _arg(1, 0, scalar="one", dtype="int32"),
    "scalar NaN": _arg(1, 0, scalar=float("nan"), dtype="float32"),
    "one argument too few": _plan(lambda p: p["steps"][0]["kernels"][0]["args"].__delitem__(-1)),
    "one argument too many": _plan(lambda p: p["steps"][0]["kernels"][0]["args"].append(
        {"arg": 0, "workspace": None, "scalar": None, "dtype": None})),
    "tensors as a list": _plan(lambda p: p.update(tensors=list(p["tensors"].values()))),
    "dtype float99": _tensor("input", "dtype", "float99"),
    "dtype object": _tensor("gv", "dtype", "object"),
    "negative shape": _tensor("gv", "shape", [1, -10]),
    "huge shape": _tensor("gv", "shape", [1 << 30, 1 << 30]),
    "shape as text": _tensor("gv", "shape", "1x10"),
    "unknown storage": _tensor("gv", "storage", "s99"),
    "unknown kind": _tensor("gv", "kind", "weird"),
    "storage of 4 B": _plan(lambda p: p["storage"].update(s0=4)),
    "storage negative": _plan(lambda p: p["storage"].update(s0=-1)),
    "storage as text": _plan(lambda p: p["storage"].update(s0="big")),
    "image width off": _image("lv_1", "width", 33),
    "image layers off": _image("lv_1", "layers", 1),
    "image channel float64": _image("lv_1", "channel_type", "float64"),
    "image scope unknown": _image("lv_1", "scope", "global.texture-3d"),
    "image tensor in a buffer": _plan(lambda p: p["tensors"]["lv_1"].update(image=None, scope="global")),
    "buffer tensor in an image": _tensor("input", "storage", "i0"),
    "tensor image unlike its storage": _plan(lambda p: p["tensors"]["lv_1"]["image"].update(height=16)),
    "unknown program": _plan(lambda p: p["steps"][0].update(program="nothing")),
    "program path ../": _plan(lambda p: p["programs"].update(softmax="../../../../etc/hostname")),
    "program path absolute": _plan(lambda p: p["programs"].update(softmax="/etc/hostname")),
    "program path unlisted": _plan(lambda p: p["programs"].update(softmax="manifest.json")),
    "step names an unknown tensor": _plan(lambda p: p["steps"][2]["args"].__setitem__(0, "nothing")),
    "unknown input": _plan(lambda p: p.update(inputs=["nothing"])),
    "inputs as text": _plan(lambda p: p.update(inputs="input")),
    "steps as an object": _plan(lambda p: p.update(steps={"0": p["steps"][0]})),
    "plan a list": _plan(lambda p: [p]),
    "plan format 99": _plan(lambda p: p.update(format=99)),
    "step field unknown": _plan(lambda p: p["steps"][0].update(colour="red")),
    "params bit flip": _flip("params.npz", 1200),
    "params header flip": _flip("params.npz", 60),
    "params truncated": lambda r: (r / "params.npz").write_bytes((r / "params.npz").read_bytes()[:3000]),
    "params extra array": _params(lambda p: {**p, "bogus": np.zeros(3, np.float32)}),
    "params complex": _params(lambda p: {k: v.astype(np.complex64) for k, v in p.items()}),
    "params other shape": _params(lambda p: {k: v.reshape(-1) for k, v in p.items()}),
    "params missing one": _params(lambda p: dict(list(p.items())[1:])),
    "kernel source not gzip": lambda r: (r / "kernels" / _first_kernel_file(r)).write_bytes(b"\xff\xfe\x00\x80"),
    "kernel source not text": lambda r: (r / "kernels" / _first_kernel_file(r)).write_bytes(
        gzip.compress(b"\xff\xfe\x00\x80")),
    "kernel links to a sibling": lambda r: _replace(f"kernels/{_first_kernel_file(r)}", lambda p: p.symlink_to(
        sorted(os.listdir(r / "kernels"))[-1]))(r),
    "global size 2^31": _plan(lambda p: p["steps"][0]["kernels"][0].update(global_size=[1 << 31], local_size=[64])),
    "global size 2^40": _plan(lambda p: p["steps"][0]["kernels"][0].update(global_size=[1 << 20, 1 << 20],
                                                                           local_size=[64, 1])),
    "buffer and image argument swapped": _plan(lambda p: p["steps"][0]["kernels"][0].update(
        args=list(reversed(p["steps"][0]["kernels"][0]["args"])))),
    "scalar where a buffer goes": _arg(8, 1, scalar=1, dtype="int32"),
    "output dtype int32": _tensor("gv", "dtype", "int32"),
    "output shape changed": _tensor("gv", "shape", [1, 5]),
    "output another tensor": _plan(lambda p: p.update(outputs=["lv4_1"])),
    "params member declares 64 MiB": _replace("params.npz", lambda p: _zip_declaring(p, "param0.npy", 64 << 20)),
    # consistent with themselves, so only the kernels' contract lines and the dataflow catch these
    "weight and bias swapped": _step_args(1, 1, 2),
    "weight and bias swapped in the launch": _launch_args(1, 1, 2),
    "input and output of the same shape swapped": _step_args(3, 0, 3),
    "input and output swapped in the launch": _launch_args(2, 0, 1),
    "launch size halved": _kernel(1, "global_size", [512, 4, 1]),
    "global and local size halved": _plan(lambda p: p["steps"][0]["kernels"][0].update(global_size=[512],
                                                                                       local_size=[32])),
    "steps reversed": _plan(lambda p: p["steps"].reverse()),
    "two steps swapped": _plan(lambda p: _swap(p["steps"], 3, 4)),
    "a middle step removed": _plan(lambda p: p["steps"].__delitem__(5)),
    "the last step removed": _plan(lambda p: p["steps"].__delitem__(-1)),
    "the first step removed": _plan(lambda p: p["steps"].__delitem__(0)),
    "a step repeated": _plan(lambda p: p["steps"].insert(2, p["steps"][1])),
    "output dtype int32, manifest too": _output_everywhere("dtype", "int32"),
    "output shape changed, manifest too": _output_everywhere("shape", [1, 5]),
    "input shape changed, manifest too": _input_everywhere([1, 3, 16, 16]),
    "intermediate dtype float16": _tensor("lv3", "dtype", "float16"),
    "kernel contract line removed": _kernel_text(lambda text: text.split("\n", 1)[1]),
    "kernel contract line malformed": _kernel_text(lambda text: text.replace("{", "[", 1)),
    # harmless edits: these must run, to exactly the untampered output
    "plan re-serialised": _plan(lambda p: json.loads(json.dumps(p, sort_keys=True))),
    "manifest metadata edited": _edit_json("manifest.json", lambda m: m.update(compiled_on="elsewhere")),
}


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    """{case name: artifact directory}, plus the untampered artifact and its output."""
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    work = tmp_path_factory.mktemp("tamper")
    clean = compile_model("tiny", work / "clean", CompileOptions(host="native", memory="texture"))
    made = {}
    for group, table in (("hashed", HASHED), ("resigned", RESIGNED)):
        for name, tamper in table.items():
            root = shutil.copytree(clean, work / f"{group}-{len(made)}", symlinks=True)
            tamper(root)
            if group == "resigned":
                resign(root)
            made[f"{group}: {name}"] = root
    return clean, made


WORKER = """
import json, sys, traceback
import numpy as np
from adreno.artifact.format import Artifact
from adreno.cache import ProgramCache
from adreno.errors import AdrenoError
from adreno.opencl.device import select_device
from adreno.opencl.executor import Executor
from adreno.artifact.format import random_inputs

device, cache = select_device("pocl"), ProgramCache()
jobs = json.loads(sys.argv[1])
reference = None
results = {}
for name, path in jobs:
    print(name, file=sys.stderr, flush=True)  # a crash leaves this as the last line
    try:
        artifact = Artifact.load(path)
        outputs = Executor(artifact, device, cache=cache).run(random_inputs(artifact.input_specs(), 0))
        results[name] = ["ran", [o.tolist() for o in outputs]]
    except AdrenoError as err:
        results[name] = ["refused", str(err)]
    except Exception:
        results[name] = ["traceback", traceback.format_exc()]
print(json.dumps(results))
"""


def test_tampered_artifacts_are_refused_or_run_exactly(cases):
    clean, made = cases
    assert len(made) >= 60
    jobs = [["untampered", str(clean)], *[[name, str(path)] for name, path in made.items()]]
    done = subprocess.run([sys.executable, "-c", WORKER, json.dumps(jobs)], capture_output=True, text=True,
                          timeout=240, cwd=HERE)
    assert done.returncode == 0, f"crashed ({done.returncode}) on: {done.stderr.strip().splitlines()[-1:]}"
    results = json.loads(done.stdout.strip().splitlines()[-1])
    reference = results.pop("untampered")
    assert reference[0] == "ran", reference
    tracebacks = {n: r[1] for n, r in results.items() if r[0] == "traceback"}
    assert not tracebacks, tracebacks
    ran = {n for n, r in results.items() if r[0] == "ran"}
    assert ran == {"resigned: plan re-serialised", "resigned: manifest metadata edited"}, ran
    assert all(results[n][1] == reference[1] for n in ran), "a run that is allowed gives the untampered output"
    assert all("\n" not in r[1] for r in results.values() if r[0] == "refused"), "refusals are one line"
    print(f"{len(results)} tampered artifacts: {len(results) - len(ran)} refused, {len(ran)} ran exactly")


@pytest.mark.parametrize("name", ["hashed: params other weights, same size", "hashed: plan global size x64",
                                  "hashed: manifest is a FIFO", "resigned: local size 0", "resigned: storage of 4 B",
                                  "resigned: params bit flip", "resigned: program path ../"])
def test_cli_refuses_with_one_line(cases, name):
    _, made = cases
    done = subprocess.run([sys.executable, "-m", "adreno.cli", "run", str(made[name]), "--repeat", "1", "-q"],
                          capture_output=True, text=True, timeout=120, cwd=HERE)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and done.stderr.strip().startswith("error:")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_unchecked_says_what_it_skips_and_runs_a_hand_edit(cases, tmp_path):
    """--unchecked runs an artifact whose kernel was edited by hand (the size and hash differ); the plan checks
    still hold."""
    clean, made = cases
    edited = shutil.copytree(clean, tmp_path / "edited")
    kernel = edited / "kernels" / _first_kernel_file(edited)
    kernel.write_bytes(gzip.compress(gzip.decompress(kernel.read_bytes()) + b"\n// edited by hand\n"))
    run = [sys.executable, "-m", "adreno.cli", "run", "--repeat", "1", "-q", "--unchecked"]
    checked = subprocess.run(run[:-1] + [str(edited)], capture_output=True, text=True, timeout=120, cwd=HERE)
    assert checked.returncode == 2 and "changed since compile" in checked.stderr
    done = subprocess.run(run + [str(edited)], capture_output=True, text=True, timeout=120, cwd=HERE)
    assert done.returncode == 0, done.stderr
    assert "--unchecked: the sizes and SHA-256" in done.stderr
    refused = subprocess.run(run + [str(made["resigned: local size 0"])], capture_output=True, text=True,
                             timeout=120, cwd=HERE)
    assert refused.returncode == 2 and "local size" in refused.stderr
