"""Reading an ONNX graph's metadata as python values: the opset a model declares and a node's attributes.

Every frontend pass asks these two questions; one answer here keeps them reading a model the same way (the
default domain is spelled "" or "ai.onnx"; an attribute's value is what `onnx.helper` decodes: ints, floats,
bytes for strings, lists, tensors)."""

from __future__ import annotations


def opset(model, default: int = 1) -> int:
    """The version of the default (ai.onnx) domain `model` imports, or `default` when it names none."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default)


def attributes(node) -> dict:
    """`node`'s attributes by name, decoded to python values (an absent attribute is absent from the dict)."""
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}
