"""Functions TVM's operator library wrote already bound to threads are scheduled: no rule looks for blocks in them.

TVM 0.27 legalizes a few ops for GPUs to hand-written kernels (topi's ir_builder: scatter_elements, scatter_nd), one
opaque block whose body launches its own threads. They carry no `tirx.is_scheduled`, so dlight's default-schedule
pass (and ours) would try them: its Adreno pool rule asks for the function's root block and raises (a traceback in
the buffer path). `mark_pass` marks every function that binds a thread, which is what being scheduled means.
"""

from __future__ import annotations


def mark_pass():
    """A module pass marking each PrimFunc that binds a thread extent `tirx.is_scheduled`."""
    import tvm
    from tvm import tirx

    @tvm.transform.module_pass(opt_level=0, name="MarkThreadBound")
    def mark(mod, _ctx):
        for gv, func in list(mod.functions_items()):
            if isinstance(func, tirx.PrimFunc) and not func.attrs.get("tirx.is_scheduled", False) and _binds(func):
                mod[gv] = func.with_attr("tirx.is_scheduled", True)
        return mod

    return mark


def _binds(func) -> bool:
    import tvm_ffi

    found = []

    def visit(node):
        if type(node).__name__ == "AttrStmt" and node.attr_key == "thread_extent":
            found.append(node)
        return node

    tvm_ffi.structural_map(func.body, visit, order="post")
    return bool(found)
