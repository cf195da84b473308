"""Packed layouts and OpenCL image geometry: numpy only, shared by the compiler, the artifact and the executor.

Layouts
  NCHW4c  activations: (N, ceil(C/4), H, W, 4), channel c at [:, c // 4, :, :, c % 4], padded lanes are zero.
  OIHW4o  conv weights: (ceil(O/4), I', KH, KW, 4), output channel o at [o // 4, ..., o % 4]; I' is the input
          channel count padded to a multiple of 4 (1 for depthwise). Transformed with numpy at compile time.

Scopes (TVM's `TextureFlatten` mapping of a 5-D NCHW4c-like tensor of shape (d0, d1, d2, d3, 4) to an
image2d_array whose pixel is the last axis, four channels RGBA). This table is the only place the mapping is
written; the host pixel array of every scope is (layers, height, width, 4), a reshape of the tensor:
  global.texture         width d3, height d2, layers d0*d1            (activations)
  global.texture-nhwc    width d2*d3, height d1, layers d0            (activations whose d0*d1 is too deep)
  global.texture-weight  width d1*d2*d3, height d0, layers 1          (weights and other constants)
A tensor that fits none of its scopes within a device's limits (`image2d_max_width/height`,
`image_array_max_layers`) stays a buffer, and the plan records why (`choose_image`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..options import Precision

LANES = 4  # the channels of one RGBA pixel: the last axis of a packed tensor

# scope -> ((d0, d1, d2, d3) -> (width, height, layers), the pixel coordinates in words)
_GEOMETRY = {
    "global.texture": (lambda d0, d1, d2, d3: (d3, d2, d0 * d1), "x=d3, y=d2, layer=d0*D1+d1"),
    "global.texture-nhwc": (lambda d0, d1, d2, d3: (d2 * d3, d1, d0), "x=d2*D3+d3, y=d1, layer=d0"),
    "global.texture-weight": (lambda d0, d1, d2, d3: (d1 * d2 * d3, d0, 1), "x=(d1*D2+d2)*D3+d3, y=d0, layer=0"),
}
TEXTURE_SCOPES = tuple(_GEOMETRY)
# The image2d width and height limit of common local check devices (PoCL, many desktop drivers; Adreno allows
# 16384): a tensor gets a scope within it when one fits, so an artifact for a phone also runs where it is checked.
PORTABLE_IMAGE2D_MAX = 8192
# The scopes tried, in order, for a constant ("param") and for an activation.
_PREFERENCE = {"param": ("global.texture-weight", "global.texture", "global.texture-nhwc"),
               "act": ("global.texture", "global.texture-nhwc")}


def image_dims(shape, scope: str) -> tuple[int, int, int]:
    """(width, height, layers) of a packed 5-D tensor (last axis 4) in `scope`."""
    d0, d1, d2, d3, lanes = (int(d) for d in shape)
    if lanes != LANES:
        raise ValueError(f"shape {list(shape)} is not packed: its last axis is not {LANES}")
    return _GEOMETRY[scope][0](d0, d1, d2, d3)


@dataclass(frozen=True)
class ImageSpec:
    """How a packed 5-D tensor (d0, d1, d2, d3, 4) lives in an OpenCL image2d_array of RGBA pixels.

    scope (TVM memory scope) fixes which tensor element sits in which pixel (see `mapping`); channel_type is the
    image's storage ("float32": CL_FLOAT, "float16": CL_HALF_FLOAT); kernels read it with read_imagef and
    compute in fp32 either way. The pixel array on the host is (layers, height, width, 4)."""

    scope: str
    width: int
    height: int
    layers: int
    channel_order: str = "RGBA"
    channel_type: str = "float32"

    @property
    def nbytes(self) -> int:
        return self.width * self.height * self.layers * LANES * np.dtype(self.channel_type).itemsize

    def mapping(self) -> str:
        return _GEOMETRY[self.scope][1]


def choose_image(shape, dtype: str, kind: str, device, storage_dtype: str = "float32") -> tuple[ImageSpec | None, str]:
    """The image a tensor gets on `device` (anything with the image limits of `adreno.targets.devices.AdrenoDevice`), or
    (None, reason) when it must stay a buffer. kind "param" prefers global.texture-weight; activations ("act")
    prefer global.texture then global.texture-nhwc. A scope whose image stays within PORTABLE_IMAGE2D_MAX comes
    before one that needs the device's larger limits."""
    if len(shape) != 5 or int(shape[-1]) != LANES:
        return None, f"shape {list(shape)} is not a packed 5-D tensor with 4 lanes"
    if dtype != "float32":
        return None, f"dtype {dtype} (texture path stores float32 tensors only)"
    limits = (device.image2d_max_width, device.image2d_max_height, device.image_array_max_layers)
    portable = (min(limits[0], PORTABLE_IMAGE2D_MAX), min(limits[1], PORTABLE_IMAGE2D_MAX), limits[2])
    scopes = _PREFERENCE["param" if kind == "param" else "act"]
    for bound in (portable, limits):
        for scope in scopes:
            dims = image_dims(shape, scope)
            if all(d <= limit for d, limit in zip(dims, bound)):
                return ImageSpec(scope, *dims, channel_type=storage_dtype), ""
    reasons = [f"{scope} needs {'x'.join(map(str, image_dims(shape, scope)))} (width x height x layers)"
               for scope in scopes]
    return None, (f"exceeds the image limits {limits[0]}x{limits[1]}x{limits[2]} of {device.name}: "
                  + "; ".join(reasons))


def tensor_image(shape, dtype: str, constant: bool, device, precision: Precision) -> tuple[ImageSpec | None, str]:
    """The image a tensor of a texture compile gets (what the launch plan and the tuner's tasks both use):
    constants prefer the weight scope, everything else the activation ones; `precision` fp16 stores half floats."""
    return choose_image(shape, dtype, "param" if constant else "act", device, precision.storage_dtype)


def to_image(array: np.ndarray, spec: ImageSpec) -> np.ndarray:
    """Host array of shape (layers, height, width, 4) holding a 5-D tensor as `spec` lays it out."""
    a = np.asarray(array)
    width, height, layers = image_dims(a.shape, spec.scope)
    return np.ascontiguousarray(a.reshape(layers, height, width, LANES), dtype=np.dtype(spec.channel_type))


def from_image(pixels: np.ndarray, shape, dtype: str = "float32") -> np.ndarray:
    """Inverse of `to_image` (the pixel array is (layers, height, width, 4) in every scope)."""
    return np.asarray(pixels).reshape([int(d) for d in shape]).astype(dtype, copy=False)


def channels4(c: int) -> int:
    """How many 4-channel pixels hold `c` channels."""
    return (int(c) + LANES - 1) // LANES


def pack_nchw4c(x: np.ndarray, pad_value: float = 0.0) -> np.ndarray:
    """(N, C, H, W) -> (N, ceil(C/4), H, W, 4), padded channels = pad_value."""
    n, c, h, w = x.shape
    c4 = channels4(c)
    padded = np.full((n, c4 * LANES, h, w), pad_value, dtype=x.dtype)
    padded[:, :c] = x
    return np.ascontiguousarray(padded.reshape(n, c4, LANES, h, w).transpose(0, 1, 3, 4, 2))


def unpack_nchw4c(x: np.ndarray, channels: int) -> np.ndarray:
    """(N, C4, H, W, 4) -> (N, channels, H, W): the inverse of `pack_nchw4c`."""
    n, c4, h, w, lanes = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, c4 * lanes, h, w)[:, :channels])


def pack_oihw4o(w: np.ndarray, depthwise: bool = False) -> np.ndarray:
    """(O, I, KH, KW) -> (ceil(O/4), I', KH, KW, 4) with I' = I padded to a multiple of 4 (I' = 1 for depthwise)."""
    o, i, kh, kw = w.shape
    o4 = channels4(o)
    ip = i if depthwise else channels4(i) * LANES
    padded = np.zeros((o4 * LANES, ip, kh, kw), dtype=w.dtype)
    padded[:o, :i] = w
    return np.ascontiguousarray(padded.reshape(o4, LANES, ip, kh, kw).transpose(0, 2, 3, 4, 1))
