"""Index arithmetic computed once per kernel in the OpenCL source, not repeated at every access.

TVM 0.27's TIR pipeline binds repeated subexpressions to variables (`CommonSubexprElim`: `cse_v1 = blockIdx * 64 +
threadIdx`), but the device finalize that follows (`StmtSimplify`) substitutes every use back with its expression
and leaves the bindings in place, unused. Every kernel's source then declares its `cse_v` variables, never reads
them, and spells out each image coordinate and buffer index in full at each access: ResNet-18's Winograd input
transform was 150 KB of OpenCL C for 36 loads and 36 stores, and every kernel of the model had the pattern.

The driver's compiler parses and simplifies all of that text before its own common-subexpression pass undoes the
repetition, on the phone at every cold start as on PoCL. `shared_subexpressions_pass` runs after TVM's device
finalize: it drops the bindings nothing reads, then binds the repeated subexpressions again. The arithmetic is
the same, so is every kernel's result; only the source is shorter. It is part of the device finalize of our TIR
pipeline (`adreno.texture.tir.register_pipeline`), which both the launch plan and the host library's build use.
"""

from __future__ import annotations


def without_unread_bindings(stmt):
    """`stmt` without the `Bind` statements whose variable no later statement of their sequence reads."""
    import tvm
    import tvm_ffi

    def visit(node):
        if type(node).__name__ != "SeqStmt":
            return node
        seq = list(node.seq)
        kept = [s for i, s in enumerate(seq) if not (type(s).__name__ == "Bind" and _unread(s.var, seq[i + 1:]))]
        if len(kept) == len(seq):
            return node
        return kept[0] if len(kept) == 1 else tvm.tirx.SeqStmt(kept)

    return tvm_ffi.structural_map(stmt, visit, order="post")


def _unread(var, rest: list) -> bool:
    import tvm

    if not rest:
        return True
    free = tvm.tirx.analysis.undefined_vars(rest[0] if len(rest) == 1 else tvm.tirx.SeqStmt(rest))
    return not any(v.same_as(var) for v in free)


def shared_subexpressions_pass():
    """The finalize step: unread bindings dropped, then TVM's `CommonSubexprElim` run again on what is left."""
    import tvm

    @tvm.transform.module_pass(opt_level=0, name="adreno.DropUnreadBindings")
    def drop(mod, _ctx):
        functions = {gvar: func.with_body(without_unread_bindings(func.body)) if hasattr(func, "with_body") else func
                     for gvar, func in mod.functions.items()}
        return tvm.IRModule(functions, attrs=mod.attrs)

    return tvm.transform.Sequential([drop, tvm.tirx.transform.CommonSubexprElim()])
