"""The Java API (native/java/adreno/rt, JNI in native/jni) on the desktop JVM: `try (AdrenoModel m = ...)` gives
the launch-plan executor's outputs through float arrays and direct ByteBuffers alike, and a bad artifact or a run
after close throws an AdrenoException carrying the library's status code and message."""

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
