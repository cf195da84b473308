"""The artifact a Runner measures for one candidate kernel: kind "kernel", its plan, sources and params, keyed by
what it measures (workload, config) for a target.

It lives beside the Runner interface because it is the measuring contract's other half: a tuning candidate
(`adreno.tune.builder`) and a kernel orchestration candidate (`adreno.orchestrate.costs`) are both written here and
both measured by any Runner, so orchestration reaches measurement through `adreno.runners` and never through
`adreno.tune` (`tests/test_architecture.py` checks that arrow)."""

from __future__ import annotations

from ..artifact.format import ArtifactWriter, Plan


def write_kernel_artifact(out_dir: str, plan: Plan, sources: dict, params: dict, workload: str, target: str,
                          config: dict) -> None:
    """Write a measured candidate's artifact (kind "kernel") to `out_dir`: `plan`'s kernels (`sources`: function
    name -> OpenCL source), the plan, `params`, and the manifest keyed by `workload`, `config` and `target`."""
    import tvm  # inside: the run side imports this package without TVM (the version stamps what lowered the plan)

    with ArtifactWriter(out_dir) as writer:
        writer.write_kernels(plan, sources)
        writer.write_json("plan.json", plan.to_json())
        writer.write_params(params)
        outputs = {t: {"tensor": t, "shape": plan.tensors[t].shape, "dtype": plan.tensors[t].dtype}
                   for t in plan.outputs}
        writer.commit({"kind": "kernel", "workload": workload, "config": config, "target": target,
                       "outputs": outputs,
                       "adreno_version": __import__("adreno").__version__, "tvm_version": tvm.__version__})
