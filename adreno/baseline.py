"""The baselines every conv benchmark compares against: a hand-written one-output-per-work-item OpenCL kernel of a
`Layer` (BN folded to scale/shift, activation fused), checked before it is timed (numpy + pyopencl only), and the
timing of a PyTorch/CUDA function (cuDNN), for the machines that have torch."""

from __future__ import annotations

import numpy as np

from .conv_layers import TOL, Layer, folded_bn


NAIVE_SOURCE = r"""
__kernel void conv_naive(__global const float* restrict x, __global const float* restrict w,
                         __global const float* restrict scale, __global const float* restrict shift,
                         __global float* restrict y) {
  const int gid = get_global_id(0);
  if (gid >= N * CO * OH * OW) return;
  const int ox = gid % OW, oy = (gid / OW) % OH, co = (gid / (OW * OH)) % CO, n = gid / (OW * OH * CO);
  const int cig = CI / G, cog = CO / G, g = co / cog;
  float acc = 0.0f;
  for (int ci = 0; ci < cig; ++ci) {
    const int c = g * cig + ci;
    for (int ky = 0; ky < K; ++ky) {
      const int iy = oy * S - P + ky;
      if (iy < 0 || iy >= H) continue;
      for (int kx = 0; kx < K; ++kx) {
        const int ix = ox * S - P + kx;
        if (ix < 0 || ix >= W) continue;
        acc += x[((n * CI + c) * H + iy) * W + ix] * w[((co * cig + ci) * K + ky) * K + kx];
      }
    }
  }
  float v = acc * scale[co] + shift[co];
  ACT
  y[gid] = v;
}
"""


def run_naive(layer: Layer, p: dict[str, np.ndarray], compare, device, repeat: int,
              tol: float = TOL) -> tuple[float | None, float]:
    """(median device ms over `repeat` launches, error) of the naive kernel on the pyopencl `device`, with the
    layer's tensors `p` (`layer_params`, BN epilogues with symmetric padding); (None, error) when `compare(output)`
    (an error like `max_error` against a reference) exceeds `tol`, and then nothing is timed."""
    import pyopencl as cl

    ctx = cl.Context([device])
    queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    act = {"relu": "v = fmax(v, 0.0f);", "clip6": "v = fmin(fmax(v, 0.0f), 6.0f);", "none": ""}[layer.act]
    defines = dict(N=layer.n, CI=layer.c, H=layer.h, W=layer.w, CO=layer.o, K=layer.k, S=layer.stride,
                   P=layer.pad, G=layer.groups, OH=layer.oh, OW=layer.ow)
    source = "".join(f"#define {k} {v}\n" for k, v in defines.items()) + NAIVE_SOURCE.replace("ACT", act)
    kernel = cl.Program(ctx, source).build().conv_naive
    scale, shift = folded_bn(p)
    mf = cl.mem_flags
    bufs = [cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(a))
            for a in (p["x"], p["w"], scale, shift)]
    y = np.empty((layer.n, layer.o, layer.oh, layer.ow), np.float32)
    ybuf = cl.Buffer(ctx, mf.WRITE_ONLY, y.nbytes)
    total = y.size
    local = 64
    gsize = (total + local - 1) // local * local
    kernel.set_args(*bufs, ybuf)

    def launch():
        return cl.enqueue_nd_range_kernel(queue, kernel, (gsize,), (local,))

    launch().wait()
    cl.enqueue_copy(queue, y, ybuf)
    queue.finish()
    err = compare(y)
    if err > tol:
        return None, err
    times = []
    for _ in range(repeat):
        ev = launch()
        ev.wait()
        times.append((ev.profile.end - ev.profile.start) * 1e-6)
    return float(np.median(times)), err


def cuda_median_ms(fn, repeat: int) -> float:
    """The median of `repeat` timings of `fn()` on the current CUDA stream (CUDA events), in ms. Needs torch."""
    import torch

    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return float(np.median(times))
