"""Compile, tune and deploy neural networks on Qualcomm Adreno GPUs through OpenCL.

Importing a module of this package loads neither TVM nor onnx. The exceptions are the modules that are TVM or onnx
work through and through: `target` (TVM targets), `texture.planning`, `orchestrate/` and the zoo's model builders
(`frontend.zoo`). So `adreno --help` starts in milliseconds, and the run side (the offline runner, a farm agent, the
GPU bundle) runs on machines without TVM or onnx. An import of our own modules sits inside a function only where, at
module level, it would load TVM, onnx, onnxruntime, scipy, paramiko, torch, pyopencl or numpy into a module that
does not load it yet, or more of our modules into what `adreno --help` loads; each such import says which in a
`# inside:` comment. `tests/test_architecture.py` checks the rule, and it checks that those imports hide no cycle.

The Python API (`adreno.api`, docs/python.md): `adreno.compile(model, ...) -> adreno.Artifact`, `Artifact.run`,
`Artifact.check`, `adreno.load(dir)`, `adreno.tune(model, ...)`. They are attributes of this package loaded on first
use (`__getattr__` below), so `import adreno` and `adreno --help` stay as fast as without them."""

from __future__ import annotations

import sys
import types

from .native import plugin as _plugin

__version__ = "0.1.0"
__all__ = ["Artifact", "compile", "load", "tune"]

_API = frozenset(__all__)

# TVM's runtime gets OpenCL from our plugin in every process that imports adreno (see adreno.native.plugin).
PLUGIN = _plugin.load()


def __getattr__(name: str):
    """`adreno.compile`, `adreno.load`, `adreno.tune` and `adreno.Artifact`, imported from `adreno.api` on first
    use."""
    if name in _API:
        from . import api  # inside: numpy and the artifact reader load only when the API is used

        return getattr(api, name)
    raise AttributeError(f"module 'adreno' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])


class _Package(types.ModuleType):
    """This package's module type: `adreno.compile` and `adreno.tune` stay the API's functions although submodules
    of those names exist (`adreno/compile.py`, `adreno/tune/`). Importing a submodule binds it as an attribute of its
    package; here that binding is skipped for the API's names, so the function wins, and the submodule is reached as
    every import reaches it, through `sys.modules` (`from adreno.compile import compile_model`,
    `importlib.import_module("adreno.tune")`)."""

    def __setattr__(self, name: str, value) -> None:
        if name in _API and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
