"""The `adreno` command as a user runs it: a subprocess, exit codes, human and JSON output."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest


def adreno(*args, check_rc=0):
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == check_rc, f"rc {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def test_help_explains_each_command():
    out = adreno("--help").stdout
    for command in ("models", "compile", "run", "devices"):
        assert command in out
    assert "--check" in adreno("run", "--help").stdout
    assert "--input-shape" in adreno("compile", "--help").stdout


def test_models_lists_the_zoo():
    rows = json.loads(adreno("models", "--json").stdout)
    assert {r["name"] for r in rows} >= {"resnet18", "mobilenetv2", "tiny"}
    assert "1x3x224x224" in adreno("models").stdout


def test_compile_run_check_json(tmp_path):
    out = tmp_path / "tiny"
    compiled = adreno("compile", "tiny", "--target", "adreno-650", "-o", out)
    assert "compiled tiny for adreno-650" in compiled.stdout
    sizes = json.loads((out / "manifest.json").read_text())["sizes"]
    assert sizes["weights"] == (out / "params.npz").stat().st_size
    assert sizes["host_library"] == (out / "lib.tar").stat().st_size
    assert sizes["kernels"] == sum(p.stat().st_size for p in (out / "kernels").iterdir())
    assert f"size: weights {sizes['weights']} B" in compiled.stdout
    assert "lowering for adreno-650" in compiled.stderr, "progress lines go to stderr"
    result = json.loads(adreno("run", out, "--check", "--repeat", "3", "--json", "--output", tmp_path / "y.npz").stdout)
    assert result["check"]["ok"] and result["check"]["outputs"][0]["max_abs_error"] < 1e-4
    assert result["kernels"] and abs(sum(k["share"] for k in result["kernels"]) - 1) < 0.01
    from adreno.frontend import zoo

    assert np.load(tmp_path / "y.npz")[zoo.get_model("tiny").graph.output[0].name].shape == (1, 10), "model names"
    text = adreno("run", out, "--repeat", "2", "--check").stdout
    assert "median ms" in text and "check output 0 vs onnxruntime" in text and ": OK" in text


def test_check_mismatch_exits_1(tmp_path):
    from adreno.frontend import zoo

    out = tmp_path / "tiny"
    adreno("compile", "tiny", "-o", out, "-q")
    other = tmp_path / "other.onnx"
    onnx.save(zoo.get_model("tiny", seed=7), other)
    result = adreno("run", out, "--check", "--reference", other, "--repeat", "1", "--json", check_rc=1)
    assert json.loads(result.stdout)["check"]["ok"] is False


def test_check_of_a_wrong_output_shape_is_a_mismatch(tmp_path):
    """A reference whose output has another shape is a reported mismatch (exit 1), not a broadcast error."""
    from tests.conftest import single_op_model

    out = tmp_path / "tiny"
    adreno("compile", "tiny", "-o", out, "-q", "--memory", "buffer")
    (name, spec), = json.loads((out / "manifest.json").read_text())["inputs"].items()
    other = tmp_path / "identity.onnx"
    onnx.save(single_op_model("Identity", {name: spec["shape"]}), other)
    result = adreno("run", out, "--check", "--reference", other, "--repeat", "1", check_rc=1)
    assert f"shape [1, 10], onnxruntime's {spec['shape']}: MISMATCH" in result.stdout, result.stdout
    row = json.loads(adreno("run", out, "--check", "--reference", other, "--repeat", "1", "--json",
                            check_rc=1).stdout)["check"]["outputs"][0]
    assert row["problem"] and row["max_abs_error"] is None


def test_check_tolerance_follows_the_image_precision(tmp_path):
    """Half-float images round every stored activation: --check of an fp16 artifact uses the 5% bound."""
    checks = {}
    for precision in ("fp32", "fp16"):
        out = tmp_path / precision
        adreno("compile", "tiny", "-o", out, "-q", "--memory", "texture", "--precision", precision)
        checks[precision] = json.loads(adreno("run", out, "--check", "--repeat", "1", "--json").stdout)["check"]
    assert checks["fp32"]["rtol"] == 1e-3 and checks["fp16"]["rtol"] == 5e-2
    assert checks["fp32"]["ok"] and checks["fp16"]["ok"]
    assert checks["fp16"]["outputs"][0]["max_abs_error"] > checks["fp32"]["outputs"][0]["max_abs_error"]


@pytest.mark.parametrize("args, message", [
    (["compile", "no_such_model", "-o", "{tmp}/x"], "no such file, and not a bundled model"),
    (["compile", "tiny", "--target", "adreno-1", "-o", "{tmp}/x"], "unknown Adreno target 'adreno-1'; known"),
    (["compile", "tiny", "--input-shape", "oops", "-o", "{tmp}/x"], "expected NAME:D0,D1"),
    (["run", "{tmp}/not_there"], "no such artifact directory"),
    (["run", "{tmp}", "--device", "42"], "manifest.json is missing"),
    (["compile", "tiny", "-o", "{tmp}/file/sub"], "cannot create the artifact directory"),
    (["compile", "tiny", "-o", "{tmp}/file"], "exists and is not a directory"),
    (["run", "{tmp}", "--repeat", "0"], "--repeat must be positive, not 0"),
    (["run", "{tmp}", "--rtol", "-1"], "--rtol must be >= 0"),
    (["tune", "tiny", "--trials", "-5"], "--trials must be positive, not -5"),
    (["tune", "tiny", "--batch", "0"], "--batch must be positive"),
    (["tune", "tiny", "--repeat", "0"], "--repeat must be positive"),
    (["run", "{tmp}", "--repeat", "99999999999999999999"], "--repeat must be at most 2147483647"),
    (["run", "{tmp}", "--output", "{tmp}/params.npz"], "is inside the artifact"),
    (["run", "{tmp}", "--timeout", "1e15"], "--timeout must be at most 2147483647"),
    (["tune", "tiny", "--trials", "99999999999999999999"], "--trials must be at most 2147483647"),
    (["tune", "tiny", "--tracker", "127.0.0.1:99999"], "port in 1..65535"),
    (["tune", "tiny", "--tracker", "127.0.0.1:0"], "port in 1..65535"),
])
def test_user_errors_are_one_clear_line(tmp_path, args, message):
    (tmp_path / "file").write_text("a file, not a directory")
    proc = adreno(*[a.format(tmp=tmp_path) for a in args], check_rc=2)
    last = proc.stderr.strip().splitlines()[-1]  # progress lines may come first
    assert last.startswith("error:") and message in last and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("args, message", [
    (["compile", "tiny", "--memory", "foo"], "error: adreno compile: argument --memory: invalid choice: 'foo'"),
    (["run", "x", "--repeat", "abc"], "error: adreno run: argument --repeat: invalid int value: 'abc'"),
    (["farm", "agent", "--port", "x"], "error: adreno farm agent: argument --port: invalid int value: 'x'"),
    (["cache"], "error: adreno cache: the following arguments are required"),
])
def test_argparse_refusals_are_one_line_too(args, message):
    """A value of the wrong type or outside an option's choices: the same one-line form as every other user error,
    naming the command's --help instead of printing its usage."""
    proc = adreno(*args, check_rc=2)
    assert proc.stderr.strip().startswith(message) and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"(see `adreno {args[0]}" in proc.stderr


def test_a_value_starting_with_a_dash_is_told_to_use_equals(tiny_artifact):
    """argparse reads `-O3` after --build-options as an option of its own and says the value is missing: the line
    says how to give it; an option that really lacks its value gets no such hint."""
    proc = adreno("cache", "export", tiny_artifact, "--build-options", "-O3", check_rc=2)
    assert "expected one argument; a value starting with '-' is read as an option: write --build-options=-O3" \
        in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
    proc = adreno("cache", "export", tiny_artifact, "--build-options", check_rc=2)
    assert "expected one argument (see" in proc.stderr and "--build-options=" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("module, args, message", [
    ("adreno.cli", ["tune", "tiny", "--plot", "{tmp}/x.foo"], "cannot write a .foo plot; give a file ending in one of"),
    ("adreno.cli", ["tune", "tiny", "--plot", "{tmp}/x.pgf"], "cannot write a .pgf plot"),
    ("adreno.cli", ["cache", "export", "{artifact}", "--no-cache", "--build-options=-cl-bogus"],
     "rejects the build options '-cl-kernel-arg-info -cl-bogus': Invalid build option: -cl-bogus"),
    ("adreno.cli", ["cache", "export", "{artifact}", "--no-cache", "--build-options=-Dfloat=garbage"],
     "unknown type name 'garbage'; full build log: "),
    ("adreno.runners.offline", ["{tmp}/none"], "not a batch (no batch.json"),
    ("adreno.runners.offline", ["{tmp}", "--repeat", "0"], "--repeat must be positive, not 0"),
    ("adreno.runners.offline", ["{tmp}", "--jobs", "-1"], "--jobs must be positive, not -1"),
    ("adreno.runners.offline", ["{tmp}", "--budget-s", "nan"], "--budget-s must be positive, not nan"),
    ("adreno.runners.offline", ["{tmp}", "--repeat", "x"], "argument --repeat: invalid int value: 'x'"),
])
def test_refusals_are_the_only_line(tiny_artifact, tmp_path, module, args, message):
    """A refusal is the whole of stderr, before the work (tuning, a batch's measurements): no build log, no
    compiler's "N errors generated.", no blank line, no traceback; the `python -m` entry points as `adreno`."""
    proc = subprocess.run([sys.executable, "-m", module, *[a.format(tmp=tmp_path, artifact=tiny_artifact)
                                                           for a in args]], capture_output=True, text=True, timeout=120)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), proc.stderr[-2000:]
    assert message in lines[0], lines[0]


def test_an_error_after_a_progress_line_starts_a_line_of_its_own(tiny_artifact, tmp_path):
    """The error ending a step comes after the step's open line (`  building ... ...`), not at its end; under --json
    (no progress lines) it is all of stderr, with no empty line before it."""
    np.save(tmp_path / "x.npy", np.ones((1, 3, 32, 32), np.float32))
    proc = adreno("run", tiny_artifact, "--input", tmp_path / "x.npy", check_rc=2)
    step, error = proc.stderr.splitlines()
    assert step.startswith("  reading ") and step.endswith("...") and \
        error.startswith("error: ") and "holds one unnamed array" in error, proc.stderr
    quiet = adreno("run", tiny_artifact, "--input", tmp_path / "x.npy", "--json", check_rc=2)
    assert quiet.stderr == error + "\n" and not quiet.stdout, quiet.stderr


@pytest.mark.parametrize("array, message", [
    (np.full((1, 3, 32, 32), 2 ** 24 + 1, np.int64), "int64 values that float32 cannot represent exactly"),
    (np.full((1, 3, 32, 32), 1 + 2j, np.complex64), "complex64, the model takes float32"),
    (np.full((1, 3, 32, 32), "x"), "<U1, the model takes float32"),
])
def test_lossy_input_dtypes_are_refused(tiny_artifact, tmp_path, array, message):
    np.savez(tmp_path / "in.npz", input=array)
    proc = adreno("run", tiny_artifact, "--input", tmp_path / "in.npz", "--repeat", "1", check_rc=2)
    assert message in proc.stderr and "Traceback" not in proc.stderr
    np.savez(tmp_path / "ok.npz", input=np.ones((1, 3, 32, 32), np.int64))  # small integers are exact
    adreno("run", tiny_artifact, "--input", tmp_path / "ok.npz", "--repeat", "1", "-q")


def test_devices_local():
    data = json.loads(adreno("devices", "--local", "--json").stdout)
    assert any(d["compiler_ok"] and "Portable Computing Language" in d["platform"] for d in data["local"])


def test_run_past_its_timeout_stops_promptly_in_one_line(tiny_artifact):
    """A run that cannot finish in --timeout (here: a million timed runs) ends at the deadline with exit 2."""
    import time

    started = time.monotonic()
    proc = adreno("run", tiny_artifact, "--repeat", "1000000", "--timeout", "3", "-q", check_rc=2)
    assert time.monotonic() - started < 60, "the deadline, not the million runs, ended it"
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error:") and "did not finish within --timeout 3 s" in last, proc.stderr
    assert "Traceback" not in proc.stderr


def test_ctrl_c_stops_a_run_at_once(tiny_artifact):
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-m", "adreno.cli", "run", str(tiny_artifact), "--repeat", "1000000"],
                            stderr=subprocess.PIPE, text=True)
    time.sleep(8)  # in the timed runs by now
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and time.monotonic() - sent < 10, stderr
    assert stderr.strip().splitlines()[-1] == "interrupted" and "Traceback" not in stderr


def _odd_files(tmp_path) -> None:
    """A FIFO, a directory, a .npy and a truncated .npz under tmp_path: files no model or --input may be."""
    os.mkfifo(tmp_path / "fifo.onnx")
    os.mkfifo(tmp_path / "fifo.npz")
    (tmp_path / "dir.onnx").mkdir()
    np.save(tmp_path / "x.npy", np.ones((1, 3, 32, 32), np.float32))
    np.savez(tmp_path / "whole.npz", input=np.ones((1, 3, 32, 32), np.float32))
    data = (tmp_path / "whole.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[:len(data) // 2])


LONG_RUN = ["--repeat", "1000000", "--timeout", "20"]  # a refusal after the run would be this timeout instead


@pytest.mark.parametrize("args, message", [
    (["compile", "{tmp}/fifo.onnx", "-o", "{tmp}/x"], "is not a regular file"),
    (["compile", "{tmp}/dir.onnx", "-o", "{tmp}/x"], "is not a regular file"),
    (["compile", "/dev/zero", "-o", "{tmp}/x"], "is not a regular file"),
    (["run", "{artifact}", "--input", "{tmp}/fifo.npz"], "is not a regular file"),
    (["run", "{artifact}", "--input", "/dev/zero"], "is not a regular file"),
    (["run", "{artifact}", "--input", "{tmp}"], "is not a regular file"),
    (["run", "{artifact}", "--input", "{tmp}/x.npy"], "holds one unnamed array (.npy)"),
    (["run", "{artifact}", "--input", "{tmp}/cut.npz"], "cannot read it as .npz (BadZipFile"),
    (["run", "{artifact}", "--seed", "-1"], "--seed must be >= 0, not -1"),
    (["tune", "tiny", "--seed", "-1", "--trials", "1"], "--seed must be >= 0, not -1"),
    (["tune", "tiny", "--seed", "-1", "--export-batch", "{tmp}/b"], "--seed must be >= 0, not -1"),
    (["run", "{artifact}", "--output", "{tmp}/missing/y.npz"], "the directory"),
    (["run", "{artifact}", "--output", "/proc/y.npz", *LONG_RUN], "--output /proc/y.npz: cannot write it"),
    (["run", "{artifact}", "--output", "/dev/null/y.npz", *LONG_RUN], "/dev/null is not a directory"),
    (["run", "{artifact}", "--output", "{tmp}/fifo.npz", *LONG_RUN], "exists and is not a regular file"),
    (["run", "{artifact}", "--output", "{tmp}"], "is a directory or empty"),
    (["run", "{artifact}", "--device", ""], "an empty device name"),
    (["compile", "tiny", "-o", ""], "the artifact directory (-o) is empty"),
    (["tune", "tiny", "--model", "bogus", "--trials", "1"], "unknown cost model 'bogus'"),
    (["tune", "tiny", "--model", "transfer:/nonexistent", "--trials", "1"], "/nonexistent: no such file"),
    (["tune", "tiny", "--model", "transfer:{tmp}/fifo.npz", "--trials", "1"], "is not a regular file"),
    (["tune", "tiny", "--records", "{tmp}", "--trials", "1"], "is not a regular file"),
    (["compile", "tiny", "--records", "{tmp}", "-o", "{tmp}/x"], "is not a regular file (a directory"),
    (["compile", "tiny", "--records", "{tmp}/fifo.npz", "-o", "{tmp}/x"], "fifo.npz is not a regular file"),
    (["compile", "tiny", "--records", "{tmp}/none.jsonl", "-o", "{tmp}/x"], "no such file (write one with"),
    (["run", "{artifact}", "--timeout", "0"], "--timeout must be positive"),
    # outputs written after the work: under a regular file (x.npy) or onto a directory, refused before it
    (["tune", "tiny", "--records", "{tmp}/x.npy/r.jsonl"], "x.npy is not a directory"),
    (["tune", "tiny", "--plot", "{tmp}/x.npy/p.png"], "x.npy is not a directory"),
    (["tune", "tiny", "--report", "{tmp}"], "is a directory"),
    (["tune", "tiny", "--report", "{tmp}/x.npy/r.json"], "x.npy is not a directory"),
    (["tune", "tiny", "--save-model", "{tmp}"], "is a directory"),
    (["tune", "tiny", "--save-model", "{tmp}/x.npy/m.json"], "x.npy is not a directory"),
    (["tune", "tiny", "--keep-candidates", "{tmp}/x.npy"], "exists and is not a directory"),
    (["tune", "tiny", "--keep-candidates", "{tmp}/x.npy/sub"], "x.npy is not a directory"),
    (["tune", "tiny", "--export-batch", "{tmp}/x.npy/sub"], "x.npy is not a directory"),
    (["tune", "tiny", "--import-batch", "{tmp}/x.npy"], "is not a directory: not a batch"),
    (["orchestrate", "tiny", "--export-batch", "{tmp}/x.npy/sub"], "x.npy is not a directory"),
    (["orchestrate", "tiny", "--report", "--records", "{tmp}/x.npy/r.jsonl"], "x.npy is not a directory"),
    (["compile", "tiny", "--orchestrate", "--memory", "buffer", "--records", "{tmp}/x.npy/r.jsonl", "-o", "{tmp}/o"],
     "x.npy is not a directory"),
])
def test_bad_files_and_values_are_one_line(tiny_artifact, tmp_path, args, message):
    """Non-regular files are refused before anything opens them (a FIFO would block forever); unusable paths and
    values are one line, exit 2, not a traceback, and before the work they would spoil (a run, task extraction)."""
    _odd_files(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", *[a.format(tmp=tmp_path, artifact=tiny_artifact)
                                                               for a in args]],
                          capture_output=True, text=True, timeout=60)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and last.startswith("error:") and message in last, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "extracting tasks" not in proc.stderr, "a bad tune value is reported before the tasks are extracted"


def test_tune_that_measured_nothing_fails(tmp_path):
    """A farm down past --outage leaves every candidate pending: that run failed, it must not exit 0."""
    proc = adreno("tune", "tiny", "--tracker", "127.0.0.1:1", "--outage", "0", "--trials", "2", "-q",
                  "--records", tmp_path / "r.jsonl", check_rc=2)
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: measured nothing: the farm failed all") and "Traceback" not in proc.stderr, \
        proc.stderr


def test_run_output_is_written_to_exactly_the_named_file(tiny_artifact, tmp_path):
    """numpy.savez given a name without .npz writes NAME.npz; --output writes the file it names."""
    adreno("run", tiny_artifact, "--repeat", "1", "-q", "--output", tmp_path / "y")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["y"] and np.load(tmp_path / "y").files


@pytest.mark.parametrize("shapes, message", [
    (["x:-1,4,8,8"], "a dimension cannot be negative"),
    (["x:1,4,8,8", "x:1,4,8,8"], "the shape set x 1x4x8x8 is given twice"),
    (["x:1,4,16,16"], "the model's input is ?,4,8,8 (? dynamic)"),
    (["x:1,4,8"], "the model's input is ?,4,8,8"),
    (["x:100000000,4,8,8"], "more than 32-bit indexing holds"),
])
def test_bad_input_shapes_are_refused(tmp_path, shapes, message):
    """--input-shape only fills dynamic dimensions, with sizes >= 0 (0: an empty input), once per input and shape set,
    within int32 indexing."""
    from tests.conftest import single_op_model

    onnx.save(single_op_model("Relu", {"x": ["batch", 4, 8, 8]}), tmp_path / "m.onnx")
    flags = [f for shape in shapes for f in ("--input-shape", shape)]
    proc = adreno("compile", tmp_path / "m.onnx", *flags, "-o", tmp_path / "out", "-q", check_rc=2)
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error:") and message in last and "Traceback" not in proc.stderr, proc.stderr


def test_input_shape_may_not_change_a_static_input(tmp_path):
    from tests.conftest import single_op_model

    onnx.save(single_op_model("Relu", {"x": [1, 4, 8, 8]}), tmp_path / "m.onnx")
    proc = adreno("compile", tmp_path / "m.onnx", "--input-shape", "x:1,4,16,16", "-o", tmp_path / "out", "-q",
                  check_rc=2)
    assert "the model's input is 1,4,8,8" in proc.stderr.strip().splitlines()[-1], proc.stderr
    adreno("compile", tmp_path / "m.onnx", "--input-shape", "x:1,4,8,8", "-o", tmp_path / "same", "-q",
           "--memory", "buffer")


def test_input_shape_fixes_a_dimension_written_as_minus_one(tmp_path):
    """paddle2onnx writes a dynamic batch as dim_value -1 (PP-OCR's cls): it is dynamic for --input-shape too."""
    from adreno.frontend.importer import input_shapes
    from tests.conftest import single_op_model

    model = single_op_model("Relu", {"x": [-1, 4, 8, 8]})
    assert input_shapes(model, {"x": [1, 4, 8, 8]}) == {"x": [1, 4, 8, 8]}
    onnx.save(model, tmp_path / "m.onnx")
    adreno("compile", tmp_path / "m.onnx", "--input-shape", "x:2,4,8,8", "-o", tmp_path / "out", "-q",
           "--memory", "buffer")
    proc = adreno("compile", tmp_path / "m.onnx", "--input-shape", "x:2,4,8,9", "-o", tmp_path / "bad", "-q",
                  check_rc=2)
    assert "the model's input is ?,4,8,8" in proc.stderr.strip().splitlines()[-1], proc.stderr
