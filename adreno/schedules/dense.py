"""Dense / matmul with a single row (classifier heads such as MobileNetV2's 1280 -> 1000): TVM's own dlight GEMV
rule, which TVM 0.27's Adreno pipeline does not apply (it falls back to a generic reduction schedule: 1.75 ms
against 0.57 ms for GEMV on PoCL for 1280x1000).

Not tunable yet: no knobs, and `workload_key` is None so the tuner skips these functions.
"""

from __future__ import annotations

KNOBS: dict[str, list] = {}


def workload(func):
    """None: this family has no tunable workloads yet."""
    return None


def workload_key(func) -> str | None:
    """None: this family has no tunable workloads yet."""
    return None


def rule(target, config: dict | None = None):
    """dlight's GEMV rule on OpenCL targets (it returns None for functions that are not matrix-vector products)."""
    if target is None or target.kind.name != "opencl":
        return None
    from tvm.s_tir import dlight

    return dlight.gpu.GEMV()
