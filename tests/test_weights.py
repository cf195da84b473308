"""What params.npz stores (`adreno.artifact.weights`): Winograd weights as the model's own 3x3 weights, transformed at
load; an fp16 artifact's image weights as float16. Each loader rebuilds the params the kernels read from them, and the
outputs stay onnxruntime's."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from onnx import numpy_helper

from adreno.artifact.format import Artifact
from adreno.compile import compile_model
from adreno.errors import ArtifactError
from adreno.opencl.executor import Executor
from adreno.options import CompileOptions
from adreno.reference import onnxruntime_session
from adreno.artifact.weights import WeightTransform

from .resign import resign
from .winograd_net import winograd_net


def _model_weights(model) -> dict[str, np.ndarray]:
    return {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}


def _reference(model, x):
    return onnxruntime_session(model.SerializeToString()).run(None, {"x": x})[0]


@pytest.mark.parametrize("memory", ["buffer", "texture"])
@pytest.mark.parametrize("tile", [2, 4])
def test_winograd_weights_are_stored_as_the_models_own_and_transformed_at_load(memory, tile, tmp_path):
    model = winograd_net()
    artifact = Artifact.load(compile_model(model, tmp_path / "art", CompileOptions(memory=memory,
                                                                                    winograd=f"f{tile}")))
    forms = {n: t.stored_weight for n, t in artifact.plan.tensors.items() if t.kind == "param"}
    transformed = {n for n, f in forms.items() if f.transform is WeightTransform.winograd(tile)}
    assert len(transformed) == 2
    assert all(forms[n].packed == (memory == "texture") for n in transformed)
    stored, own = artifact.stored_params(), _model_weights(model)
    for name in transformed:  # the member is the model's weight, bit for bit
        assert any(np.array_equal(stored[name], w) for w in own.values())
    params = artifact.params()
    alpha = tile + 2
    assert all(list(params[n].shape[:2]) == [alpha, alpha] for n in transformed)
    model_bytes = sum(w.nbytes for w in own.values())
    sizes = artifact.manifest["weight_storage"]
    assert sizes["stored_bytes"] <= 1.1 * model_bytes < sizes["param_bytes"]
    x = np.random.default_rng(3).standard_normal((1, 64, 16, 16)).astype(np.float32)
    out, ref = Executor(artifact).run([x])[0], _reference(model, x)
    assert np.abs(out - ref).max() <= 1e-3 * max(1.0, float(np.abs(ref).max()))


def test_an_fp16_artifact_stores_its_weights_as_float16(tmp_path):
    import onnx

    model = winograd_net(head=True)
    onnx.save(model, tmp_path / "net.onnx")  # `run --check` reads the reference from the model's path
    path = compile_model(str(tmp_path / "net.onnx"), tmp_path / "art",
                         CompileOptions(memory="texture", precision="fp16", winograd="f4"))
    artifact = Artifact.load(path)
    params = [t for t in artifact.plan.tensors.values() if t.kind == "param"]
    half = [t for t in params if t.image is not None and t.image["channel_type"] == "float16"]
    assert half and len(half) < len(params)  # the classifier's weight is a buffer
    assert all(t.stored_weight.dtype == "float16" for t in params)
    assert {a.dtype for a in artifact.stored_params().values() if a.ndim == 4} == {np.dtype("float16")}
    assert artifact.manifest["weight_storage"]["stored_bytes"] <= 0.55 * sum(
        w.nbytes for w in _model_weights(model).values())
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", "run", str(path), "--check", "--json"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["check"]["ok"]


def test_an_fp16_weight_beyond_halfs_range_stays_float32():
    from adreno.artifact.weights import stored_form

    masked = np.array([1.0, -1e9, np.inf], dtype=np.float32)
    assert stored_form(masked, True, False, None) == (None, masked)  # a -1e9 mask would become -inf
    stored, array = stored_form(np.array([1.0, np.inf], dtype=np.float32), True, False, None)
    assert stored.dtype == "float16" and array.dtype == np.float16
    stored, array = stored_form(masked, True, True, None)  # a half image holds halves whatever is stored
    assert stored.dtype == "float16"
    assert stored_form(masked, False, False, None)[0] is None


@pytest.mark.parametrize("change, says", [
    (lambda s: s.update(transform="winograd9"), "malformed"),
    (lambda s: s.update(shape=[66, 64, 3, 4]), "stored as"),
    (lambda s: s.update(shape=[66, 64, 3.5, 3]), "not a list of integers"),
    (lambda s: s.update(transform="none"), "stored as"),
    (lambda s: s.update(transform="none", packed=True), "stored as"),  # (66, 64, 3, 3) packs to no (6, 6, ...)
    (lambda s: s.update(transform="transpose"), "a transposed weight stored as"),  # 4-D: no 2-D transpose
])
def test_a_tampered_stored_form_is_refused_in_one_line(change, says, tmp_path):
    import shutil

    model = winograd_net()
    original = compile_model(model, tmp_path / "art", CompileOptions(memory="buffer", winograd="f4"))
    root = tmp_path / "tampered"
    shutil.copytree(original, root)
    plan = json.loads((root / "plan.json").read_text())
    change(next(t["stored"] for t in plan["tensors"].values() if t.get("stored")))
    (root / "plan.json").write_text(json.dumps(plan))
    resign(root)
    with pytest.raises(ArtifactError) as err:
        Artifact.load(root).params()
    assert says in str(err.value) and "\n" not in str(err.value)
