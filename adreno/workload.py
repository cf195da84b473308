"""What a tuning record is about: a convolution workload and its text key (format and parse live here only).

A conv family stores its tuned knobs under `ConvWorkload.key(op)`, e.g.
`conv2d_direct|n1c64h56w56|o64k3x3|s1x1|p1x1x1x1|d1x1|g1|float32`: the family's op name, then the shapes,
strides, padding (top, left, bottom, right), dilation, groups and dtype. `ConvWorkload.parse` reads one back.
Pool and Winograd-stage families have keys of their own (`adreno.schedules.pool`, `conv2d_winograd.stage_key`);
every key starts with its op name and a `|` (`key_op`). The op also says the memory the kernel runs in: ops of
texture-memory (packed NCHW4c) kernels end in `PACKED` (`memory_op` writes it, `key_memory` reads it back).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .options import Memory

_CONV_KEY = re.compile(r"(?P<op>[a-z0-9_]+)\|n(\d+)c(\d+)h(\d+)w(\d+)\|o(\d+)k(\d+)x(\d+)\|s(\d+)x(\d+)"
                       r"\|p(\d+)x(\d+)x(\d+)x(\d+)\|d(\d+)x(\d+)\|g(\d+)\|(?P<dtype>[a-z0-9]+)")


PACKED = "_nchw4c"  # the op suffix of a texture-memory kernel's key


def key_op(key: str) -> str:
    """The op (family) name a workload key starts with."""
    return key.split("|", 1)[0]


def memory_op(op: str, memory: Memory) -> str:
    """The op name of `op`'s kernel in `memory`: a texture kernel's ends in `PACKED`."""
    return op + PACKED if memory is Memory.TEXTURE else op


def key_memory(key: str) -> Memory:
    """The memory a workload key's kernel was tuned in: texture (packed kernels on images) or buffer."""
    return Memory.TEXTURE if key_op(key).endswith(PACKED) else Memory.BUFFER


@dataclass(frozen=True)
class ConvWorkload:
    """One 2-D convolution as it arrives in a fused primitive function (NCHW data, OIHW weight)."""

    n: int
    c: int
    h: int
    w: int
    o: int
    kh: int
    kw: int
    oh: int
    ow: int
    stride: tuple[int, int]
    dilation: tuple[int, int]
    padding: tuple[int, int, int, int]  # top, left, bottom, right
    groups: int
    dtype: str
    epilogue: tuple[str, ...] = field(default=(), compare=False)

    @property
    def cin_per_group(self) -> int:
        return self.c // self.groups

    @property
    def is_depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.c and self.cin_per_group == 1

    @property
    def flops(self) -> int:
        return 2 * self.n * self.o * self.oh * self.ow * self.cin_per_group * self.kh * self.kw

    def key(self, op: str) -> str:
        """A stable text key: op, shapes, dtype, strides, padding, dilation, groups (no epilogue: it does not change
        which knobs are good)."""
        return (f"{op}|n{self.n}c{self.c}h{self.h}w{self.w}|o{self.o}k{self.kh}x{self.kw}|"
                f"s{self.stride[0]}x{self.stride[1]}|p{'x'.join(map(str, self.padding))}|"
                f"d{self.dilation[0]}x{self.dilation[1]}|g{self.groups}|{self.dtype}")

    @classmethod
    def parse(cls, key: str) -> tuple[str, ConvWorkload] | None:
        """(op, workload) of a conv key written by `key`; None for any other text."""
        found = _CONV_KEY.fullmatch(key)
        if found is None:
            return None
        n, c, h, w, o, kh, kw, sh, sw, top, left, bottom, right, dh, dw, groups = map(int, found.groups()[1:17])
        oh = (h + top + bottom - dh * (kh - 1) - 1) // sh + 1
        ow = (w + left + right - dw * (kw - 1) - 1) // sw + 1
        return found["op"], cls(n, c, h, w, o, kh, kw, oh, ow, (sh, sw), (dh, dw), (top, left, bottom, right), groups,
                                found["dtype"])
