"""What a loader needs of a shared library before it maps it: its machine, and whether the file holds every byte its
headers name.

The dynamic loader maps a library's segments as its program headers say, without comparing them with the file's
size: a truncated `lib.so` (a copy cut short, a partial upload) maps fine and the first access past the end is a
SIGBUS that kills the process with no message. Reading the headers first turns that into one line."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

_PT_LOAD = 1


@dataclass(frozen=True)
class ElfLayout:
    """An ELF64 little-endian file's machine (e_machine) and `problem`, a phrase saying why the loader would fail
    on it ("" when its headers and segments lie inside the file)."""

    machine: int | None
    problem: str = ""


def read_layout(path: Path) -> ElfLayout:
    data = path.read_bytes()
    if len(data) < 64 or data[:4] != b"\x7fELF":
        return ElfLayout(None, f"is not an ELF file ({len(data)} bytes)")
    machine = int.from_bytes(data[18:20], "little")
    if data[4] != 2 or data[5] != 1:
        return ElfLayout(machine, "is not a 64-bit little-endian ELF file")
    phoff, shoff = struct.unpack_from("<QQ", data, 32)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 54)
    needed = max(phoff + phnum * phentsize, shoff + shnum * shentsize if shnum else 0)
    if needed > len(data):
        return ElfLayout(machine, f"is truncated ({len(data)} bytes, its headers need {needed})")
    for i in range(phnum):
        kind, _, offset, _, _, filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if kind == _PT_LOAD and offset + filesz > len(data):
            return ElfLayout(machine, f"is truncated ({len(data)} bytes, its segments need {offset + filesz})")
    return ElfLayout(machine)
