from collections import Counter
from functools import cache

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from adreno.frontend import zoo
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


def test_efficientnet_op_mix():
    """Squeeze-and-excitation in every block (pool, two 1x1 convs with biases, sigmoid gate), SiLU as x*Sigmoid(x),
    a ReLU6 head, depthwise 3x3 and 5x5 convs."""
    model = built("efficientnet_se")
    ops = Counter(n.op_type for n in model.graph.node)
    blocks = len(zoo.EFFICIENTNET_SETTINGS)
    assert ops["GlobalAveragePool"] == blocks + 1 and ops["Clip"] == 1 and ops["Add"] == 2
    # per block: SE gate, SE SiLU and two SiLUs (one without expansion: the first block); plus the stem
    assert ops["Sigmoid"] == 4 * blocks
    kernels = {tuple(a.ints) for n in model.graph.node if n.op_type == "Conv" for a in n.attribute
               if a.name == "kernel_shape"}
    assert {(1, 1), (3, 3), (5, 5)} <= kernels and sum(g > 1 for g in conv_groups(model)) == blocks


@pytest.mark.parametrize("memory", ["texture", "buffer"])
def test_efficientnet_passes_run_check(memory, tmp_path):
    import os
    import subprocess
    import sys

    out = tmp_path / memory
    for args in (["compile", "efficientnet_se", "--memory", memory, "-q", "-o", out],
                 ["run", out, "--check", "--repeat", "1"]):
        proc = subprocess.run([sys.executable, "-m", "adreno.cli", *map(str, args)], capture_output=True, text=True,
                              timeout=600, env=os.environ)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ": OK" in proc.stdout


def test_unknown_model_lists_known_ones():
    with pytest.raises(ModelError) as info:
        zoo.get_model("vgg16")
    assert all(name in str(info.value) for name in zoo.MODELS)


def test_save_model(tmp_path):
    path = zoo.save_model("tiny", tmp_path / "sub" / "tiny.onnx", seed=3)
    assert path.is_file() and onnx.load(path).SerializeToString() == zoo.get_model("tiny", seed=3).SerializeToString()
