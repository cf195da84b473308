"""Reading `.npz` files that may be damaged or hostile: an artifact's params.npz, `adreno run --input`.

`numpy.load` trusts what a member's `.npy` header declares: a shape of 10^23 elements raises OverflowError, a
header nested 2,000 deep `tokenize.TokenError`, an empty member comes back as `bytes` instead of an array, and a
header declaring 2^40 floats allocates them before finding the data missing. `read_npz` parses each member's
header itself (numpy's own header grammar, `read_array_header_*`), proves that the declared shape and dtype
account for exactly the member's bytes (in Python integers: no wrap), and only then reads the data into an array
of that size, in this machine's byte order (the same values). Anything else is one `NpzUnreadable` line naming
the file and the member.
"""

from __future__ import annotations

import math
import tokenize
import zipfile
import zlib
from collections.abc import Container
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from ..errors import AdrenoError

# What numpy's header parsing and zipfile raise on malformed input (numpy evaluates the header with
# `ast.literal_eval`, whose failures are these too).
_MALFORMED = (ValueError, SyntaxError, tokenize.TokenError, RecursionError, OverflowError, EOFError, OSError,
              KeyError, NotImplementedError, zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error)
_HEADER_MAX = 10_000  # numpy's own default ceiling on a header's bytes
_CHUNK = 1 << 24
NPY_MAGIC = npy_format.MAGIC_PREFIX


class NpzUnreadable(AdrenoError):
    """An .npz file, or one of its members, is not what numpy writes; nothing of it was used."""


def read_npz(path: Path | str, names: Container[str] | None = None) -> dict[str, np.ndarray]:
    """The arrays of the .npz file at `path`, keyed by member name without `.npy`, in the file's order; with `names`,
    only those members are read (an artifact's shape set reads its own params of the shared file)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return {info.filename.removesuffix(".npy"): _read_member(archive, info, path)
                    for info in archive.infolist() if names is None or info.filename.removesuffix(".npy") in names}
    except _MALFORMED as err:
        raise NpzUnreadable(f"{path}: cannot read it as .npz ({type(err).__name__}: "
                            f"{str(err).splitlines()[0][:100] if str(err) else 'malformed'})") from None


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path) -> np.ndarray:
    where = f"{path}: member {info.filename!r}"
    if not info.filename.endswith(".npy") or info.is_dir():
        raise NpzUnreadable(f"{where} is not an .npy array (numpy.savez writes only NAME.npy members)")
    with archive.open(info) as member:
        try:
            version = npy_format.read_magic(member)
            header = (npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0)
            shape, fortran_order, dtype = header(member, max_header_size=_HEADER_MAX)
        except _MALFORMED as err:
            raise NpzUnreadable(f"{where} has no valid .npy header ({type(err).__name__}: "
                                f"{str(err).splitlines()[0][:100] if str(err) else 'malformed'})") from None
        if dtype.hasobject or dtype.itemsize == 0:
            raise NpzUnreadable(f"{where} holds {dtype} values; only plain numbers are read")
        declared = math.prod(shape) * dtype.itemsize  # Python integers: a huge shape cannot wrap
        available = info.file_size - member.tell()
        if declared != available:
            raise NpzUnreadable(f"{where}: its header declares shape {shape} of {dtype} ({declared} bytes) but "
                                f"{available} bytes follow it")
        data = bytearray()  # grown as bytes arrive: a zip index can declare more than the member holds
        while len(data) < declared and (chunk := member.read(min(_CHUNK, declared - len(data)))):
            data += chunk
        if len(data) != declared:
            raise NpzUnreadable(f"{where} ends after {len(data)} of its {declared} bytes")
    array = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran_order else "C")
    return array.astype(dtype.newbyteorder("="), copy=False)  # TVM's runtime knows no big-endian dtype
