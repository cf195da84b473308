"""The fissioned attention graph becomes a primitive graph whose candidates the BLP can always cover."""

from adreno.frontend.importer import to_relax
from adreno.orchestrate.blp import Choice, solve
from adreno.orchestrate.candidates import enumerate_groups, kernel_of
from adreno.orchestrate.fission import fission
from adreno.orchestrate.graph import primitive_graph
from tests.orchestrate.graphs import attention


def test_attention_candidates_cover_the_graph():
    graph = primitive_graph(fission(to_relax(attention())))
    names = [p.name for p in graph.primitives]
    assert sum(p.heavy for p in graph.primitives) == 5  # q, k, v projections, q k^T, p v
    assert len(names) >= 10 and graph.outputs[0] in names
    groups = enumerate_groups(list(graph.primitives), max_size=4)
    assert all(sum(p.heavy for p in graph.primitives if p.name in g) <= 1 for g in groups)
    # cost = one launch per kernel: the optimum is the fewest kernels, at least one per heavy primitive
    kernels = [kernel_of(g, graph.primitives, graph.outputs, 1.0, str(i)) for i, g in enumerate(groups)]
    choice = solve(kernels, graph.outputs, graph.external)
    assert isinstance(choice, Choice) and choice.optimal
    assert len(choice.kernels) >= 5 and choice.cost == len(choice.kernels)
    covered = set().union(*(k.primitives for k in choice.kernels))
    assert graph.outputs[0] in covered


def test_zoo_graph_reads_only_its_inputs_and_weights():
    """Every value a primitive reads is another primitive's output or external; the chain reaches the input."""
    from adreno.frontend import zoo

    graph = primitive_graph(fission(to_relax(zoo.get_model("efficientnet_se", seed=0))))
    names = {p.name for p in graph.primitives}
    assert all(v in names or v in graph.external for p in graph.primitives for v in p.inputs)
    # the input image is read by the first conv, and the output depends on it through the whole network
    depends = {p.name for p in graph.primitives if any(v in graph.external and not v.startswith("const")
                                                         for v in p.inputs)}
    for p in graph.primitives:
        if any(v in depends for v in p.inputs):
            depends.add(p.name)
    assert graph.outputs[0] in depends
    kernels = [kernel_of(g, graph.primitives, graph.outputs, 1.0, str(i))
               for i, g in enumerate(enumerate_groups(list(graph.primitives), max_size=3))]
    choice = solve(kernels, graph.outputs, graph.external)
    assert isinstance(choice, Choice) and len(choice.kernels) * 3 >= len(depends)


def test_winograd_stages_are_primitives_and_the_gemm_is_heavy():
    """A ResNet block rewritten into Winograd stages before fission (as `compile --orchestrate` does): each conv is
    an input transform, a batched GEMM and an output transform; the GEMM is the heavy one, so no candidate holds
    two of them, and a candidate may join a transform to its neighbours' elementwise work."""
    from adreno.frontend import zoo
    from adreno.options import Winograd
    from adreno.orchestrate.graph import op_name, prepared
    from adreno.winograd import rewrite

    mod = rewrite(to_relax(zoo.get_model("resnet18_block", seed=0)), Winograd.AUTO)
    graph = primitive_graph(prepared(mod))
    ops = {p.name: op_name(graph.calls[p.name]) for p in graph.primitives}
    heavy = sorted(ops[p.name] for p in graph.primitives if p.heavy)
    assert heavy == ["winograd4_batch_gemm"] * 2, ops  # the two convs have one shape: one PrimFunc
    assert sum("input_transform" in op for op in ops.values()) == 2 and "conv2d" not in ops.values()
    groups = enumerate_groups(list(graph.primitives), max_size=3)
    assert all(sum(p.heavy for p in graph.primitives if p.name in g) <= 1 for g in groups)
    assert any(len(g) > 1 and any("input_transform" in ops[n] for n in g) for g in groups)
