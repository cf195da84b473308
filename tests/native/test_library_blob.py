"""The host library embeds its OpenCL source zlib-compressed (`adreno.compiler.library_blob`) and the plugin inflates
it: the library runs as before, holds no plain kernel source, and a damaged compressed source is one clear error."""

from __future__ import annotations

import re
import struct
import zlib

import pytest

import adreno
from adreno.artifact.format import Artifact
from adreno.errors import AdrenoError
from adreno.compiler.library_blob import COMPRESSED_FORMAT, compress_opencl
from tests.native.test_plugin import opencl_module


def _string(value: bytes) -> bytes:
    return struct.pack("<Q", len(value)) + value


def _module_bytes(fmt: bytes, data: bytes) -> bytes:
    """An OpenCL module's payload without kernels (serialized_module.h)."""
    return _string(fmt) + struct.pack("<Q", 0) + _string(data)


def _blob(*modules: tuple[bytes, bytes | None]) -> bytes:
    """A packed-modules blob: a one-row import tree, then (kind, payload) modules (payload None: host code)."""
    rest = struct.pack("<QQQ", 2, 0, len(modules) - 1) + struct.pack("<QQ", 1, 1)
    rest += b"".join(_string(kind) + (b"" if payload is None else _string(payload)) for kind, payload in modules)
    return struct.pack("<Q", len(rest)) + rest


@pytest.mark.parametrize("memory", ["buffer", "texture"])
def test_the_library_holds_its_kernels_compressed_and_the_plugin_inflates_them(native_tiny, memory):
    assert adreno.PLUGIN.loaded, adreno.PLUGIN.problem
    artifact = Artifact.load(native_tiny[memory])
    library = (artifact.path / "lib.so").read_bytes()
    assert b"__kernel" not in library, "the library embeds plain OpenCL source"
    source = opencl_module(artifact.path / "lib.so").inspect_source()
    names = {name for program in artifact.plan.programs
             for name in re.findall(r"__kernel void (\w+)\(", artifact.kernel_source(program))}
    assert names and all(f"__kernel void {name}(" in source for name in names), names


def test_compress_opencl_rewrites_only_the_opencl_source():
    source = b"__kernel void k(__global float* x) { x[0] = 1.0f; }\n" * 20
    vm = b"\x01\x02 the VM executable's bytes"
    compressed = compress_opencl(_blob((b"relax.VMExecutable", vm), (b"_lib", None),
                                       (b"opencl", _module_bytes(b"cl", source))))
    assert compressed.startswith(struct.pack("<Q", len(compressed) - 8))
    assert _string(b"relax.VMExecutable") + _string(vm) + _string(b"_lib") in compressed
    assert source not in compressed
    payload = compressed[compressed.index(_string(b"opencl")) + len(_string(b"opencl")) + 8:]
    fmt_end = 8 + len(COMPRESSED_FORMAT)
    assert payload[8:fmt_end] == COMPRESSED_FORMAT.encode()
    data = payload[fmt_end + 8 + 8:]  # after the kernel count (0) and the data's length
    assert struct.unpack_from("<Q", data)[0] == len(source) and zlib.decompress(data[8:]) == source


@pytest.mark.parametrize("damage", ["a size that is not the blob's", "truncated", "bytes after the source"])
def test_a_blob_that_does_not_parse_is_refused(damage):
    blob = _blob((b"_lib", None), (b"opencl", _module_bytes(b"cl", b"__kernel void k() {}")))
    if damage == "a size that is not the blob's":
        blob = struct.pack("<Q", 5) + blob[8:]
    elif damage == "truncated":
        blob = struct.pack("<Q", len(blob) - 8 - 3) + blob[8:-3]
    else:
        blob = _blob((b"opencl", _module_bytes(b"cl", b"__kernel void k() {}") + b"\x00"))
    with pytest.raises(AdrenoError, match="TVM changed its format"):
        compress_opencl(blob)


@pytest.mark.parametrize("data, problem", [
    (struct.pack("<Q", 64) + b"not a zlib stream", "does not inflate"),
    (struct.pack("<Q", 9) + zlib.compress(b"__kernel void k() {}"), "does not inflate"),  # the size is wrong
    (struct.pack("<Q", 1 << 40) + zlib.compress(b"x"), "bytes declared"),
    (b"\x01\x02", "truncated"),
])
def test_a_damaged_compressed_source_is_one_error(data, problem):
    import tvm

    assert adreno.PLUGIN.loaded, adreno.PLUGIN.problem
    load = tvm.get_global_func("ffi.Module.load_from_bytes.opencl")
    with pytest.raises(Exception, match=problem) as raised:
        load(_module_bytes(COMPRESSED_FORMAT.encode(), data))
    assert "\n" not in str(raised.value).strip()
    source = b"__kernel void k() {}"
    good = load(_module_bytes(COMPRESSED_FORMAT.encode(), struct.pack("<Q", len(source)) + zlib.compress(source)))
    assert good.inspect_source() == source.decode()
