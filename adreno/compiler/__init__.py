"""The compiler's own parts below `adreno.compile`'s pipeline: the lines it says (`progress`), the launch plan
(`plan`), the lowered module's kernels (`lowered`), the host library and its blob (`host_library`, `library_blob`),
the manifest's accounts of a plan (`manifest`), the build check (`build_check`), the Winograd rewrite (`winograd`),
and the passes on TVM's OpenCL output (constant folding in numpy, float literals, shared subexpressions, local and
private arrays, expression depth).

It may import the artifact it writes (`adreno.artifact`), the device description (`adreno.targets`), the kernel
families' helpers (`adreno.texture`, `adreno.opencl`), the records (`adreno.records`, `adreno.workload`) and the
leaves (`adreno.support`, `adreno.errors`, `adreno.options`); never the CLI, the tuner, the orchestrator or the run
side (`tests/test_architecture.py` checks it)."""
