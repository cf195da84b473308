"""Compile, tune and deploy neural networks on Qualcomm Adreno GPUs through OpenCL.

Importing a module of this package loads neither TVM nor onnx. The exceptions are the modules that are TVM or onnx
work through and through: `target` (TVM targets), `texture.planning`, `orchestrate/` and the zoo's model builders
(`frontend.zoo`). So `adreno --help` starts in milliseconds, and the run side (the offline runner, a farm agent, the
GPU bundle) runs on machines without TVM or onnx. An import of our own modules sits inside a function only where, at
module level, it would load TVM, onnx, onnxruntime, scipy, paramiko, torch, pyopencl or numpy into a module that
does not load it yet, or more of our modules into what `adreno --help` loads; each such import says which in a
`# inside:` comment. `tests/test_architecture.py` checks the rule, and it checks that those imports hide no cycle."""
__version__ = "0.1.0"

from .native import plugin as _plugin

# TVM's runtime gets OpenCL from our plugin in every process that imports adreno (see adreno.native.plugin).
PLUGIN = _plugin.load()
