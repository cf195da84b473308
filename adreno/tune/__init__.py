"""Tuning: a model's tunable kernels as tasks, searched on a runner, every measurement written to the records.

`extract.py` finds the tasks, `task.py` / `layout_task.py` give each its space, inputs, reference and build,
`tuner.py` runs the rounds (strategies/ propose, `adreno.costmodel` scores, `builder.py` builds, a runner measures),
`session.py` composes them for the CLI and the tools, `batch.py` exports and imports offline batches.

It may import the schedules, the cost model, the runners and the records. It reaches compile through one entry
point, `adreno.compile.lower_relax` (tasks and candidates are lowered exactly as a compile lowers them); compile
never imports tune (`tests/test_architecture.py` checks both). Kernel orchestration (`adreno.orchestrate`) measures
its candidates through the same runners and writes them with the same `adreno.runners.kernel_artifact`, so it needs
nothing from here, and does not import it (checked too).
"""
