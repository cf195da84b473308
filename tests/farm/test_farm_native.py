"""TVM-native runner over real TVM RPC servers (no phone here): export, upload, load, allocate (in each argument's
memory scope), time_evaluator, download, compare. With the CPU target on a server without OpenCL; and, for the
phone path, with tuner candidates (texture ones on OpenCL images) on a loopback server that loaded adreno's OpenCL
plugin, standing in for a phone's `tvm_rpc`, up to `adreno tune --runtime tvm` records that `adreno compile
--records` applies."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from adreno.runners.native import NativeArg, NativeRunner, allocate, export_native, load_native
from adreno.farm.deadline import Timeouts
from adreno.runners.interface import RunInput


@pytest.fixture(scope="module")
def axpy(tmp_path_factory):
    import tvm
    from tvm import te

    a = te.placeholder((4096,), name="a")
    b = te.placeholder((4096,), name="b")
    c = te.compute((4096,), lambda i: a[i] * 2.0 + b[i], name="c")
    func = te.create_prim_func([a, b, c]).with_attr("global_symbol", "axpy")
    lib = tvm.compile(tvm.IRModule({"axpy": func}), target="llvm")
    args = [NativeArg("a", [4096]), NativeArg("b", [4096]), NativeArg("c", [4096], role="output")]
    return export_native(lib, tmp_path_factory.mktemp("native") / "axpy", "axpy", args, device="cpu")


@pytest.fixture(scope="module")
def rpc_server():
    from tvm import rpc

    server = rpc.Server(host="127.0.0.1", port=9500, port_end=9700, key="", silent=True)
    yield f"127.0.0.1:{server.port}"
    server.terminate()


def test_native_runner_measures_and_checks_over_rpc(axpy, rpc_server):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(4096).astype("float32"), rng.standard_normal(4096).astype("float32")
    runner = NativeRunner(server=rpc_server, timeouts=Timeouts(request=10, run=10))
    try:
        good = runner.run(RunInput(axpy, inputs=[a, b], reference=[a * 2 + b], repeat=5, warmup=1, tag="ok"))
        wrong = runner.run(RunInput(axpy, inputs=[a, b], reference=[a * 3 + b], repeat=2, tag="wrong"))
        missing = runner.run(RunInput(axpy + "-missing", tag="missing"))
    finally:
        runner.close()
    assert good.ok and len(good.seconds) == 5 and good.max_error == 0.0, good.error
    assert {"upload", "build", "run", "download"} <= set(good.extra["stage_seconds"])
    assert wrong.stage == "check" and not wrong.ok
    assert not missing.ok and "native.json" in missing.error
    assert missing.stage == "build" and not missing.infrastructure, "the candidate's failure, not the farm's"


def test_native_runner_through_the_tracker(axpy, farm2, tiny_tasks, tmp_path):
    """A server of a key leased from the tracker (as a phone's `tvm_rpc` under `adreno farm android`: registered
    through the relay that adds the farm's token), with the plugin: a CPU library and a texture candidate both run
    on it."""
    from tvm import rpc

    from adreno.farm.relay import RegistrationRelay
    from adreno.native.plugin import PLUGIN_PATH
    from adreno.tune.native_build import NativeBuild

    task = next(t for t in tiny_tasks if t.family == "conv2d_1x1")
    built = task.build(task.default_config(), str(tmp_path / "c"), NativeBuild())
    assert built.artifact, built.error
    inputs = task.inputs(0)
    relay = RegistrationRelay(("127.0.0.1", farm2.tracker_port), farm2.token)
    server = rpc.Server(host="127.0.0.1", port=9700, port_end=9900, key="cl-native", silent=True,
                        tracker_addr=("127.0.0.1", relay.port), load_library=str(PLUGIN_PATH))
    try:
        runner = NativeRunner(tracker=farm2.tracker, key="cl-native", timeouts=Timeouts(request=10, run=30))
        result = runner.run(RunInput(axpy, repeat=3, tag="t"))
        texture = runner.run(RunInput(built.artifact, inputs, task.reference(inputs), repeat=2, tag="texture"))
        runner.close()
    finally:
        server.terminate()
        relay.close()
    assert result.ok and result.device.startswith("cl-native@127.0.0.1:"), result.error
    assert texture.ok and texture.max_error < 1e-4, texture.error


def test_texture_arguments_are_allocated_in_their_memory_scope():
    calls = []

    def recorder(shape, dtype, device, mem_scope=None):  # noqa: ARG001 - the allocator's signature
        calls.append((shape, dtype, mem_scope))

    allocate(NativeArg("x", [1, 4, 8, 8, 4], scope="global.texture"), "dev", recorder)
    allocate(NativeArg("w", [16, 4, 3, 3, 4], scope="global.texture-weight"), "dev", recorder)
    allocate(NativeArg("y", [64]), "dev", recorder)
    assert calls == [((1, 4, 8, 8, 4), "float32", "global.texture"),
                     ((16, 4, 3, 3, 4), "float32", "global.texture-weight"), ((64,), "float32", None)]
    assert NativeArg("x", [1], scope="global.texture").is_texture and not NativeArg("y", [1]).is_texture


@pytest.fixture(scope="module")
def opencl_server():
    """A real `tvm.rpc` server on loopback, in its own process, with adreno's OpenCL plugin loaded (one copy, by
    its one path): the stand-in for a phone's `tvm_rpc` with TVM's OpenCL runtime."""
    from tvm import rpc

    from adreno.native import plugin

    status = plugin.load()
    if not status.loaded:
        pytest.fail(status.problem)
    server = rpc.Server(host="127.0.0.1", port=9900, port_end=10100, key="", silent=True,
                        load_library=status.path)
    yield f"127.0.0.1:{server.port}"
    server.terminate()


@pytest.fixture(scope="module")
def tiny_tasks():
    """`adreno tune`'s tasks of the zoo's tiny model in texture memory (no layout tasks: --runtime tvm's)."""
    from adreno.options import CompileOptions
    from adreno.tune.extract import extract_tasks

    return extract_tasks("tiny", CompileOptions(target="adreno-740", memory="texture"), layouts=False)


@pytest.mark.parametrize("family", ["conv2d_texture", "reduce"])
def test_tuner_candidate_runs_through_tvm_runtime_on_a_plugin_server(tiny_tasks, opencl_server, tmp_path, family):
    from adreno.options import Host
    from adreno.tune.native_build import NativeBuild

    task = next(t for t in tiny_tasks if t.family == family)  # the 3x3 conv on images; the softmax on buffers
    built = task.build(task.default_config(), str(tmp_path / "c"), NativeBuild(Host.NATIVE))
    assert built.artifact, built.error
    args = load_native(built.artifact)["args"]
    assert [a.scope for a in args] == (task.scopes or ["global"] * len(args))
    assert any(a.is_texture for a in args) == (family == "conv2d_texture"), "a texture task's arguments are images"
    inputs = task.inputs(0)
    reference = task.reference(inputs)
    runner = NativeRunner(server=opencl_server, timeouts=Timeouts(request=10, run=30))
    try:
        good = runner.run(RunInput(built.artifact, inputs, reference, repeat=3, tag="ok"))
        wrong = runner.run(RunInput(built.artifact, inputs, [r + 1.0 for r in reference], repeat=1, tag="wrong"))
    finally:
        runner.close()
    assert good.ok and len(good.seconds) == 3 and good.max_error < 1e-4, good.error
    assert good.device == opencl_server and "build" in good.extra["stage_seconds"]
    assert wrong.stage == "check" and not wrong.ok, "the output is checked, so a wrong one fails"


def adreno(*args, timeout=300):
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, f"rc {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def test_tune_through_the_plugin_server_and_compile_its_records(opencl_server, tmp_path):
    records = tmp_path / "records.jsonl"
    adreno("tune", "tiny", "--runtime", "tvm", "--server", opencl_server, "--host", "native", "--trials", 4,
           "--batch", 2, "--repeat", 2, "--records", records, "-q")
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(lines) == 4 and {r["device"] for r in lines} == {"pocl-cpu|tvm-rpc"}
    assert all(r["error"] is None and r["seconds"] for r in lines), lines
    assert any("nchw4c" in r["workload"] for r in lines), "texture kernels were measured"
    out = tmp_path / "tiny"
    adreno("compile", "tiny", "--records", records, "--host", "native", "-o", out, "-q")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tuned_kernels"] > 0 and manifest["memory"] == "texture"
    adreno("run", out, "--check", "--repeat", 1)


def test_an_unreachable_server_is_the_farms_failure_not_the_candidates(axpy):
    from adreno.farm.common import free_port

    runner = NativeRunner(server=f"127.0.0.1:{free_port()}", timeouts=Timeouts(request=5))
    result = runner.run(RunInput(axpy, tag="gone"))
    runner.close()
    assert result.infrastructure and not result.ok, result  # the tuner records nothing and measures it again


@pytest.mark.parametrize("flags, says", [
    (["--runtime", "tvm"], "give --tracker HOST:PORT"),
    (["--server", "127.0.0.1:9"], "needs --runtime tvm"),
    (["--runtime", "tvm", "--server", "127.0.0.1:9"], "give --cc"),
    (["--runtime", "tvm", "--server", "127.0.0.1:9", "--host", "native", "--precision", "fp16"], "fp32 images only"),
])
def test_tune_runtime_tvm_refuses_options_that_do_not_go_together(flags, says, tmp_path, capsys, monkeypatch):
    from adreno.cli.main import main

    monkeypatch.delenv("TVM_NDK_CC", raising=False)
    assert main(["tune", "tiny", *flags, "--records", str(tmp_path / "r.jsonl")]) == 2
    error = capsys.readouterr().err.strip()
    assert says in error and len(error.splitlines()) == 1, error
    assert not (tmp_path / "r.jsonl").exists()
