"""Dense / matmul with a single row (classifier heads such as MobileNetV2's 1280 -> 1000): TVM's own dlight GEMV
rule, which TVM 0.27's Adreno pipeline does not apply (it falls back to a generic reduction schedule).

Not tunable yet: no knobs, and it matches no workload, so the tuner skips these functions.
"""

from __future__ import annotations

from .family import Family


class Dense(Family):
    """dlight's GEMV rule on OpenCL targets (it declines functions that are not matrix-vector products)."""

    def __init__(self):
        super().__init__("dense", {}, lambda func: None, lambda wl, target: {}, lambda wl, config, target: config,
                         "Dense")

    def rule(self, target, config: dict | None = None, refusals: list | None = None):
        if target is None or target.kind.name != "opencl":
            return None
        from tvm.s_tir import dlight

        return dlight.gpu.GEMV()


FAMILY = Dense()
