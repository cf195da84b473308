"""The module orchestration splits, by memory: the step of the compile's pipeline that makes the convs what they will
be in the artifact, taken before fission so that its results are primitives the candidates group.

- Buffer memory: every eligible conv rewritten into its three Winograd stages (`adreno.compiler.winograd.rewrite`, the
  mode and the tuned layout records of the context's knobs).
- Texture memory: the texture pipeline up to and with layout planning (`texture.planning.layout_passes`): packed
  convs (and Winograd stages on packed tensors), packs, unpacks and the elementwise work between them on NCHW4c
  tensors.

Either way the compile's `lower_relax` later runs the same step on the chosen partition and finds nothing more to do:
the rewrite makes the same choices for the convs left, and planning a planned module keeps it, binding names
included (which the emission maps kernels by).
"""

from __future__ import annotations

import tvm

from adreno.options import Memory, Winograd
from adreno.texture.planning import layout_passes
from adreno.compiler.winograd import rewrite


def laid_out(mod, ctx, memory: Memory, winograd: Winograd, weights=None):
    """`mod` as its convs will be in `memory` (`ctx`: the compile's `ScheduleContext`; `weights`: the compile's
    `adreno.artifact.weights.WinogradWeights`, which records the transformed weights)."""
    if memory is Memory.BUFFER:
        return rewrite(mod, winograd, ctx.knobs, weights)
    with ctx.target:
        return tvm.transform.Sequential(layout_passes(ctx, winograd, weights))(mod)
