"""The native half of adreno, seen from Python: TVM's OpenCL runtime plugin (built from `native/` by
`make install`) and what runs an artifact's host library through it (`vm_executor`)."""
