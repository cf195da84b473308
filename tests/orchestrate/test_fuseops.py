"""FuseOps' partition, mapped back onto the primitive graph, is always a candidate set the BLP may choose."""

import random

import pytest

from adreno.targets import devices
from adreno.frontend import zoo
from adreno.frontend.importer import to_relax
from adreno.orchestrate.blp import Choice, solve
from adreno.orchestrate.candidates import enumerate_groups, kernel_of
from adreno.orchestrate.fuseops import FusedGroup, fuseops_groups
from adreno.orchestrate.graph import op_name, prepared, primitive_graph


def _fused(name):
    mod = prepared(to_relax(zoo.get_model(name, seed=0)))
    graph = primitive_graph(mod)
    groups = fuseops_groups(mod, graph, devices.get_device("adreno-740"))
    assert isinstance(groups, list), groups
    return graph, groups


def _ops(graph, group):
    return [op_name(graph.calls[p.name]) for p in graph.primitives if p.name in group.primitives]


@pytest.mark.parametrize("name", ["tiny", "efficientnet_se"])
def test_groups_are_fuseops_functions_over_primitives(name):
    graph, groups = _fused(name)
    assert groups and all(isinstance(g, FusedGroup) and len(g.primitives) >= 2 for g in groups)
    members = [p for g in groups for p in g.primitives]
    assert len(members) == len(set(members)) and set(members) <= {p.name for p in graph.primitives}
    for group in groups:
        # the function's name lists its operators in binding order: conv2d, add, relu -> fused_conv2d_add_relu
        tokens = group.name.split("_")[1:]
        ops = _ops(graph, group)
        assert len(tokens) >= len(ops) and all(op in group.name for op in ops), (group.name, ops)
        assert sum(p.heavy for p in graph.primitives if p.name in group.primitives) <= 1


def test_tiny_first_conv_fuses_its_epilogue():
    graph, groups = _fused("tiny")
    first = next(g for g in groups if graph.primitives[0].name in g.primitives)
    assert first.name == "fused_conv2d_add_relu" and _ops(graph, first) == ["conv2d", "add", "relu"]


def test_blp_is_never_worse_than_fuseops():
    """With random costs, the optimum over the candidates (FuseOps' groups required among them) is at most the
    cost of FuseOps' partition, which is itself a feasible choice."""
    graph, groups = _fused("tiny")
    prims = list(graph.primitives)
    fused = [g.primitives for g in groups]
    candidates = enumerate_groups(prims, max_size=2, required=fused)
    assert set(fused) <= set(candidates)
    alone = [frozenset([p.name]) for p in prims if not any(p.name in g for g in fused)]
    rng = random.Random(6)
    for _ in range(3):
        costs = {g: rng.uniform(1, 1 + len(g)) for g in candidates}
        kernels = {g: kernel_of(g, prims, graph.outputs, costs[g], str(i)) for i, g in enumerate(candidates)}
        choice = solve(list(kernels.values()), graph.outputs, graph.external, time_limit_s=30)
        assert isinstance(choice, Choice) and choice.optimal
        fuseops = [kernels[g] for g in fused + alone]
        assert solve(fuseops, graph.outputs, graph.external).kernels  # feasible alone
        assert choice.cost <= sum(k.cost for k in fuseops) + 1e-9


def test_a_function_called_at_several_sites_is_a_group_at_each():
    """FuseOps calls one function wherever a group repeats (efficientnet_se's MBConv blocks of equal shapes; all of
    ResNet-18's Winograd epilogues): every call site is a group of its own. Read per function, the repeats were
    left out, and the BLP could not choose FuseOps' kernel there."""
    graph, groups = _fused("efficientnet_se")
    names = [g.name for g in groups]
    repeated = {n for n in names if names.count(n) > 1}
    assert repeated, names
    for name in repeated:
        sites = [g.primitives for g in groups if g.name == name]
        assert len(frozenset().union(*sites)) == sum(map(len, sites))  # distinct primitives at each site
    # every conv has a bias to fuse with, so every conv is in a group, the repeated blocks' too
    convs = {p.name for p in graph.primitives if op_name(graph.calls[p.name]).startswith("conv2d")}
    assert convs and convs <= {p for g in groups for p in g.primitives}


def test_the_unsplit_models_partition_keeps_each_split_operator_in_one_group():
    """With the graph's composites, the partition is that of the unsplit model, today's compile: MobileViT's
    LayerNorms and softmaxes, which FuseOps leaves alone there, are groups of all their primitives (FuseOps of the
    split graph cut them at the reductions)."""
    from adreno.orchestrate.graph import prepared_graph

    mod, graph = prepared_graph(to_relax(zoo.get_model("mobilevit_xs", seed=0)))
    assert len(graph.composites) == 8
    device = devices.get_device("adreno-740")
    unsplit = fuseops_groups(mod, graph, device, composites=graph.composites)
    split = fuseops_groups(mod, graph, device)
    assert isinstance(unsplit, list) and isinstance(split, list)
    members = [p for g in unsplit for p in g.primitives]
    assert len(members) == len(set(members))
    for composite in graph.composites:
        holding = [g for g in unsplit if g.primitives & composite.members]
        assert len(holding) == 1 and holding[0].primitives == composite.members, holding
        assert holding[0].name.startswith(("layer_norm", "softmax"))
        assert not any(g.primitives >= composite.members for g in split)


def test_texture_memorys_partition_maps_onto_the_planned_primitives():
    """In texture memory the module is laid out before fission (packed convs, packs, unpacks as primitives, the
    packed convs heavy); FuseOps' partition of it, through the texture pipeline, maps back exactly: planning the
    planned module again keeps its bindings' names."""
    from adreno.options import Memory, Winograd
    from adreno.orchestrate.graph import prepared_graph
    from adreno.orchestrate.report import imported

    mod, _ = imported("mobilevit_xs", "adreno-740", Memory.TEXTURE, Winograd.OFF)
    mod, graph = prepared_graph(mod)
    ops = [op_name(graph.calls[p.name]) for p in graph.primitives]
    assert "pack_nchw4c" in ops and any(op.startswith("conv2d_nchw4c") for op in ops)
    assert all(p.heavy for p in graph.primitives if op_name(graph.calls[p.name]).startswith(("conv2d_nchw4c",
                                                                                              "dwconv2d_nchw4c")))
    groups = fuseops_groups(mod, graph, devices.get_device("adreno-740"), Memory.TEXTURE, graph.composites)
    assert isinstance(groups, list), groups
    assert any("conv2d_nchw4c" in g.name for g in groups)
    members = [p for g in groups for p in g.primitives]
    assert len(members) == len(set(members))
