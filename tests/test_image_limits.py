"""Texture artifacts for a phone that still run where they are checked: images within 8192 (PoCL's limit) when a
scope or a Winograd tile allows it, and an error naming every way out when an image does not fit the device."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import helper

from adreno.targets import layout
from adreno.compiler import winograd
from adreno.options import Memory, Winograd
from adreno.schedules._conv import ConvWorkload
from adreno.targets.devices import get_device
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

    assert winograd.choose_tile(conv(224), Winograd.AUTO, None, Memory.TEXTURE) == 4  # 56x56 = 3136 tiles
    assert winograd.portable_tile(conv(224), 2) == 4  # F(2x2): 112x112 = 12544 tiles; F(4x4): 3136
    assert winograd.choose_tile(conv(448), Winograd.AUTO, None, Memory.TEXTURE) == 0  # F(4x4): 12544 tiles: direct
    assert winograd.choose_tile(conv(448), Winograd.AUTO, None, Memory.BUFFER) == 4  # buffers have no such limit
    assert winograd.portable_tile(conv(448), 0) == 0  # a direct conv stays direct


def test_an_image_beyond_the_device_names_every_way_out():
    from adreno.opencl.executor import image_beyond

    assert image_beyond("i1", (8192, 16, 16), (8192, 8192, 2048), "PoCL") is None
    error = image_beyond("i1", (8464, 16, 16), (8192, 8192, 2048), "PoCL")
    assert "8464x16x16" in error and "8192x8192x2048" in error
    assert all(way in error for way in ("--winograd off", "--memory buffer", "--image-max 8192")), error


def test_image_max_keeps_winograd_images_within_it(tmp_path):
    """Forced F(2x2) on a 184x184 map: V and M are 8464 tiles wide, legal on adreno-740; with --image-max 8192 they
    stay buffers and the artifact runs (and checks) on a device limited to 8192."""
    w = np.random.default_rng(0).standard_normal((64, 64, 3, 3)) * 0.05
    model = graph_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], [1, 64, 184, 184],
                        [1, 64, 184, 184], {"w": w})
    onnx.save(model, tmp_path / "conv.onnx")
    widths = {}
    for name, extra in (("target", []), ("capped", ["--image-max", "8192"])):
        adreno("compile", tmp_path / "conv.onnx", "--winograd", "f2", "-q", "-o", tmp_path / name, *extra)
        images = json.loads((tmp_path / name / "plan.json").read_text())["images"]
        widths[name] = max(i["width"] for i in images.values())
    assert widths == {"target": 8464, "capped": 4096}
    checked = adreno("run", tmp_path / "capped", "--check", "--repeat", "1", "--reference", tmp_path / "conv.onnx")
    assert ": OK" in checked.stdout
