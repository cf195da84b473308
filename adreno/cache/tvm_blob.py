"""TVM's precompiled-program blob: the binaries TVM's OpenCL runtime takes through
``opencl.SetPreCompiledPrograms``, one per kernel (see `tvm_precompiled_blob` for its layout)."""

from __future__ import annotations

import struct

_U64 = struct.Struct("<Q")


def tvm_precompiled_blob(programs: dict[str, bytes]) -> bytes:
    """Serialize kernel binaries into the blob TVM's OpenCL runtime takes via ``opencl.SetPreCompiledPrograms``.

    Layout (what ``OpenCLModuleNode::GetPreCompiledPrograms`` writes and ``SetPreCompiledPrograms`` reads
    in TVM's ``src/backend/opencl/runtime/opencl_module.cc``, v0.26 to main; earlier
    ``src/runtime/opencl/opencl_module.cc``, through ``support::BytesOutStream`` / ``BytesInStream``,
    whose serializers write integers little-endian and strings and byte vectors as a u64 length followed
    by the bytes)::

        u64 count                       number of programs
        count times:
            u64 name_len, name bytes    kernel (function) name, the key TVM's module uses per program
            u64 bin_len,  bin bytes     the program binary (CL_PROGRAM_BINARIES) for that kernel

    Every integer is an unsigned 64-bit little-endian value; there is no magic, version, key or
    checksum, and TVM does not check for trailing bytes. TVM builds one OpenCL program per kernel, so
    each binary must contain the kernel it is named after. Programs are written in the dict's order.
    Raises ValueError for an empty name or binary (TVM refuses both).
    """
    parts = [_U64.pack(len(programs))]
    for name, binary in programs.items():
        raw_name = name.encode("utf-8")
        if not raw_name or not binary:
            raise ValueError(f"program {name!r}: TVM needs a non-empty kernel name and binary")
        parts += [_U64.pack(len(raw_name)), raw_name, _U64.pack(len(binary)), bytes(binary)]
    return b"".join(parts)


def read_tvm_precompiled_blob(blob: bytes) -> dict[str, bytes]:
    """Parse a blob in the layout of `tvm_precompiled_blob` (as ``opencl.GetPreCompiledPrograms`` returns it).

    Stricter than TVM: raises ValueError on a truncated blob, trailing bytes, a duplicate kernel name or a
    name that is not UTF-8.
    """
    view = memoryview(blob)
    pos = 0

    def take(size: int, what: str) -> memoryview:
        nonlocal pos
        if size > len(view) - pos:
            raise ValueError(
                f"truncated TVM program blob: {what} needs {size} bytes at offset {pos}, {len(view) - pos} left"
            )
        pos += size
        return view[pos - size : pos]

    def take_u64(what: str) -> int:
        return _U64.unpack(take(_U64.size, what))[0]

    programs: dict[str, bytes] = {}
    count = take_u64("program count")
    for index in range(count):
        raw_name = take(take_u64(f"name length of program {index}"), f"name of program {index}")
        try:
            name = bytes(raw_name).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"TVM program blob: name of program {index} is not UTF-8") from exc
        if name in programs:
            raise ValueError(f"TVM program blob: duplicate kernel name {name!r}")
        programs[name] = bytes(take(take_u64(f"binary length of {name!r}"), f"binary of {name!r}"))
    if pos != len(view):
        raise ValueError(f"TVM program blob: {len(view) - pos} trailing bytes after {count} programs")
    return programs
