"""Kernel orchestration in the manner of Korch: fission into primitives, candidate kernels, an exact BLP choice.

It sits above tuning and beside it, never on it: a candidate's cost is measured through the one interface both
share, `adreno.runners` (`interface.Runner` measures, `kernel_artifact.write_kernel_artifact` writes what it
measures), and orchestration reaches compile through `adreno.compile.lower_relax` as tuning does. Nothing here
imports `adreno.tune` (`tests/test_architecture.py` checks it).
"""
