"""TE computes of the packed (NCHW4c) region: pack, unpack, pad, conv and max pool on 5-D tensors whose last axis is
a pixel's 4 channels. The layout planner emits them (`bb.emit_te`)."""

from __future__ import annotations

from ..targets.layout import LANES, channels4


def te_pack(x, channels: int):
    from tvm import te, tirx

    n, _, h, w = x.shape
    c4 = channels4(channels)
    zero = tirx.const(0, x.dtype)

    def body(i, j, y, z, k):
        c = j * LANES + k
        if channels % LANES == 0:
            return x[i, c, y, z]
        return tirx.if_then_else(c < channels, x[i, tirx.min(c, channels - 1), y, z], zero)

    return te.compute((n, c4, h, w, LANES), body, name="pack_nchw4c")


def te_unpack(x, channels: int):
    from tvm import te

    n, _, h, w, _ = x.shape
    return te.compute((n, channels, h, w), lambda i, c, y, z: x[i, c // LANES, y, z, c % LANES],
                      name="unpack_nchw4c")


def te_pad(data, pad, value, name):
    from tvm import te, tirx

    top, left, bottom, right = pad
    n, c4, h, w, lanes = data.shape
    if not any(pad):
        return data
    hp, wp = h + top + bottom, w + left + right

    def body(i, j, y, z, k):
        inside = tirx.all(y >= top, y < h + top, z >= left, z < w + left)
        return tirx.if_then_else(inside, data[i, j, y - top, z - left, k], tirx.const(value, data.dtype))

    return te.compute((n, c4, hp, wp, lanes), body, name=name)


def te_conv4c(data, weight, strides, padding, dilation, depthwise: bool):
    """NCHW4c x OIHW4o -> NCHW4c (groups 1), or depthwise with weight (C4, 1, KH, KW, 4)."""
    from tvm import te

    n, c4, h, w, _ = (int(d) for d in data.shape)
    o4, cin, kh, kw, _ = (int(d) for d in weight.shape)
    (sh, sw), (dh, dw) = strides, dilation
    top, left, bottom, right = padding
    oh = (h + top + bottom - (kh - 1) * dh - 1) // sh + 1
    ow = (w + left + right - (kw - 1) * dw - 1) // sw + 1
    padded = te_pad(data, padding, 0.0, "pad_nchw4c")
    ry = te.reduce_axis((0, kh), "ry")
    rx = te.reduce_axis((0, kw), "rx")
    if depthwise:
        return te.compute(
            (n, o4, oh, ow, LANES),
            lambda i, c, y, x, k: te.sum(padded[i, c, y * sh + ry * dh, x * sw + rx * dw, k] * weight[c, 0, ry, rx, k],
                                         axis=[ry, rx]), name="dwconv2d_NCHW4c")
    rc = te.reduce_axis((0, cin), "rc")
    return te.compute(
        (n, o4, oh, ow, LANES),
        lambda i, o, y, x, k: te.sum(padded[i, rc // LANES, y * sh + ry * dh, x * sw + rx * dw, rc % LANES]
                                     * weight[o, rc, ry, rx, k], axis=[rc, ry, rx]), name="conv2d_NCHW4c")


def te_maxpool4c(data, pool, strides, padding, dilation):
    from tvm import te

    n, c4, h, w, _ = (int(d) for d in data.shape)
    (ph, pw), (sh, sw), (dh, dw) = pool, strides, dilation
    top, left, bottom, right = padding
    oh = (h + top + bottom - (ph - 1) * dh - 1) // sh + 1
    ow = (w + left + right - (pw - 1) * dw - 1) // sw + 1
    padded = te_pad(data, padding, -3.4028234663852886e38, "pad_nchw4c")
    ry = te.reduce_axis((0, ph), "ry")
    rx = te.reduce_axis((0, pw), "rx")
    return te.compute((n, c4, oh, ow, LANES),
                      lambda i, c, y, x, k: te.max(padded[i, c, y * sh + ry * dh, x * sw + rx * dw, k], axis=[ry, rx]),
                      name="max_pool2d_NCHW4c")
