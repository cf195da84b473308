"""A built program's binary, fetched without holding Python's GIL.

Asking a driver for a program's binary can be the longest call of a start: PoCL generates the code of every kernel
then (5-6 s for ResNet-18), since its `clBuildProgram` only parses the source. pyopencl's `get_info` holds the GIL
through the call, so a program cache that stores the binary in a background thread would still stop every other
Python thread (the app's next runs) for those seconds. This calls `clGetProgramInfo` through ctypes, which releases
the GIL for the call, on the ICD loader pyopencl itself links (its wheel bundles one), or the system's.
Every call's status is checked; a failure is a `BinaryError` naming the call and its error code.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import os

CL_SUCCESS = 0
CL_PROGRAM_NUM_DEVICES = 0x1162
CL_PROGRAM_BINARY_SIZES = 0x1165
CL_PROGRAM_BINARIES = 0x1166


class BinaryError(RuntimeError):
    """An OpenCL call of the binary fetch failed: its name and error code."""


@functools.cache
def _loader():
    """The OpenCL ICD loader pyopencl uses (bundled in its wheel), else the system's; None when neither is found."""
    import pyopencl

    bundled = sorted(glob.glob(os.path.join(os.path.dirname(pyopencl.__file__), ".libs", "libOpenCL*.so*")))
    name = bundled[0] if bundled else ctypes.util.find_library("OpenCL")
    if name is None:
        return None
    lib = ctypes.CDLL(name)
    lib.clGetProgramInfo.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p,
                                     ctypes.POINTER(ctypes.c_size_t)]
    lib.clGetProgramInfo.restype = ctypes.c_int
    return lib


def _info(lib, program: ctypes.c_void_p, param: int, name: str, size: int, value) -> None:
    status = lib.clGetProgramInfo(program, param, size, value, None)
    if status != CL_SUCCESS:
        raise BinaryError(f"clGetProgramInfo({name}) failed with error {status}")


def program_binary(program) -> bytes:
    """The binary of a pyopencl Program built for one device (empty when the driver gives none), fetched with the
    GIL released where the ICD loader is found (else through pyopencl, holding it)."""
    lib = _loader()
    if lib is None:
        import pyopencl as cl

        return bytes(program.get_info(cl.program_info.BINARIES)[0])
    handle = ctypes.c_void_p(program.int_ptr)
    devices = ctypes.c_uint()
    _info(lib, handle, CL_PROGRAM_NUM_DEVICES, "CL_PROGRAM_NUM_DEVICES", ctypes.sizeof(devices), ctypes.byref(devices))
    if devices.value != 1:
        raise BinaryError(f"the program is built for {devices.value} devices; the binary fetch takes one")
    size = ctypes.c_size_t()
    _info(lib, handle, CL_PROGRAM_BINARY_SIZES, "CL_PROGRAM_BINARY_SIZES", ctypes.sizeof(size), ctypes.byref(size))
    if size.value == 0:
        return b""
    binary = ctypes.create_string_buffer(size.value)
    pointers = (ctypes.c_char_p * 1)(ctypes.cast(binary, ctypes.c_char_p))
    _info(lib, handle, CL_PROGRAM_BINARIES, "CL_PROGRAM_BINARIES", ctypes.sizeof(pointers), pointers)
    return binary.raw
