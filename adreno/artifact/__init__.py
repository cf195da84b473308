"""The artifact, the contract between compile and run: its directory format, manifest and writer (`format`), the
checks `Artifact.load` makes (`check`), the kernels' contract line (`kernel_contract`), the weight file and its
stored forms (`weights`, `npz_files`, `winograd_weights`: the Winograd weight transform done at load), several
shape sets in one artifact (`shape_sets`) and the run-time index checks it carries (`index_checks`).

Everything that runs an artifact reads it through here, on machines without TVM or onnx: the package imports only
`adreno.errors`, `adreno.options`, `adreno.support` and `adreno.targets`, never the compiler, the CLI, the tuner or
the run side (`tests/test_architecture.py` checks it)."""
