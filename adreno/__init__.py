"""Compile, tune and deploy neural networks on Qualcomm Adreno GPUs through OpenCL."""
__version__ = "0.1.0"
