"""A kernel's own parameter list, as the compiled program reports it, against the launch plan's arguments.

The plan says which storage each kernel argument gets; the driver does not check it. A buffer bound where the
kernel takes an image (or the reverse) crashes the process, and a 2-byte tensor bound to a `float*` reads past its
end. So every argument is compared with the kernel's parameter, as `clGetKernelArgInfo` reports it (programs are
built with `-cl-kernel-arg-info`, `ARG_INFO_OPTION`): its kind (image, global pointer, local pointer, value), and
for pointers and values the element size of the type against the dtype the plan gives.

Where a driver does not report argument info (allowed for programs loaded from binaries), `kernel_params` returns
None and the executor counts the kernel as unchecked (`Executor.unchecked_kernels`) instead of guessing."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ARG_INFO_OPTION = "-cl-kernel-arg-info"

def program_options(options: str) -> str:
    """The build options of every program we build: the caller's plus `ARG_INFO_OPTION`, in one place so that the
    program cache's keys, bundles and the executor agree on them."""
    return options if ARG_INFO_OPTION in options.split() else f"{ARG_INFO_OPTION} {options}".strip()


# OpenCL C scalar type names and their sizes (a vector type `float4` is 4 of them)
_SCALAR_BYTES = {"char": 1, "uchar": 1, "bool": 1, "short": 2, "ushort": 2, "half": 2, "int": 4, "uint": 4,
                 "float": 4, "long": 8, "ulong": 8, "double": 8}


@dataclass(frozen=True)
class Param:
    """One kernel parameter: kind is "image", "global", "local" (pointers) or "value"; element_bytes of the
    pointee or value type (0 for images and unknown type names)."""

    kind: str
    type_name: str
    element_bytes: int


def kernel_params(kernel) -> list[Param] | None:
    """The parameters of a pyopencl Kernel, or None when the driver keeps no argument info for it."""
    import pyopencl as cl

    info, qualifier = cl.kernel_arg_info, cl.kernel_arg_address_qualifier
    params = []
    try:
        for index in range(kernel.num_args):
            type_name = kernel.get_arg_info(index, info.TYPE_NAME).strip()
            address = kernel.get_arg_info(index, info.ADDRESS_QUALIFIER)
            params.append(_param(type_name, address, qualifier))
    except cl.Error:
        return None
    return params


def _param(type_name: str, address: int, qualifier) -> Param:
    if type_name.startswith("image"):
        return Param("image", type_name, 0)
    pointer = type_name.endswith("*")
    base = type_name.rstrip("*").replace("unsigned ", "u").replace("signed ", "").split()[-1]
    if not pointer:
        return Param("value", type_name, _type_bytes(base))
    kind = "local" if address == qualifier.LOCAL else "global"
    return Param(kind, type_name, _type_bytes(base))


def _type_bytes(name: str) -> int:
    digits = name.lstrip("abcdefghijklmnopqrstuvwxyz_")
    scalar = name[:len(name) - len(digits)]
    lanes = int(digits) if digits.isdigit() else 1
    return _SCALAR_BYTES.get(scalar, 0) * lanes


def argument_mismatch(params: list[Param], launch, step, tensors) -> str | None:
    """Why the plan's arguments of `launch` (a KernelLaunch of `step`) do not fit the kernel's `params`, or None.
    `tensors`: the plan's TensorSpecs by name."""
    wanted = [*launch.args, *(["local"] if launch.local_mem_bytes else [])]
    if len(params) != len(wanted):
        return f"takes {len(params)} arguments, the plan gives {len(wanted)}"
    for position, (param, arg) in enumerate(zip(params, wanted)):
        given, dtype = _given(arg, step, tensors)
        if given != param.kind:
            return f"argument {position} is {param.kind} ({param.type_name}), the plan gives {given}"
        if dtype is not None and param.kind != "image" and param.element_bytes \
                and np.dtype(dtype).itemsize != param.element_bytes:
            return f"argument {position} is {param.type_name}, the plan gives {dtype}"
    return None


def _given(arg, step, tensors) -> tuple[str, str | None]:
    """What the plan binds for one argument: its kind and the dtype to check (None: any)."""
    if arg == "local":
        return "local", None
    if arg.arg is not None:
        spec = tensors[step.args[arg.arg]]
        return ("image", None) if spec.image is not None else ("global", spec.dtype)
    if arg.workspace is not None:
        return "global", None  # a workspace is raw bytes the kernel types itself
    return "value", arg.dtype
