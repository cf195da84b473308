"""Kernel orchestration in the manner of Korch: fission into primitives, candidate kernels, an exact BLP choice."""
