"""Blocks cut at single values, keep FuseOps' groups whole, and each block's BLP closes on a zoo model."""

import random

from adreno.targets import devices
from adreno.frontend import zoo
from adreno.frontend.importer import to_relax
from adreno.orchestrate.blocks import split_blocks
from adreno.orchestrate.blp import Choice
from adreno.orchestrate.candidates import Primitive
from adreno.orchestrate.choose import block_candidates, choose
from adreno.orchestrate.fuseops import fuseops_groups
from adreno.orchestrate.graph import prepared, primitive_graph

# conv -> relu -> (branch a, branch b) -> add -> conv -> relu: cuts after relu1 and after add
RESIDUAL = [Primitive("c1", ("x", "w1"), heavy=True), Primitive("r1", ("c1",)), Primitive("a", ("r1",)),
            Primitive("b", ("r1",)), Primitive("s", ("a", "b")), Primitive("c2", ("s", "w2"), heavy=True),
            Primitive("r2", ("c2",))]


def _names(blocks):
    return [[p.name for p in b.primitives] for b in blocks]


def test_cuts_at_single_values_only():
    blocks = split_blocks(RESIDUAL, ["r2"])
    assert _names(blocks) == [["c1"], ["r1"], ["a", "b", "s"], ["c2"], ["r2"]]
    assert blocks[2].external == frozenset({"r1"}) and blocks[2].outputs == ("s",)
    assert blocks[-1].outputs == ("r2",)


def test_kept_groups_are_not_cut():
    blocks = split_blocks(RESIDUAL, ["r2"], keep_together=[{"c1", "r1"}, {"s", "c2", "r2"}])
    assert _names(blocks) == [["c1", "r1"], ["a", "b", "s", "c2", "r2"]]
    assert blocks[1].external == frozenset({"r1", "w2"})


def test_efficientnet_se_blocks_close_and_never_lose_to_fuseops():
    mod = prepared(to_relax(zoo.get_model("efficientnet_se", seed=0)))
    graph = primitive_graph(mod)
    fused = fuseops_groups(mod, graph, devices.get_device("adreno-740"))
    candidates = block_candidates(graph, [g.primitives for g in fused], max_size=4)
    assert len(candidates) > 5
    assert sorted(p.name for bc in candidates for p in bc.block.primitives) == sorted(p.name for p in
                                                                                     graph.primitives)
    rng = random.Random(0)
    costs = {g: rng.uniform(1, 1 + len(g)) for bc in candidates for g in bc.groups}
    for chosen in choose(candidates, costs):
        assert isinstance(chosen.choice, Choice) and chosen.choice.optimal, chosen.choice
        assert chosen.choice.cost <= chosen.fuseops_cost + 1e-9
