"""Bundled example models, built in code as ONNX (opset 17) with seeded random weights; nothing is downloaded.

How the weights are drawn and the BatchNorm statistics calibrated, so that activations stay O(1) as in a trained
model: `builder`'s docstring.

`builder` holds the graph builder, `cnn` the convolutional topologies, `vision` the newer mobile vision blocks
(MobileViT attention, MobileNetV3's SE and HardSwish, ConvNeXt's LayerNorm and GELU); this module is the table.
"""
from __future__ import annotations

from pathlib import Path

import onnx

from adreno.errors import ModelError

from . import vision
from .builder import OPSET, ModelSpec
from .cnn import (CRNN_CLASSES, EFFICIENTNET_SETTINGS, MOBILENETV2_SETTINGS, basic_block, crnn, efficientnet,
                  mobilenetv2, resnet18, tiny)

__all__ = ["CRNN_CLASSES", "EFFICIENTNET_SETTINGS", "MOBILENETV2_SETTINGS", "MODELS", "OPSET", "ModelSpec",
           "get_model", "list_models", "save_model"]

MODELS: dict[str, ModelSpec] = {m.name: m for m in [
    ModelSpec("resnet18", "ResNet-18 (ImageNet topology, 1000 classes)", "input", (1, 3, 224, 224),
              "logits", (1, 1000), resnet18),
    ModelSpec("mobilenetv2", "MobileNetV2, width 1.0 (inverted residuals, depthwise convs, ReLU6)", "input",
              (1, 3, 224, 224), "logits", (1, 1000), mobilenetv2),
    ModelSpec("resnet18_block", "one ResNet basic block at 64x56x56 (conv-bn-relu-conv-bn-add-relu)", "input",
              (1, 64, 56, 56), "output", (1, 64, 56, 56), lambda g, x, output: basic_block(g, x, 64, 1, output)),
    ModelSpec("efficientnet_se", "EfficientNet-style: 4 MBConv blocks with squeeze-and-excitation, SiLU, ReLU6 head, "
              "100 classes", "input", (1, 3, 96, 96), "logits", (1, 100), efficientnet),
    ModelSpec("crnn", "CRNN text recogniser: 4 conv-bn-relu-maxpool stages to height 1, bidirectional LSTM (64), "
              "per-step linear + softmax over 37 characters", "input", (1, 1, 32, 100), "probs",
              (25, 1, CRNN_CLASSES), crnn),
    ModelSpec("mobilevit_xs", "MobileViT-XS-style at 64x64: MobileNetV2 blocks and 2 MobileViT blocks (unfold into "
              "patches, LayerNorm, 2-head attention, SiLU MLP, fold, concat, fuse conv), 100 classes", "input",
              (1, 3, 64, 64), "logits", (1, 100), vision.mobilevit),
    ModelSpec("mobilenetv3_small", "MobileNetV3-small-style at 64x64: 6 bottlenecks with SE (HardSigmoid gate), "
              "HardSwish and ReLU, 100 classes", "input", (1, 3, 64, 64), "logits", (1, 100),
              vision.mobilenetv3_small),
    ModelSpec("convnext", "ConvNeXt-style at 64x64: patchify stem, 4 blocks (depthwise 7x7, channels-last "
              "LayerNorm, GELU as Erf, layer scale, residual), 100 classes", "input", (1, 3, 64, 64), "logits",
              (1, 100), vision.convnext),
    ModelSpec("tiny", "small test model: conv, BN, maxpool, depthwise+ReLU6, 1x1 conv, residual, GAP, gemm, softmax",
              "input", (1, 3, 32, 32), "probs", (1, 10), tiny),
]}


def list_models() -> list[ModelSpec]:
    """All bundled models, in table order."""
    return list(MODELS.values())


def get_model(name: str, seed: int = 0) -> onnx.ModelProto:
    """Build the bundled model `name` with weights drawn from `seed`."""
    if name not in MODELS:
        raise ModelError(f"unknown model {name!r}; bundled models: {', '.join(MODELS)}")
    return MODELS[name].build(seed)


def save_model(name: str, path: str | Path, seed: int = 0) -> Path:
    """Build the bundled model `name` and write it to `path` as an .onnx file; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(get_model(name, seed), path)
    return path
