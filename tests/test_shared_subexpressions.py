"""The device finalize binds repeated index arithmetic once (`adreno.compiler.shared_subexpressions`): TVM's own
finalize substitutes its common-subexpression variables back and leaves them declared and unread."""

from __future__ import annotations

import gzip
import re

import pytest

from adreno.artifact.format import Artifact


def declared_and_unread(source: str) -> list[str]:
    declared = re.findall(r"\b(?:int|float|long|uint)\d? (cse_v\w+) =", source)
    return [v for v in declared if len(re.findall(rf"\b{v}\b", source)) == 1]


def test_an_index_used_three_times_is_computed_once():
    import tvm
    from tvm import te

    from adreno.compiler.plan import lower_primfunc
    from adreno.targets.target import tvm_target

    data = te.placeholder((3 * 4096,), name="A")
    out = te.compute((4096,), lambda i: data[(i * 7 % 13) * 100 + i % 91] + data[(i * 7 % 13) * 100 + i % 91 + 1]
                     * data[(i * 7 % 13) * 100 + 2], name="B")
    sch = tvm.s_tir.Schedule(te.create_prim_func([data, out]))
    block_x, thread_x = sch.split(sch.get_loops(sch.get_sblock("B"))[0], [None, 64])
    sch.bind(block_x, "blockIdx.x")
    sch.bind(thread_x, "threadIdx.x")
    _, _, source = lower_primfunc(sch.mod["main"], "indices", tvm_target("adreno-740"))
    body = source[source.rindex("__kernel"):]
    assert body.count("% 13)") == 1 and body.count("% 91)") == 1, body  # each subexpression spelled out once
    assert re.search(r"cse_v\d+ = ", body) and not declared_and_unread(body), body


@pytest.mark.parametrize("memory", ["texture", "buffer"])
def test_no_kernel_declares_a_variable_it_never_reads(memory, tmp_path):
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    artifact = Artifact.load(compile_model("resnet18_block", tmp_path / "art", CompileOptions(memory=memory)))
    sources = [gzip.decompress((artifact.path / p).read_bytes()).decode() for p in artifact.plan.programs.values()]
    assert sources and not [declared_and_unread(s) for s in sources if declared_and_unread(s)]
    assert any(re.search(r"cse_v\d+ = ", s) for s in sources)
