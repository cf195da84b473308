"""The host library's packed modules, with the OpenCL C source compressed: what `export_library` embeds as `devc`.

A host library carries its device modules in one blob, which TVM's runtime reads at load. The OpenCL module in it
is the kernels' source, stored as written: in MobileNetV2's library 1.2 MB of a 1.6 MB `lib.so`, more than an fp16
model's weights save. Unrolled kernels compress about 25x, so `pack_imports` (the `fpack_imports` hook of
`export_library`) rewrites that one module with its source zlib-compressed; the plugin (`native/plugin`,
`serialized_module.cc`) inflates it at load. TVM's own OpenCL runtime reads only `cl`, which is why a library of
an artifact needs the plugin (as its texture tensors do).

Blob (TVM 0.27, little-endian; a string is a u64 length and its bytes)::

    blob     := u64 size of the rest, u64 n + n x u64 import_tree_row_ptr, u64 m + m x u64 child_indices,
                modules
    module   := string kind, then: nothing for "_lib" (the host code itself), a string payload otherwise
    opencl   := string format, u64 kernel_count, kernel_count x (string key, kernel), string data
    kernel   := string name, u64 n + n x 4 bytes (argument dtypes), u64 m + m x string (launch tags),
                u64 k + k x 4 bytes (argument tags)

Only the OpenCL payload's `format` ("cl" becomes COMPRESSED_FORMAT) and `data` (u64 source bytes, then the zlib
stream) change; the kernel table is copied as it is. A blob that does not parse exactly is an `AdrenoError`: TVM
changed its format, and the library is not written.
"""

from __future__ import annotations

import os
import struct
import zlib

from ..errors import AdrenoError

COMPRESSED_FORMAT = "cl.zlib"  # the plugin's name for it (serialized_module.h)
HOST_CODE = "_lib"


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def u64(self) -> int:
        if self.pos + 8 > len(self.data):
            raise AdrenoError(f"the host library's module blob is truncated at byte {self.pos}: TVM changed its "
                              "format (this adreno reads TVM 0.27's)")
        (value,) = struct.unpack_from("<Q", self.data, self.pos)
        self.pos += 8
        return value

    def raw(self, size: int) -> bytes:
        if size > len(self.data) - self.pos:
            raise AdrenoError(f"the host library's module blob is truncated at byte {self.pos}: TVM changed its "
                              "format (this adreno reads TVM 0.27's)")
        value = self.data[self.pos:self.pos + size]
        self.pos += size
        return value

    def string(self) -> bytes:
        return self.raw(self.u64())

    def at_end(self) -> bool:
        return self.pos == len(self.data)


def _string(value: bytes) -> bytes:
    return struct.pack("<Q", len(value)) + value


def _compressed_opencl(payload: bytes) -> bytes:
    """The OpenCL module's payload with its source compressed (unchanged if it is not OpenCL C source)."""
    reader = _Reader(payload)
    if reader.string() != b"cl":
        return payload
    for _ in range(reader.u64()):
        reader.string(), reader.string()
        reader.raw(4 * reader.u64())
        for _ in range(reader.u64()):
            reader.string()
        reader.raw(4 * reader.u64())
    table_end = reader.pos
    source = reader.string()
    if not reader.at_end():
        raise AdrenoError("the host library's OpenCL module has bytes after its source: TVM changed its format")
    table = payload[8 + 2:table_end]  # after the format string ("cl")
    data = struct.pack("<Q", len(source)) + zlib.compress(source, 9)
    return _string(COMPRESSED_FORMAT.encode()) + table + _string(data)


def compress_opencl(blob: bytes) -> bytes:
    """The packed-modules blob with every OpenCL module's source compressed."""
    reader = _Reader(blob)
    if reader.u64() != len(blob) - 8:
        raise AdrenoError("the host library's module blob does not start with its size: TVM changed its format")
    for _ in range(2):  # the import tree: row pointers, then child indices
        reader.raw(8 * reader.u64())
    out = [blob[8:reader.pos]]
    while not reader.at_end():
        kind = reader.string()
        out.append(_string(kind))
        if kind != HOST_CODE.encode():
            payload = reader.string()
            out.append(_string(_compressed_opencl(payload) if kind == b"opencl" else payload))
    rest = b"".join(out)
    return struct.pack("<Q", len(rest)) + rest


def pack_imports(module, is_system_lib: bool, symbol_prefix: str, workspace_dir: str) -> str:
    """`export_library`'s `fpack_imports`: the imports packed as TVM packs them (its blob, into an object file for
    the host code's own LLVM target), with the OpenCL source compressed. Returns the object file's path.

    A model without kernels (every output an input or a constant: ONNX's `Clip` with no bounds) has no LLVM host
    code and no OpenCL module: its imports are packed as TVM packs them then, as C source that the library's compiler
    builds."""
    import tvm

    hosts = [m for m in module._collect_dso_modules() if m.kind == "llvm"]
    if not hosts:
        path = os.path.join(workspace_dir, f"{symbol_prefix}devc.c")
        with open(path, "w") as source:
            source.write(tvm.get_global_func("runtime.ModulePackImportsToC")(module, is_system_lib, symbol_prefix))
        return path
    (host,) = hosts
    blob = bytes(tvm.get_global_func("runtime.ModulePackImportsToTensor")(module).numpy())
    packed = tvm.get_global_func("codegen.codegen_blob")(compress_opencl(blob), is_system_lib,
                                                          host.get_function("_get_target_string")(), symbol_prefix)
    path = os.path.join(workspace_dir, f"{symbol_prefix}devc.o")
    packed.write_to_file(path)
    return path
