"""Kernel sources whose expressions nest no deeper than an OpenCL compiler parses.

FuseOps fuses a chain of elementwise ops into one kernel of up to 256 ops, and the schedule inlines each op into
the next: a chain of 3,000 Relus becomes kernels whose one store is `max(max(max(... x ..., 0f), 0f), 0f)`, 256
calls deep. Clang (PoCL's compiler, and Qualcomm's is no more generous) refuses a line whose brackets nest past 256
("bracket nesting level exceeded"), so a valid model did not compile.

`shallow_expressions_pass` runs last in the device finalize: a statement whose expression tree is more than
`MAX_HEIGHT` levels tall gets its subexpressions of height `SPLIT_HEIGHT` bound to variables in statements before it
(`Bind`, which the OpenCL codegen prints as `float v = ...;`), round after round, until none is that tall. The
arithmetic and its order are the same; only its spelling changes. Nothing is bound out of a branch that might not
run (`if_then_else`, `select`, `&&`, `||`) or out of a `let` body, so no load moves past the condition guarding
it. Statements below the limit are left as they are: every other kernel's source is byte for byte what it was.
"""

from __future__ import annotations

MAX_HEIGHT = 64  # a statement's expression may be this many levels tall (a quarter of clang's bracket limit)
SPLIT_HEIGHT = 32  # the height of the subexpressions bound to variables when it is taller
_HOISTABLE_DTYPES = ("float", "int", "uint", "bfloat")
_CONDITIONAL_CALLS = ("prim.if_then_else", "tirx.if_then_else")


def shallow_expressions_pass():
    """The finalize step: each PrimFunc's statements with too tall an expression split (see the module doc)."""
    import tvm

    @tvm.transform.module_pass(opt_level=0, name="adreno.ShallowExpressions")
    def split(mod, _ctx):
        functions = {gvar: func.with_body(shallow_statements(func.body)) if hasattr(func, "with_body") else func
                     for gvar, func in mod.functions.items()}
        return tvm.IRModule(functions, attrs=mod.attrs)

    return split


def shallow_statements(stmt):
    """`stmt` with every BufferStore, Evaluate and Bind whose expression is taller than MAX_HEIGHT preceded by the
    bindings that make it shallow (`stmt` itself when none is: the common case, found by one quick walk)."""
    import tvm_ffi
    from tvm import tirx

    if not _taller_than(stmt, MAX_HEIGHT):
        return stmt

    made: set[int] = set()  # the SeqStmts made here, spliced into their parent sequence

    def leaf(node):
        binds, node = _split(node)
        if not binds:
            return node
        seq = tirx.SeqStmt([*binds, node])
        made.add(seq.__chandle__())
        return seq

    def sequence(node):
        if not any(s.__chandle__() in made for s in node.seq):
            return node
        return tirx.SeqStmt([inner for s in node.seq
                             for inner in (s.seq if s.__chandle__() in made else [s])])

    return tvm_ffi.structural_map(stmt, [((tirx.BufferStore, tirx.Evaluate, tirx.Bind), leaf),
                                         (tirx.SeqStmt, sequence)], order="post")


def _taller_than(stmt, limit: int) -> bool:
    """Whether an expression under `stmt` nests more than `limit` levels: a walk in TVM's own traversal that calls
    back into Python only at expressions, and stops at the first one that deep."""
    import tvm
    import tvm_ffi

    depth = [0]

    def enter(value, visitor):
        if depth[0] >= limit:
            return tvm_ffi.VisitInterrupt(None)
        depth[0] += 1
        try:
            return visitor.default_visit(value)
        finally:
            depth[0] -= 1

    return tvm_ffi.structural_visit(stmt, (tvm.ir.Expr, enter)) is not None


def _split(stmt) -> tuple[list, object]:
    """(Bind statements, `stmt` rewritten to read their variables), empty when `stmt` is shallow enough."""
    import tvm_ffi
    from tvm import tirx

    binds = []
    for _ in range(10_000):  # each round lowers the tallest expression by SPLIT_HEIGHT - 1 levels
        heights, hoistable = _measure(stmt)
        if max(heights.values(), default=0) <= MAX_HEIGHT:
            break
        chosen = {handle: node for handle, node in hoistable.items() if heights[handle] == SPLIT_HEIGHT}
        if not chosen:
            break  # nothing may move (all of it behind a condition): the driver's compiler has the last word
        variables = {}
        for handle, node in chosen.items():
            variables[handle] = tirx.Var(f"deep_v{len(binds)}", node.ty)
            binds.append(tirx.Bind(variables[handle], node))

        def replace(node):
            return variables.get(node.__chandle__(), node)

        stmt = tvm_ffi.structural_map(stmt, replace, order="pre")
    return binds, stmt


def _measure(stmt) -> tuple[dict[int, int], dict[int, object]]:
    """(height of every expression node under `stmt`, the nodes that may be bound to a variable before `stmt`),
    keyed by object handle; iterative, since the trees are deeper than Python's recursion limit allows."""
    heights: dict[int, int] = {}
    hoistable: dict[int, object] = {}
    stack = [(root, False, False) for root in _children(stmt)]  # (node, children done, under a condition)
    while stack:
        node, done, guarded = stack.pop()
        handle = node.__chandle__()
        if done:
            heights[handle] = 1 + max((heights[c.__chandle__()] for c in _children(node)), default=0)
            if not guarded and _may_hoist(node):
                hoistable[handle] = node
            continue
        if handle in heights:  # shared: one guarded occurrence keeps every occurrence in place
            if guarded:
                hoistable.pop(handle, None)
            continue
        stack.append((node, True, guarded))
        children = _children(node)
        stack += [(child, False, guarded or _guards(node, index)) for index, child in enumerate(children)]
    return heights, hoistable


def _children(node) -> list:
    """The expression operands of a TIR node (statement or expression), from its reflected fields."""
    import tvm
    import tvm_ffi

    out = []
    for field in type(node).__tvm_ffi_type_info__.fields:
        value = getattr(node, field.name)
        if isinstance(value, tvm.ir.Expr):
            out.append(value)
        elif isinstance(value, tvm_ffi.Array):
            out += [item for item in value if isinstance(item, tvm.ir.Expr)]
    return [child for child in out if not isinstance(child, tvm.ir.Op)]


def _guards(node, index: int) -> bool:
    """Whether operand `index` of `node` is evaluated only under a condition (or inside a `let` body)."""
    import tvm
    from tvm import tirx

    if isinstance(node, (tirx.Select, tirx.Let)):
        return True
    if isinstance(node, (tirx.And, tirx.Or)):
        return index > 0
    return isinstance(node, tvm.ir.expr.Call) and getattr(node.op, "name", "") in _CONDITIONAL_CALLS and index > 0


def _may_hoist(node) -> bool:
    from tvm import tirx

    if isinstance(node, (tirx.Var, tirx.IntImm, tirx.FloatImm)):
        return False
    dtype = getattr(node.ty, "dtype", None)  # a PrimType's: no pointer, tuple or opaque value moves
    return dtype is not None and str(dtype).startswith(_HOISTABLE_DTYPES)
