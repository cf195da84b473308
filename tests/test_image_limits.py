"""Texture artifacts for a phone that still run where they are checked: images within 8192 (PoCL's limit) when a
scope or a Winograd tile allows it, and an error naming every way out when an image does not fit the device."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from adreno import layout, winograd
from adreno.schedules._conv import ConvWorkload
from adreno.target import get_device
from tests.schedules.test_patterns import graph_model
from tests.test_cli import adreno


def test_a_scope_within_8192_comes_first():
    device = get_device("adreno-740")  # 16384-wide images
    weight, _ = layout.choose_image([4, 1024, 3, 3, 4], "float32", "param", device)  # texture-weight: 9216 wide
    assert weight.scope != "global.texture-weight" and max(weight.width, weight.height) <= 8192
    wide, _ = layout.choose_image([1, 4, 16, 9000, 4], "float32", "act", device)  # no scope within 8192
    assert (wide.scope, wide.width) == ("global.texture", 9000)


def test_texture_winograd_keeps_its_tile_images_within_8192():
    def conv(hw: int) -> ConvWorkload:
        return ConvWorkload(1, 64, hw, hw, 64, 3, 3, hw, hw, (1, 1), (1, 1), (1, 1, 1, 1), 1, "float32")

    assert winograd.choose_tile(conv(224), "auto", None, "texture") == 4  # 56x56 = 3136 tiles
    assert winograd.portable_tile(conv(224), 2) == 4  # F(2x2): 112x112 = 12544 tiles; F(4x4): 3136
    assert winograd.choose_tile(conv(448), "auto", None, "texture") == 0  # F(4x4): 12544 tiles: direct
    assert winograd.choose_tile(conv(448), "auto", None, "buffer") == 4  # buffers have no such limit


def test_an_image_beyond_the_device_names_every_way_out(tmp_path):
    """Forced F(2x2) on a 184x184 map: 8464 tiles, a legal image on adreno-740, not on PoCL."""
    w = np.random.default_rng(0).standard_normal((64, 64, 3, 3)) * 0.05
    model = graph_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], [1, 64, 184, 184],
                        [1, 64, 184, 184], {"w": w})
    onnx.save(model, tmp_path / "conv.onnx")
    adreno("compile", tmp_path / "conv.onnx", "--winograd", "f2", "-q", "-o", tmp_path / "f2")
    error = adreno("run", tmp_path / "f2", "--repeat", "1", "-q", check_rc=2).stderr.strip()
    assert len(error.splitlines()) == 1 and "8464x16x16" in error
    assert all(way in error for way in ("--winograd off", "--memory buffer", "--image-max 8192")), error
    adreno("compile", tmp_path / "conv.onnx", "--winograd", "f2", "--image-max", "8192", "-q", "-o", tmp_path / "m")
    checked = adreno("run", tmp_path / "m", "--check", "--repeat", "1", "--reference", tmp_path / "conv.onnx")
    assert ": OK" in checked.stdout
