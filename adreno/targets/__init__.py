"""The device description: the Adreno GPUs and the other devices we know (`devices`), TVM's target for one
(`target`, the only module here that loads TVM), and the tensor layouts their memories use (`layout`). It imports
only `adreno.errors`, `adreno.options` and `adreno.opencl.device` (a device's identity); `tests/test_architecture.py`
checks it."""
