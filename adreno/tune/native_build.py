"""A tuner candidate as TVM's own runtime runs it: the native artifact (`adreno.runners.native`) that the TVM-native
runner measures through a phone's `tvm_rpc`.

The candidate's scheduled function is lowered exactly as the launch plan lowers it (`texture.tir.for_scopes`: a
texture task's parameters in the images its model's artifact gives them, through the texture TIR pipeline), built
by TVM into a library with an LLVM host of its own (this machine's, or an aarch64 phone's linked by the NDK's
clang), and exported beside the candidate's launch-plan artifact (`lib.so` + `native.json`, each argument in its
memory scope). The launch-plan artifact is built too: its lowering checks what the launch plan would refuse (a
texture store that is not one pixel, a private array beyond a register tile), so a config measured this way is one
`adreno compile --records` can apply.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..options import Host, Precision


@dataclass(frozen=True)
class NativeBuild:
    """How candidates' TVM libraries are built: for which host CPU (`Host.NATIVE`: this machine, a loopback
    `tvm.rpc` server; `Host.ANDROID`: a phone's `tvm_rpc`), linked by `cc` (for android an NDK
    aarch64-linux-android<API>-clang; default $TVM_NDK_CC)."""

    host: Host = Host.NATIVE
    cc: str | None = None

    @property
    def compiler(self) -> str | None:
        return self.cc or (os.environ.get("TVM_NDK_CC") if self.host is Host.ANDROID else None)


def native_args(task):
    """The `NativeArg` of every parameter of a task's function (outputs last), in the scope its image gives it."""
    from ..runners.native import NativeArg  # inside: loads numpy at import

    func = task.func()
    n_inputs = len(func.params) - task.n_outputs
    images = task.images or [None] * len(func.params)
    return [NativeArg(p.name, [int(d) for d in p.shape], str(p.dtype), image["scope"] if image else "global",
                      "input" if index < n_inputs else "output")
            for index, (p, image) in enumerate(zip(func.params, images))]


def export_candidate(task, scheduled, out_dir: str, build: NativeBuild) -> None:
    """Build `scheduled` (the task's function, scheduled) as a TVM library for `build`'s host and write it with its
    calling convention to `out_dir`; TVM's and the linker's errors are raised (the caller makes them values)."""
    import tvm

    from ..runners.native import export_native  # inside: loads numpy at import
    from ..targets.target import tvm_target  # inside: loads TVM at import
    from ..texture.tir import for_scopes  # inside: loads numpy at import

    if task.precision is Precision.FP16:  # TVM's runtime gives a tensor an image of its own dtype: float32 here
        raise ValueError("half-float image storage is not measured through TVM's runtime (its images have the "
                         "tensors' dtype, float32)")
    target = tvm_target(task.target_name, host=build.host)
    func, pipeline = for_scopes(scheduled.with_attr("tirx.is_scheduled", True), task.scopes, target)
    module = tvm.IRModule({task.func_name: func.with_attr("global_symbol", task.func_name)})
    library = tvm.tirx.build(module, target=target, pipeline=pipeline)
    export_native(library, out_dir, task.func_name, native_args(task), device="cl", cc=build.compiler)
