from collections import Counter
from functools import cache

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from adreno import zoo
from adreno.errors import ModelError


@cache
def built(name: str, seed: int = 0) -> onnx.ModelProto:
    return zoo.get_model(name, seed)


def run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def weights(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def conv_groups(model: onnx.ModelProto) -> list[int]:
    return [a.i for n in model.graph.node if n.op_type == "Conv" for a in n.attribute if a.name == "group"]


def test_registry():
    assert {"resnet18", "mobilenetv2", "resnet18_block", "tiny"} <= set(zoo.MODELS)
    assert [m.name for m in zoo.list_models()] == list(zoo.MODELS)


@pytest.mark.parametrize("name", list(zoo.MODELS))
def test_model_checks_and_runs_in_onnxruntime(name):
    spec, model = zoo.MODELS[name], built(name)
    onnx.checker.check_model(model, full_check=True)
    assert [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [zoo.OPSET]
    assert [i.name for i in model.graph.input] == [spec.input_name]
    assert [o.name for o in model.graph.output] == [spec.output_name]
    x = np.random.default_rng(123).standard_normal(spec.input_shape, dtype=np.float32)
    y = run(model, x)
    assert y.shape == spec.output_shape and np.isfinite(y).all()
    assert 1e-3 < y.std() and np.abs(y).max() < 50  # O(1) activations: neither dead nor exploding


@pytest.mark.parametrize("name", list(zoo.MODELS))
def test_seed_determines_the_weights(name):
    again, other = weights(zoo.get_model(name, seed=0)), weights(built(name, seed=1))
    first = weights(built(name))
    assert first.keys() == again.keys() == other.keys()
    assert all(np.array_equal(first[k], again[k]) for k in first)
    convs = [k for k in first if k.startswith("conv_w")]
    assert convs and not any(np.array_equal(first[k], other[k]) for k in convs)


@pytest.mark.parametrize("name, parameters", [("resnet18", 11_689_512), ("mobilenetv2", 3_504_872)])
def test_real_topologies_have_the_published_parameter_count(name, parameters):
    """Trainable parameters (conv/fc weights and biases, BN gamma/beta) equal torchvision's count."""
    trainable = [a for k, a in weights(built(name)).items() if k.startswith(("conv_w", "fc_", "bn_gamma", "bn_beta"))]
    assert sum(a.size for a in trainable) == parameters


def test_real_topologies_op_mix():
    resnet, mobilenet = (Counter(n.op_type for n in built(m).graph.node) for m in ("resnet18", "mobilenetv2"))
    assert resnet["Conv"] == resnet["BatchNormalization"] == 20 and resnet["Add"] == 8 and resnet["Gemm"] == 1
    assert mobilenet["Conv"] == mobilenet["BatchNormalization"] == 52 and mobilenet["Add"] == 10
    assert sum(g > 1 for g in conv_groups(built("mobilenetv2"))) == 17  # one depthwise conv per inverted residual


def test_tiny_covers_the_op_mix():
    model = built("tiny")
    ops = {n.op_type for n in model.graph.node}
    assert {"Conv", "BatchNormalization", "Relu", "MaxPool", "Clip", "Add", "GlobalAveragePool", "Flatten", "Gemm",
            "Softmax"} <= ops
    assert max(conv_groups(model)) > 1 and sum(w.size for w in weights(model).values()) < 5000
    probs = run(model, np.zeros(zoo.MODELS["tiny"].input_shape, np.float32))
    assert np.isclose(probs.sum(), 1.0, atol=1e-5)


def test_unknown_model_lists_known_ones():
    with pytest.raises(ModelError) as info:
        zoo.get_model("vgg16")
    assert all(name in str(info.value) for name in zoo.MODELS)


def test_save_model(tmp_path):
    path = zoo.save_model("tiny", tmp_path / "sub" / "tiny.onnx", seed=3)
    assert path.is_file() and onnx.load(path).SerializeToString() == zoo.get_model("tiny", seed=3).SerializeToString()
