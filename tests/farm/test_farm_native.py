"""TVM-native runner over a real TVM RPC server, with the CPU target (no phone here): export, upload, load,
allocate (in each argument's memory scope), time_evaluator, download, compare."""

from __future__ import annotations

import numpy as np
import pytest

from adreno.farm.native import NativeArg, NativeRunner, allocate, export_native
from adreno.farm.deadline import Timeouts
from adreno.runner import RunInput


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


def test_native_runner_through_the_tracker(axpy, farm2):
    from tvm import rpc

    server = rpc.Server(host="127.0.0.1", port=9700, port_end=9900, key="cpu-native", silent=True,
                        tracker_addr=("127.0.0.1", farm2.tracker_port))
    try:
        runner = NativeRunner(tracker=farm2.tracker, key="cpu-native", timeouts=Timeouts(request=10))
        result = runner.run(RunInput(axpy, repeat=3, tag="t"))
        runner.close()
    finally:
        server.terminate()
    assert result.ok and result.device.startswith("cpu-native@127.0.0.1:"), result.error


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
