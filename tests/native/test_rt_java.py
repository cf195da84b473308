"""The Java API (native/java/adreno/rt, JNI in native/jni) on the desktop JVM: `try (AdrenoModel m = ...)` gives
the launch-plan executor's outputs through float arrays and direct ByteBuffers alike, and a bad artifact or a run
after close throws an AdrenoException carrying the library's status code and message; `selectShapes` chooses an
artifact's shape set by its input shapes."""

from __future__ import annotations

import numpy as np

from adreno.artifact.format import Artifact
from adreno.opencl.executor import Executor

from .rt_programs import HERE, build_java, run_java


def test_java_gives_the_executor_outputs_and_throws_with_the_message(native_tiny, java_api, tmp_path):
    path = native_tiny["texture"]
    x = np.random.default_rng(8).standard_normal((1, 3, 32, 32)).astype(np.float32)
    x.tofile(tmp_path / "x.bin")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "plan.json").write_text("{")
    (bad / "manifest.json").write_text("{")
    build_java(HERE / "JavaCheck.java", java_api)
    proc = run_java(java_api, "JavaCheck", path, tmp_path / "x.bin", tmp_path / "y.bin", bad)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:3] == ["input input float32 [1, 3, 32, 32]", "output probs float32 [1, 10]", "buffers agree true"]
    assert lines[3] == "after close 6 the model is closed (or was never opened)"
    assert lines[4].startswith("bad artifact 2 ") and ".json: not JSON" in lines[4]
    expected = Executor(Artifact.load(path)).run([x])[0]
    assert np.abs(expected).max() > 0
    assert np.array_equal(np.fromfile(tmp_path / "y.bin", np.float32).reshape(expected.shape), expected)


def test_java_selects_each_shape_set_and_refuses_another_shape(native_shape_sets, java_api, tmp_path):
    """`selectShapes` chooses the set as the C API does: each width's outputs are TVM's runtime's for its set, the
    ports follow the selection, and a width of no set is an AdrenoException listing the sets."""
    from adreno.native.vm_executor import VmExecutor

    path, inputs = native_shape_sets
    for x in inputs:
        x.tofile(tmp_path / f"w{x.shape[3]}.bin")
    build_java(HERE / "JavaShapes.java", java_api)
    proc = run_java(java_api, "JavaShapes", path, tmp_path, 16, "no:20", 8)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "sets 2 selected 0" and lines[1] == "selected 1 input x float32 [1, 3, 8, 16]"
    assert lines[2].startswith("refused 1 no shape set of this artifact takes x 1x3x8x20; it was compiled for "
                               "x 1x3x8x8; x 1x3x8x16") and lines[2].endswith(" selected 1")
    assert lines[3] == "selected 0 input x float32 [1, 3, 8, 8]"
    for index, x in enumerate(inputs):
        expected = VmExecutor(Artifact.load(path, shape_set=index)).run([x])[0]
        got = np.fromfile(tmp_path / f"w{x.shape[3]}.out", np.float32).reshape(expected.shape)
        assert np.array_equal(got, expected), index
