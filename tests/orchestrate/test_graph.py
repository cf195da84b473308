"""The fissioned attention graph becomes a primitive graph whose candidates the BLP can always cover."""

from adreno.frontend import to_relax
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
