"""The phone path on an AArch64 userland (tools/phonebox.sh): a `--cc` lib.so in TVM's arm64 runtime with the
AArch64 plugin, the AArch64 harness from source then from its blob, a model with Winograd, a depthwise conv and
texture weights, and bad input; every output bit-identical to x86's run of the same model compiled --host native."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from adreno.native.plugin import HARNESS_PATH

from ..resign import resign
from .conftest import CROSS_CC


def compiled(model, out, **options):
    """`model` compiled twice: for the phone (--host android --cc, an AArch64 lib.so) and for this machine."""
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    return {"arm": compile_model(model, out / "arm", CompileOptions(cc=CROSS_CC, **options)),
            "x86": compile_model(model, out / "x86", CompileOptions(host="native", **options))}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return compiled("tiny", tmp_path_factory.mktemp("box-tiny"), memory="texture")


def depthwise_winograd_net() -> onnx.ModelProto:
    """A 3x3 conv Winograd replaces (64 -> 64 channels), a depthwise 3x3, a pointwise 1x1; texture weights."""
    rng = np.random.default_rng(0)
    weights = {"w0": rng.standard_normal((64, 64, 3, 3)) * 0.06, "b0": rng.standard_normal(64) * 0.1,
               "dw": rng.standard_normal((64, 1, 3, 3)) * 0.3, "db": rng.standard_normal(64) * 0.1,
               "pw": rng.standard_normal((32, 64, 1, 1)) * 0.1, "pb": rng.standard_normal(32) * 0.1}
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "dw", "db"], ["c1"], pads=[1, 1, 1, 1], group=64),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "pw", "pb"], ["y"])]
    graph = helper.make_graph(nodes, "depthwise_winograd",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 16, 16])],
                              [numpy_helper.from_array(w.astype(np.float32), n) for n, w in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def run_cli(artifact, output, box=None):
    """`adreno run ARTIFACT --runtime tvm --output OUTPUT` on x86, or with `box` in the box's arm64 python."""
    command = ["-m", "adreno", "run", artifact, "--runtime", "tvm", "--output", output, "--repeat", "1", "-q"]
    proc = box.run("python3", *command) if box else subprocess.run([sys.executable, *map(str, command)],
                                                                   capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(output) as outputs:
        return {name: outputs[name] for name in outputs.files}


def harness_command(harness, artifact, inputs: dict, out_dir, *extra) -> list[str]:
    out_dir.mkdir(parents=True)
    args = []
    for name, array in inputs.items():
        np.save(out_dir.parent / f"{out_dir.name}-{name}.npy", array)
        args += ["--input", f"{name}={out_dir.parent / f'{out_dir.name}-{name}.npy'}"]
    return [str(harness), str(artifact), *args, "--output-dir", str(out_dir), *map(str, extra)]


def harness_report(proc) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def harness_outputs(report: dict) -> dict:
    return {name: np.load(path) for name, path in report["outputs"].items()}


def x86_harness(artifact, inputs, out_dir) -> dict:
    proc = subprocess.run(harness_command(HARNESS_PATH, artifact, inputs, out_dir), capture_output=True, text=True,
                          timeout=300)
    return harness_outputs(harness_report(proc))


def identical(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_tiny_lib_so_in_tvms_arm64_runtime_matches_x86(box, tiny, tmp_path):
    arm = run_cli(tiny["arm"], tmp_path / "arm.npz", box)
    assert identical(arm, run_cli(tiny["x86"], tmp_path / "x86.npz"))


def test_the_aarch64_harness_from_source_then_from_its_blob_matches_x86(box, tiny, tmp_path):
    x = {"input": np.random.default_rng(7).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    blob = tmp_path / "programs.bin"
    first = harness_command(box.native / "adreno-harness", tiny["arm"], x, tmp_path / "a", "--blob", blob)
    second = harness_command(box.native / "adreno-harness", tiny["arm"], x, tmp_path / "b", "--blob", blob)
    proc = box.run("sh", "-c", f"{' '.join(first)} && {' '.join(second)}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    reports = [json.loads(line) for line in proc.stdout.splitlines()]
    assert reports[0]["blob"] == "absent; written" and reports[0]["programs"].startswith("from_source=1 ")
    assert reports[1]["blob"] == "loaded" and reports[1]["programs"] == "from_source=0 from_binary=1 rejected=0"
    expected = x86_harness(tiny["x86"], x, tmp_path / "x86")
    assert all(identical(harness_outputs(r), expected) for r in reports)


def test_depthwise_winograd_and_texture_weights_through_the_aarch64_harness(box, tmp_path):
    onnx.save(depthwise_winograd_net(), tmp_path / "m.onnx")
    art = compiled(str(tmp_path / "m.onnx"), tmp_path, memory="texture", winograd="auto")
    plan = json.loads((art["arm"] / "plan.json").read_text())
    kernels = " ".join(kernel["name"] for step in plan["steps"] for kernel in step["kernels"])
    assert "dwconv2d" in kernels and "winograd" in kernels, kernels
    assert any(t.get("scope") == "global.texture-weight" and t.get("stored", {}).get("transform", "").startswith(
        "winograd") for t in plan["tensors"].values())
    x = {"x": np.random.default_rng(5).standard_normal((1, 64, 16, 16)).astype(np.float32)}
    report = harness_report(box.run(*harness_command(box.native / "adreno-harness", art["arm"], x, tmp_path / "a")))
    assert identical(harness_outputs(report), x86_harness(art["x86"], x, tmp_path / "x86-outputs"))


def one_line_error(proc, expected_warning: str = "") -> str:
    """The one `error:` line of a refused command (besides a warning line starting with `expected_warning`)."""
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.strip().splitlines()
             if not (expected_warning and line.startswith(expected_warning))]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def test_bad_input_in_the_box_is_one_line(box, tiny, tmp_path):
    run = ["python3", "-m", "adreno", "run", "--runtime", "tvm", "--repeat", "1", "-q"]
    truncated = shutil.copytree(tiny["arm"], tmp_path / "truncated")
    library = (truncated / "lib.so").read_bytes()
    (truncated / "lib.so").write_bytes(library[: len(library) // 2])
    # --unchecked: past the manifest's size and SHA-256 check, to the library itself (the dynamic loader maps a
    # truncated file without complaint and dies of SIGBUS at the first page past its end)
    line = one_line_error(box.run(*run, truncated, "--unchecked"), expected_warning="warning: --unchecked")
    expected = f"truncated/lib.so is truncated ({len(library) // 2} bytes, its headers need {len(library)})"
    assert expected in line, line
    x = {"input": np.zeros((1, 3, 32, 32), np.float32)}
    harness = harness_command(box.native / "adreno-harness", truncated, x, tmp_path / "out")
    changed = f"lib.so: {len(library) // 2} bytes, the manifest lists {len(library)}: changed since compile"
    assert changed in one_line_error(box.run(*harness))  # the harness checks the manifest always
    resign(truncated)  # a manifest rewritten to match: the ELF check is what is left
    assert expected.removeprefix("truncated/") in one_line_error(box.run(*harness))
    assert "built for another host (ELF machine 62, this is aarch64)" in one_line_error(box.run(*run, tiny["x86"]))
    other = shutil.copytree(box.native, tmp_path / "other-wheels", ignore=shutil.ignore_patterns("obj"))
    (other / "BUILD_INFO").write_text("apache-tvm=0.26.0 apache-tvm-ffi=0.1.9\n")
    line = one_line_error(box.run(*run, tiny["arm"], env={"ADRENO_PLUGIN_DIR": str(other)}))
    assert "built for apache-tvm=0.26.0 apache-tvm-ffi=0.1.9" in line and "rebuild it" in line


@pytest.mark.usefixtures("box")  # made, and NATIVE_AARCH64's harness built
def test_bench_phonebox_smoke(tmp_path):
    """tools/bench_phonebox.py --smoke (tiny, one run; it exits unless the box's outputs equal x86's bit for bit)
    still runs and writes each side's stages, the fields docs/native.md quotes."""
    from ..bench_smoke import check

    stages = ("import_ms", "plugin_ms", "load_ms", "blob_ms", "weights_ms", "first_run_ms", "median_ms")
    document = check("bench_phonebox.py", tmp_path, [f"models.tiny.{side}.{stage}" for side in ("x86", "box")
                                                     for stage in stages])
    assert document["models"]["tiny"]["box"]["median_ms"] > 0
