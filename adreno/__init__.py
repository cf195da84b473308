"""Compile, tune and deploy neural networks on Qualcomm Adreno GPUs through OpenCL."""
__version__ = "0.1.0"

from .native import plugin as _plugin

# TVM's runtime gets OpenCL from our plugin in every process that imports adreno (see adreno.native.plugin).
PLUGIN = _plugin.load()
