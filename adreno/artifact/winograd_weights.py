"""The Winograd weight transform U = G g G^T, done when an artifact is loaded (`adreno.artifact.weights`): the
artifact stores a Winograd conv's weights as the model's 3x3 weights, a quarter to a ninth of the transformed size,
and every loader (this one, the C++ `native/harness/weight_forms.cc`) transforms them in the same order of
operations. The Relax rewrite that makes Winograd convs is the compiler's (`adreno.compiler.winograd`); the
matrices (Lavin & Gray) are here, where both read them."""

from __future__ import annotations

import numpy as np

from ..targets.layout import LANES  # the channel lanes of a packed (NCHW4c) tensor's pixel

# (B^T, G, A^T) for F(m, 3)
_MATRICES = {
    2: (
        [[1, 0, -1, 0],
         [0, 1, 1, 0],
         [0, -1, 1, 0],
         [0, 1, 0, -1]],
        [[1, 0, 0],
         [1 / 2, 1 / 2, 1 / 2],
         [1 / 2, -1 / 2, 1 / 2],
         [0, 0, 1]],
        [[1, 1, 1, 0],
         [0, 1, -1, -1]],
    ),
    4: (
        [[4, 0, -5, 0, 1, 0],
         [0, -4, -4, 1, 1, 0],
         [0, 4, -4, -1, 1, 0],
         [0, -2, -1, 2, 1, 0],
         [0, 2, -1, -2, 1, 0],
         [0, 4, 0, -5, 0, 1]],
        [[1 / 4, 0, 0],
         [-1 / 6, -1 / 6, -1 / 6],
         [-1 / 6, 1 / 6, -1 / 6],
         [1 / 24, 1 / 12, 1 / 6],
         [1 / 24, -1 / 12, 1 / 6],
         [0, 0, 1]],
        [[1, 1, 1, 1, 1, 0],
         [0, 1, -1, 2, -2, 0],
         [0, 1, 1, 4, 4, 0],
         [0, 1, -1, 8, -8, 1]],
    ),
}


def matrices(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(B^T, G, A^T) as float64 arrays for F(m x m, 3 x 3)."""
    if m not in _MATRICES:
        raise ValueError(f"Winograd tile must be 2 or 4, not {m}")
    return tuple(np.array(x, dtype=np.float64) for x in _MATRICES[m])


def transform_weight(weight: np.ndarray, m: int, packed: bool = False) -> np.ndarray:
    """U = G g G^T for every (o, c): (O, C, 3, 3) -> (alpha, alpha, O, C), computed in float64, stored float32; with
    `packed`, in the packed stages' layout (alpha, alpha, ceil(O/4), 4*ceil(C/4), 4), output channel o at
    [..., o // 4, c, o % 4], padded channels zero, written there directly (a transform then a transposing copy took
    three passes over 4x the weights: ResNet-18's load spent 0.3 s in them).

    U[a, b, o, c] = G[a,0] t[o,c,0,b] + G[a,1] t[o,c,1,b] + G[a,2] t[o,c,2,b] with t[o,c,r,b] = g[o,c,r,0] G[b,0] +
    g[o,c,r,1] G[b,1] + g[o,c,r,2] G[b,2], each sum left to right: weights are transformed when an artifact is loaded
    (`adreno.artifact.weights`), and the C++ loader (`native/harness/weight_forms.cc`) does these operations in this
    order."""
    _, gm, _ = matrices(m)
    alpha = gm.shape[0]
    o, c = weight.shape[:2]
    # (r, s, O, C), contiguous: every term below is a whole (O, C) plane, read and written in place
    g = np.ascontiguousarray(weight.astype(np.float64).transpose(2, 3, 0, 1))
    t = np.empty((3, alpha) + g.shape[2:])
    term = np.empty(g.shape[2:])
    for r in range(3):
        for b in range(alpha):
            np.multiply(g[r, 0], gm[b, 0], out=t[r, b])
            t[r, b] += np.multiply(g[r, 1], gm[b, 1], out=term)
            t[r, b] += np.multiply(g[r, 2], gm[b, 2], out=term)
    if packed:
        u = np.zeros((alpha, alpha, -(-o // LANES), LANES * -(-c // LANES), LANES), dtype=np.float32)
        whole = o // LANES * LANES
    else:
        u = np.empty((alpha, alpha, o, c), dtype=np.float32)
    plane = np.empty(g.shape[2:])
    for a in range(alpha):
        for b in range(alpha):
            np.multiply(gm[a, 0], t[0, b], out=plane)
            plane += np.multiply(gm[a, 1], t[1, b], out=term)
            plane += np.multiply(gm[a, 2], t[2, b], out=term)
            if not packed:
                u[a, b] = plane  # rounded once to float32
                continue
            lanes = u[a, b].transpose(0, 2, 1)  # (O/4, 4, C): a view, so each value is written once, in place
            lanes[:o // LANES, :, :c] = plane[:whole].reshape(o // LANES, LANES, c)
            if o > whole:  # the last pixel's lanes past O stay zero
                lanes[o // LANES, :o - whole, :c] = plane[whole:]
    return u
