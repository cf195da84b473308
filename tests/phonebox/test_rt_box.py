"""The app library's C API in the AArch64 box: tests/native/rt_check.c cross-compiled against the header and the
box's libadreno_rt.so (what `make native-aarch64` builds), run on a `--cc` artifact from source and then from its
blob (which builds nothing), outputs bit-identical to the same program's on x86 with the model compiled --host
native."""

from __future__ import annotations

import json
import subprocess

import numpy as np

from ..native.rt_programs import HEADER_DIR, HERE, build_c, run_check
from .conftest import CROSS_CC
from .test_phonebox import compiled


def test_the_c_api_in_the_box_from_source_then_its_blob(box, tmp_path):
    artifacts = compiled("tiny", tmp_path, memory="texture")
    program = tmp_path / "rt_check_arm"
    subprocess.run([CROSS_CC, "-std=c11", "-O1", f"-I{HEADER_DIR}", str(HERE / "rt_check.c"), f"-L{box.native}",
                    "-ladreno_rt", f"-Wl,-rpath,{box.native}", "-Wl,--allow-shlib-undefined", "-pthread", "-o",
                    str(program)], check=True, capture_output=True, text=True)
    x = np.random.default_rng(8).standard_normal((1, 3, 32, 32)).astype(np.float32)
    io, blob = tmp_path / "io", tmp_path / "programs.bin"
    io.mkdir()
    x.tofile(io / "in0.bin")
    starts = []
    for _ in range(2):
        proc = box.run(program, artifacts["arm"], io, blob)
        assert proc.returncode == 0, proc.stderr
        starts.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert [(s["blob"], s["from_source"]) for s in starts] == [("absent", 1), ("loaded", 0)]
    rt_check = build_c(HERE / "rt_check.c", tmp_path / "rt_check")
    _, on_x86 = run_check(rt_check, artifacts["x86"], [x], tmp_path / "x86")
    assert np.array_equal(np.fromfile(io / "out0.bin", np.float32).reshape(1, 10), on_x86[0])
