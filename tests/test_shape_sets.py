"""Several static shapes in one artifact (`adreno.artifact.shape_sets`, `adreno.compile_shapes`): a PP-OCR-rec-style
recogniser at three widths in each memory and a text model whose ids and mask vary together at three lengths, each
set run on PoCL against onnxruntime; the weights stored once, kernels of identical source once; an input of another
shape refused in one line listing the sets; the program cache holding every set's programs."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from adreno.artifact.format import Artifact, random_inputs
from adreno.errors import AdrenoError, ArtifactError
from adreno.artifact.shape_sets import parse_shape_sets
from tests.dynamic_models import bert_like, ocr_like
from tests.test_cli import adreno

WIDTHS = (8, 12, 16)
RTOL, ATOL = 1e-3, 1e-4  # adreno run --check's


def _compile(model, root, memory, shape_sets, host="android", jobs=1):
    from adreno.compile_shapes import compile_shape_sets
    from adreno.options import CompileOptions

    onnx.save(model, root / "model.onnx")
    path, _ = compile_shape_sets(root / "model.onnx", root / "art", CompileOptions(memory=memory, host=host),
                                 shape_sets, jobs=jobs)
    return path


def _check_every_set(path, inputs_of):
    """Run each shape set on PoCL with the inputs `inputs_of(artifact)` and compare with onnxruntime."""
    from adreno.opencl.executor import Executor
    from adreno.reference import onnxruntime_outputs, reference_model

    artifact = Artifact.load(path)
    model = reference_model(artifact)
    labels = []
    for index in range(len(artifact.shape_sets)):
        chosen = Artifact.load(path, shape_set=index)
        inputs = inputs_of(chosen)
        picked = artifact.for_inputs(dict(zip(chosen.input_names(), (x.shape for x in inputs))))
        assert picked.shape_set == index and picked.plan.inputs == chosen.plan.inputs
        got = Executor(picked, "pocl", compile_workers=0).run(inputs)
        for ours, ref in zip(got, onnxruntime_outputs(model, inputs)):
            assert ours.shape == ref.shape
            assert np.abs(ours - ref).max() <= ATOL + RTOL * np.abs(ref).max()
        labels.append(picked.manifest["shape_set"]["label"])
    return labels


@pytest.fixture(scope="module")
def ocr_artifacts(tmp_path_factory):
    """The recogniser at the three widths in one artifact, in each memory (buffer with a host library for this
    machine, for --runtime tvm), the sets compiled two at a time: {memory: path}."""
    sets = parse_shape_sets([f"x:1,3,8,{w}" for w in WIDTHS])
    return {memory: _compile(ocr_like(), tmp_path_factory.mktemp(f"ocr-{memory}"), memory, sets,
                             host="native" if memory == "buffer" else "android", jobs=2)
            for memory in ("buffer", "texture")}


@pytest.fixture(scope="module")
def ocr_artifact(ocr_artifacts):
    return ocr_artifacts["buffer"]


@pytest.mark.parametrize("memory", ["buffer", "texture"])
def test_three_widths_in_one_artifact_each_checked(ocr_artifacts, memory):
    ocr_artifact = ocr_artifacts[memory]
    labels = _check_every_set(ocr_artifact, lambda a: random_inputs(a.input_specs(), 1))
    assert labels == [f"x 1x3x8x{w}" for w in WIDTHS]
    assert not (ocr_artifact / "plan.json").exists(), "no top-level plan: a reader without shape sets refuses"
    manifest = json.loads((ocr_artifact / "manifest.json").read_text())
    with np.load(ocr_artifact / "params.npz") as npz:
        contents = {name: (npz[name].dtype.str, npz[name].shape, npz[name].tobytes()) for name in npz.files}
    assert len(set(contents.values())) == len(contents), "every value stored once"
    params = [{n for n, t in Artifact.load(ocr_artifact, shape_set=i).plan.tensors.items() if t.kind == "param"}
              for i in range(3)]
    assert set(contents) == set.union(*params) and len(contents) < sum(map(len, params))
    assert manifest["sizes"]["weights"] == (ocr_artifact / "params.npz").stat().st_size
    kernel_files = list((ocr_artifact / "kernels").iterdir())
    programs = [set(Artifact.load(ocr_artifact, shape_set=i).plan.programs.values()) for i in range(3)]
    assert len(kernel_files) == manifest["kernels_stored"] == len(set.union(*programs)) < sum(map(len, programs))


def test_sets_compiled_side_by_side_are_the_sets_compiled_in_turn(ocr_artifact, tmp_path):
    """The fixture's sets compiled in two processes at once; two of them compiled again one after another in this
    process: each width's plan, kernels and host library are the same bytes (the pool returns each set to its
    place)."""
    again = _compile(ocr_like(), tmp_path, "buffer", parse_shape_sets([f"x:1,3,8,{w}" for w in WIDTHS[::2]]),
                     host="native", jobs=1)
    for index, width in ((0, WIDTHS[0]), (1, WIDTHS[2])):
        ours = Artifact.load(again, shape_set=index)
        theirs = Artifact.load(ocr_artifact, shape_set=WIDTHS.index(width))
        assert ours.manifest["shape_set"]["label"] == theirs.manifest["shape_set"]["label"] == f"x 1x3x8x{width}"
        assert ours.plan.steps == theirs.plan.steps
        assert [ours.kernel_source(p) for p in ours.plan.programs] == \
            [theirs.kernel_source(p) for p in theirs.plan.programs]
        library = ours.manifest["host_library"]
        assert (again / library).read_bytes() == (ocr_artifact / theirs.manifest["host_library"]).read_bytes()


def test_a_set_that_fails_in_its_process_is_one_line_and_leaves_nothing(tmp_path):
    """Width 2 pools to nothing: that set's compile fails in its worker while the other compiles; the error comes
    back in one line (exit 2) and no artifact or staging folder is left."""
    onnx.save(ocr_like(), tmp_path / "model.onnx")
    proc = adreno("compile", tmp_path / "model.onnx", "-o", tmp_path / "art", "--memory", "buffer", "--jobs", "2",
                  "--input-shape", "x:1,3,8,8", "--input-shape", "x:1,3,8,2", "-q", check_rc=2)
    assert proc.stderr.count("\n") == 1 and "shape set x 1x3x8x2: " in proc.stderr and "Reshape" in proc.stderr, \
        proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_the_run_says_which_set_ran_and_refuses_another_width_in_one_line(ocr_artifact, tmp_path):
    np.savez(tmp_path / "w12.npz", x=np.random.default_rng(2).standard_normal((1, 3, 8, 12)).astype(np.float32))
    result = json.loads(adreno("run", ocr_artifact, "--input", tmp_path / "w12.npz", "--check", "--repeat", "1",
                               "--json").stdout)
    assert result["check"]["ok"] and result["shape_set"]["index"] == 1
    assert not (result["first_launches"] or {}).get("failures"), "the helper processes launch set 1's kernels"
    assert result["shape_set"]["inputs"] == {"x": [1, 3, 8, 12]}
    np.savez(tmp_path / "w20.npz", x=np.zeros((1, 3, 8, 20), np.float32))
    proc = adreno("run", ocr_artifact, "--input", tmp_path / "w20.npz", "-q", check_rc=2)
    assert proc.stderr.count("\n") == 1 and "no shape set of this artifact takes x 1x3x8x20; it was compiled " \
        "for x 1x3x8x8; x 1x3x8x12; x 1x3x8x16" in proc.stderr, proc.stderr
    text = adreno("run", ocr_artifact, "--input-shape", "x:1,3,8,16", "--repeat", "1", "-q").stdout
    assert "shape set 2 of 3: x 1x3x8x16" in text.splitlines()[0]


def test_runtime_tvm_runs_the_set_the_input_matches(ocr_artifact, tmp_path):
    """The host library path chooses as the launch plan's does: each set has its own library."""
    np.savez(tmp_path / "w16.npz", x=np.random.default_rng(4).standard_normal((1, 3, 8, 16)).astype(np.float32))
    result = json.loads(adreno("run", ocr_artifact, "--runtime", "tvm", "--input", tmp_path / "w16.npz", "--check",
                               "--repeat", "1", "--json").stdout)
    assert result["check"]["ok"] and result["shape_set"]["label"] == "x 1x3x8x16"
    assert (ocr_artifact / "shapes" / "2" / "lib.so").is_file() and not (ocr_artifact / "lib.so").exists()


def test_ids_and_mask_vary_together(tmp_path):
    """A text model of three integer inputs, all three at lengths 4, 8 and 12 in one artifact; inputs of two
    lengths match no set. The harness (the app library) selects the set of three inputs as Python does."""
    from adreno.native.vm_executor import VmExecutor
    from tests.native.harness_cli import one_line_error, report, run_harness

    names = ("input_ids", "attention_mask", "token_type_ids")
    sets = parse_shape_sets([f"{name}:1,{length}" for length in (4, 8, 12) for name in names])
    assert [sorted(s) for s in sets] == [sorted(names)] * 3
    path = _compile(bert_like(), tmp_path, "buffer", sets, host="native")
    labels = _check_every_set(path, lambda a: random_inputs(a.input_specs(), 3, a.value_ranges()))
    assert labels[2] == "input_ids 1x12, attention_mask 1x12, token_type_ids 1x12"
    with pytest.raises(AdrenoError, match="no shape set of this artifact takes input_ids 1x4, attention_mask 1x8"):
        Artifact.load(path).for_inputs({"input_ids": (1, 4), "attention_mask": (1, 8), "token_type_ids": (1, 4)})
    chosen = Artifact.load(path, shape_set=1)
    inputs = random_inputs(chosen.input_specs(), 4, chosen.value_ranges())
    result = report(run_harness(path, dict(zip(chosen.input_names(), inputs)), tmp_path / "harness"))
    expected = VmExecutor(chosen).run(inputs)
    assert result["shape_set"] == 1 and len(result["outputs"]) == len(expected)
    for name, want in zip(chosen.output_names(), expected):
        assert np.array_equal(np.load(result["outputs"][name]), want), name
    mixed = dict(zip(chosen.input_names(), inputs))
    mixed["attention_mask"] = np.ones((1, 4), mixed["attention_mask"].dtype)
    assert "no shape set of this artifact takes " in one_line_error(run_harness(path, mixed, tmp_path / "mixed"))


def test_every_set_that_ran_is_in_the_program_cache(ocr_artifact, tmp_path):
    """After a run of each set, a new executor of each builds nothing from source."""
    from adreno.cache import ProgramCache
    from adreno.opencl.executor import Executor

    cache = ProgramCache(tmp_path / "cache")
    for index in (0, 2):
        artifact = Artifact.load(ocr_artifact, shape_set=index)
        Executor(artifact, "pocl", cache=cache, compile_workers=0).run(random_inputs(artifact.input_specs(), 0))
    again = [Executor(Artifact.load(ocr_artifact, shape_set=i), "pocl", cache=cache, compile_workers=0).builds
             for i in (0, 2)]
    assert all(build.how == "hit" for builds in again for build in builds), again


@pytest.mark.parametrize("items, message", [
    (["x:1,8", "y:1,8", "x:1,16"], "shape set 2 names ['x'], the first names ['x', 'y']"),
    (["x:1,8", "x:1,16", "x:1,8"], "the shape set x 1x8 is given twice"),
    (["x:1,a"], "expected NAME:D0,D1"),
])
def test_shape_sets_are_read_in_order_and_refused_when_inconsistent(items, message):
    with pytest.raises(AdrenoError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_shape_sets(items)


def test_a_set_plan_outside_the_artifact_is_refused(ocr_artifact, tmp_path):
    import shutil

    copy = shutil.copytree(ocr_artifact, tmp_path / "copy")
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["shape_sets"][1]["plan"] = "../plan.json"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match=r"the manifest does not list \.\./plan.json"):
        Artifact.load(copy, checked=False, shape_set=1)


def test_tune_takes_the_kernels_of_every_set():
    """`adreno tune --input-shape ... --input-shape ...` tunes each set's kernels: the conv's workload at each width."""
    from adreno.options import CompileOptions
    from adreno.tune.extract import extract_shape_sets
    from tests.conftest import single_op_model

    model = single_op_model("Conv", {"x": [1, 4, 8, "w"]}, {"k": np.ones((8, 4, 3, 3))}, pads=[1, 1, 1, 1])
    tasks = extract_shape_sets(model, CompileOptions(memory="buffer"), parse_shape_sets(["x:1,4,8,8", "x:1,4,8,16"]))
    assert sorted(t.key.split("|")[1] for t in tasks) == ["n1c4h8w16", "n1c4h8w8"]


def test_an_artifact_of_one_set_refuses_another_shape_the_same_way(tiny_artifact):
    proc = adreno("run", tiny_artifact, "--input-shape", "input:1,3,64,64", "-q", check_rc=2)
    assert proc.stderr.count("\n") == 1 and "no shape set of this artifact takes input 1x3x64x64; it was compiled " \
        "for input 1x3x32x32" in proc.stderr, proc.stderr


def test_the_harness_runs_the_set_its_inputs_select_and_refuses_another_width_in_one_line(ocr_artifact, tmp_path):
    """The C++ harness (over the app library) chooses the set as `adreno run` does: each width gives TVM's runtime's
    outputs for its set (VmExecutor, `--runtime tvm`) bit for bit; another width is one line listing the sets."""
    from adreno.native.vm_executor import VmExecutor
    from tests.native.harness_cli import one_line_error, report, run_harness

    rng = np.random.default_rng(7)
    for index, width in ((2, 16), (0, 8)):
        x = rng.standard_normal((1, 3, 8, width)).astype(np.float32)
        result = report(run_harness(ocr_artifact, {"x": x}, tmp_path / f"w{width}"))
        expected = VmExecutor(Artifact.load(ocr_artifact, shape_set=index)).run([x])[0]
        assert result["shape_set"] == index and np.array_equal(np.load(result["outputs"]["probs"]), expected)
    line = one_line_error(run_harness(ocr_artifact, {"x": np.zeros((1, 3, 8, 20), np.float32)}, tmp_path / "w20"))
    assert "no shape set of this artifact takes x 1x3x8x20; it was compiled for x 1x3x8x8; x 1x3x8x12; " \
        "x 1x3x8x16" in line, line


def test_the_python_api_switches_sets_and_keeps_an_executor_for_each(ocr_artifact):
    """`adreno.load(...).run` / `check` pick the set each input matches; a set met again reuses its executor."""
    import adreno

    rng = np.random.default_rng(5)
    narrow, wide = (rng.standard_normal((1, 3, 8, w)).astype(np.float32) for w in (8, 16))
    with adreno.load(ocr_artifact) as artifact:
        first = artifact.run({"x": narrow})[0]
        assert artifact.check([wide])["ok"]
        executors = dict(artifact._executors)
        assert sorted(executors) == [0, 2] and np.array_equal(artifact.run([narrow])[0], first)
        assert artifact._executors == executors, "no new executor for a set met before"
        with pytest.raises(AdrenoError, match="inputs: no shape set of this artifact takes x 1x3x8x9"):
            artifact.run([np.zeros((1, 3, 8, 9), np.float32)])


def test_the_python_api_compiles_several_sets(tmp_path):
    """`adreno.compile(..., input_shapes=[{...}, {...}])` writes one artifact of both sets (the CLI's rules, one
    line for a set given twice) and `run` picks the set each input matches."""
    import adreno
    from tests.conftest import single_op_model

    model = single_op_model("Conv", {"x": [1, 4, 8, "w"]}, {"k": np.ones((8, 4, 3, 3))}, pads=[1, 1, 1, 1])
    onnx.save(model, tmp_path / "conv.onnx")
    with pytest.raises(AdrenoError, match="input_shapes: the shape set x 1x4x8x8 is given twice"):
        adreno.compile(tmp_path / "conv.onnx", memory="buffer", output=tmp_path / "twice",
                       input_shapes=[{"x": [1, 4, 8, 8]}, {"x": (1, 4, 8, 8)}])
    artifact = adreno.compile(tmp_path / "conv.onnx", memory="buffer", output=tmp_path / "art", jobs=1,
                              input_shapes=[{"x": [1, 4, 8, 8]}, {"x": (1, 4, 8, 16)}])
    with artifact:
        for width in (8, 16):
            x = np.random.default_rng(width).standard_normal((1, 4, 8, width)).astype(np.float32)
            assert artifact.run({"x": x})[0].shape == (1, 8, 8, width)
            assert artifact.check([x])["ok"]
