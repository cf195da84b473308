"""Fission leaves only primitives and keeps the outputs within tolerance of onnxruntime (run on LLVM here)."""

import numpy as np
import onnxruntime
import pytest
import tvm
from tvm import relax

from adreno.frontend.importer import to_relax
from adreno.orchestrate.fission import fission
from tests.orchestrate.graphs import GRAPHS

COMPOSITE = {"relax.nn.softmax", "relax.nn.log_softmax", "relax.nn.layer_norm", "relax.nn.gelu",
             "relax.nn.gelu_tanh", "relax.nn.silu", "relax.nn.batch_norm"}


def _ops(mod):
    ops = []
    relax.analysis.post_order_visit(mod["main"],
                                    lambda e: isinstance(e, relax.Call) and ops.append(getattr(e.op, "name", "")))
    return ops


def _run(mod, feeds):
    exe = tvm.compile(mod, target="llvm")
    vm = relax.VirtualMachine(exe, tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(v) for v in feeds.values()])
    return out.numpy() if hasattr(out, "numpy") else out[0].numpy()


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_fission_matches_onnxruntime(name):
    model = GRAPHS[name]()
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    feeds = {"x": np.random.default_rng(1).standard_normal(shape).astype(np.float32) * 2}
    expected = onnxruntime.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    mod = to_relax(model)
    split = fission(mod)
    assert not COMPOSITE & set(_ops(split)), _ops(split)
    if COMPOSITE & set(_ops(mod)):
        assert len(_ops(split)) > len(_ops(mod))
    np.testing.assert_allclose(_run(split, feeds), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["tiny", "resnet18_block", "efficientnet_se"])
def test_fission_keeps_zoo_outputs(name):
    from adreno.frontend import zoo

    model = zoo.get_model(name, seed=0)
    inp = model.graph.input[0]
    feeds = {inp.name: np.random.default_rng(0).standard_normal(
        [d.dim_value for d in inp.type.tensor_type.shape.dim]).astype(np.float32)}
    expected = onnxruntime.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    split = fission(to_relax(model))
    assert not COMPOSITE & set(_ops(split))
    np.testing.assert_allclose(_run(split, feeds), expected, rtol=1e-4, atol=1e-4)
