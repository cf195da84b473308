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
    from adreno.compiler.winograd import rewrite

    mod = rewrite(to_relax(zoo.get_model("resnet18_block", seed=0)), Winograd.AUTO)
    graph = primitive_graph(prepared(mod))
    ops = {p.name: op_name(graph.calls[p.name]) for p in graph.primitives}
    heavy = sorted(ops[p.name] for p in graph.primitives if p.heavy)
    assert heavy == ["winograd4_batch_gemm"] * 2, ops  # the two convs have one shape: one PrimFunc
    assert sum("input_transform" in op for op in ops.values()) == 2 and "conv2d" not in ops.values()
    groups = enumerate_groups(list(graph.primitives), max_size=3)
    assert all(sum(p.heavy for p in graph.primitives if p.name in g) <= 1 for g in groups)
    assert any(len(g) > 1 and any("input_transform" in ops[n] for n in g) for g in groups)


def _llvm_run(mod, *inputs):
    import numpy as np  # noqa: F401 - the inputs are numpy arrays
    import tvm
    from tvm import relax

    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    out = vm["main"](*map(tvm.runtime.tensor, inputs))
    return out.numpy() if hasattr(out, "numpy") else out[0].numpy()


def test_composites_bound_whole_compute_what_their_primitives_compute():
    """Fission keeps each operator it splits as a `Composite`: its primitives, the values they read, the operator
    over them. Bound whole again (`recomposed`), the module holds the operators instead of their primitives and
    computes the same; a subgraph holding one whole is the operator, one holding part of it stays split."""
    import numpy as np

    from adreno.orchestrate.blp import Kernel
    from adreno.orchestrate.graph import prepared_graph, recomposed
    from adreno.orchestrate.subgraph import subgraph
    from tests.orchestrate.graphs import layernorm_gelu_matmul

    mod, graph = prepared_graph(to_relax(layernorm_gelu_matmul()))
    ops = sorted(c.call.op.name for c in graph.composites)
    assert ops == ["relax.nn.gelu", "relax.nn.layer_norm"], ops
    layer_norm = next(c for c in graph.composites if c.call.op.name == "relax.nn.layer_norm")
    assert len(layer_norm.members) == 9 and layer_norm.final == max(layer_norm.members, key=lambda n: int(n[1:]
                                                                                              .split(":")[0]))
    assert len(layer_norm.operands) == 3  # x, gamma, beta

    whole = recomposed(mod, graph, graph.composites)
    bindings = [b for block in whole["main"].body.blocks for b in block.bindings if hasattr(b.value, "op")]
    assert len(bindings) == len(graph.primitives) - sum(len(c.inner) for c in graph.composites)
    assert {"relax.nn.layer_norm", "relax.nn.gelu"} <= {getattr(b.value.op, "name", "") for b in bindings}
    x = np.random.default_rng(3).standard_normal([int(d) for d in mod["main"].params[0].ty.shape]).astype("float32")
    np.testing.assert_allclose(_llvm_run(whole, x), _llvm_run(mod, x), rtol=1e-5, atol=1e-5)

    def module_ops(group):
        kernel = kernel_of(group, graph.primitives, graph.outputs, 1.0, "k")
        sg = subgraph(graph, Kernel(kernel.name, kernel.primitives, kernel.inputs, kernel.outputs, 1.0))
        return [b.value.op.name for block in sg.mod["main"].body.blocks for b in block.bindings
                if hasattr(b.value, "op")]

    assert module_ops(layer_norm.members) == ["relax.nn.layer_norm"]
    part = module_ops(layer_norm.members - {layer_norm.final})
    assert len(part) == 8 and "relax.nn.layer_norm" not in part


def test_texture_module_is_the_keyed_one_with_its_weights_bound():
    """Texture memory measures a group's module with its weights as constants (the plan makes them param images) and
    keys it by buffer memory's module, weights as parameters: both memories' subgraphs of a group have one key (the
    records are keyed by it), the texture module reads only the non-constant values, and the two compute the same."""
    import numpy as np
    from tvm import relax

    from adreno.options import Memory
    from adreno.orchestrate.graph import prepared_graph
    from adreno.orchestrate.subgraph import subgraph
    from tests.orchestrate.graphs import layernorm_gelu_matmul

    _, graph = prepared_graph(to_relax(layernorm_gelu_matmul()))
    kernel = kernel_of(frozenset(p.name for p in graph.primitives), graph.primitives, graph.outputs, 1.0, "k")
    buffer, texture = (subgraph(graph, kernel, memory) for memory in (Memory.BUFFER, Memory.TEXTURE))
    assert texture.key == buffer.key and texture.writes == buffer.writes
    weights = [v for v in buffer.reads if not isinstance(graph.values[v], relax.Var)]
    assert len(weights) == 4  # LayerNorm's gamma and beta, the two MatMuls' weights
    assert texture.reads == tuple(v for v in buffer.reads if v not in weights) and len(texture.reads) == 1
    assert len(texture.mod["main"].params) == len(buffer.mod["main"].params) - len(weights)
    rng = np.random.default_rng(5)
    fed = {v: rng.standard_normal([int(d) for d in graph.values[v].ty.shape]).astype("float32")
           for v in texture.reads}
    np.testing.assert_allclose(
        _llvm_run(texture.mod, *(fed[v] for v in texture.reads)),
        _llvm_run(buffer.mod, *(fed[v] if v in fed else graph.values[v].value.numpy() for v in buffer.reads)),
        rtol=1e-5, atol=1e-5)
