"""`adreno.compiler.numpy_fold`: batch norms' constant arithmetic folded in numpy gives TVM's `FoldConstant` result bit
for bit, and an artifact compiled with it is the artifact compiled without it."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from adreno.compiler import numpy_fold
from adreno.frontend import zoo
from adreno.compile import compile_model
from adreno.frontend.importer import to_relax
from adreno.options import CompileOptions
from adreno.targets.target import tvm_target
from tests.kernel_files import kernel_sources


def _decomposed(model):
    import tvm
    from tvm import relax

    target = tvm_target("adreno-740")
    with target:
        return target, tvm.transform.Sequential([relax.transform.DecomposeOpsForInference(),
                                                 relax.transform.Normalize()])(to_relax(model))


def _constant_calls(mod) -> list[str]:
    """The ops of `main` that numpy_fold evaluates and whose arguments are all constants."""
    import tvm

    consts = []
    found = []
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, tvm.ir.expr.Constant):
                consts.append(binding.var)
            elif isinstance(value, tvm.ir.expr.Call) and getattr(value.op, "name", None) in numpy_fold.EVALUATORS:
                if all(isinstance(a, tvm.ir.expr.Constant) or any(a.same_as(c) for c in consts)
                       or type(a).__name__ == "ShapeExpr" for a in value.args):
                    found.append(value.op.name)
    return found


@pytest.mark.parametrize("name", ["tiny", "efficientnet_se"])
def test_fold_matches_tvm_fold_constant_bit_for_bit(name):
    import tvm_ffi
    from tvm import relax

    target, mod = _decomposed(zoo.get_model(name))
    assert _constant_calls(mod), "the decomposed batch norms leave constant arithmetic to fold"
    folded = numpy_fold.fold(mod)
    assert _constant_calls(folded) == []
    with target:
        reference, ours = relax.transform.FoldConstant()(mod), relax.transform.FoldConstant()(folded)
    # structural equality compares the constants' bytes, dtypes and shapes (a 0-d clip bound must stay 0-d)
    assert tvm_ffi.structural_equal(reference, ours)


def test_integer_arithmetic_is_left_to_tvm():
    import tvm
    from tvm import relax

    bb = relax.BlockBuilder()
    with bb.function("main", []):
        with bb.dataflow():
            total = bb.emit(relax.op.add(relax.const(np.arange(4, dtype="int64")), relax.const(np.int64(3))))
            half = bb.emit(relax.op.divide(relax.const(np.ones(4, "float32")), relax.const(np.float32(2))))
            out = bb.emit_output(relax.Tuple([total, half]))
        bb.emit_func_output(out)
    folded = numpy_fold.fold(bb.get())
    values = [b.value for b in folded["main"].body.blocks[0].bindings]
    assert isinstance(values[0], tvm.ir.expr.Call), "int64 arithmetic keeps TVM's semantics: not folded here"
    assert values[1].value.numpy().tolist() == [0.5] * 4


def _artifact(out) -> dict[str, bytes]:
    """The artifact's kernels, plan and weights, with each function's name replaced by its first launch's index:
    TVM numbers fused functions by the PrimFuncs the module held, and TVM's own folding adds (then drops) some."""
    names = list(dict.fromkeys(step["func"] for step in json.loads((out / "plan.json").read_text())["steps"]))
    pattern = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(sorted(map(re.escape, names), key=len, reverse=True))
                         + r")(?=_kernel|_tex\d|[^A-Za-z0-9_]|$)")
    index = {name: f"@f{i}@" for i, name in enumerate(names)}

    def rename(text: str) -> str:
        return pattern.sub(lambda m: index[m.group(1)], text)

    def rename_plan(value, key=None):  # "op" is the op's name (a function may be called after it)
        if isinstance(value, dict):
            return {rename(k): rename_plan(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [rename_plan(v) for v in value]
        return rename(value) if isinstance(value, str) and key != "op" else value

    files = {rename(f"kernels/{stem}.cl"): rename(source).encode() for stem, source in kernel_sources(out).items()}
    files["plan.json"] = json.dumps(rename_plan(json.loads((out / "plan.json").read_text())), sort_keys=True).encode()
    files["params.npz"] = (out / "params.npz").read_bytes()
    return files


@pytest.mark.parametrize("memory", ["texture", "buffer"])
def test_artifact_is_unchanged_by_the_fold(tmp_path, monkeypatch, memory):
    """tiny compiled with the pass and with it replaced by the identity: same kernels, plan and weights (up to the
    functions' numbering)."""
    import tvm

    import importlib

    import adreno.texture.planning

    def build(out):
        compile_model(zoo.get_model("tiny"), out, CompileOptions(memory=memory))
        return _artifact(out)

    ours = build(tmp_path / "ours")
    identity = tvm.transform.module_pass(lambda mod, _ctx: mod, opt_level=0, name="identity")
    # `adreno.compile` is the API's function: the compile module is reached through the import system
    for module in (importlib.import_module("adreno.compile"), adreno.texture.planning):
        monkeypatch.setattr(module, "fold_pass", lambda: identity)
    theirs = build(tmp_path / "tvm")
    assert ours.keys() == theirs.keys() and any(k.endswith(".cl") for k in ours)
    assert [k for k in ours if ours[k] != theirs[k]] == []
