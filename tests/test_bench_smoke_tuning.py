"""The kernel, tuning, orchestration and farm benchmarks of tools/ in their `--smoke` form (tiny, one round; the farm
a LocalFarm on loopback, Oclgrind for the load counts): each still runs and its JSON still holds the fields docs/
quote its figures from (tests/bench_smoke.py says how). The whole-model tools are in tests/test_bench_smoke_models.py.
"""

from __future__ import annotations

import pytest
from tests.bench_smoke import check

# tool -> the fields its docs' tables are read from (docs/schedules.md, tuning.md, farm.md, orchestrate.md,
# reliability.md, docs/guide.md's benchmark sections)
FIELDS = {
    "bench_conv.py": ["layers.*.layer", "layers.*.ms.adreno", "layers.*.gflops.adreno", "geomean_gflops.adreno",
                      "geomean_ratios.adreno/tvm", "count_weighted_ms.adreno"],
    "bench_pool.py": ["layers.*.layer", "layers.*.ms.adreno", "layers.*.ms.tvm", "totals.*.adreno_ms",
                      "totals.*.tvm_ms", "totals.*.speedup"],
    "occupancy_table.py": [f"rows.*.devices.*.{what}" for what in ("family", "work_items", "groups_per_cu",
                                                                    "registers", "fills")] + ["rows.*.layer"],
    "global_loads.py": [f"*.{what}" for what in ("layer", "family", "loads_cooperative_0", "loads_cooperative_1",
                                                 "ratio", "outputs_match")],
    "image_reads.py": [f"*.{what}" for what in ("layer", "groups", "reads", "per_group")],
    "bench_layout.py": [f"rows.*.{what}" for what in ("task", "calls", "layouts", "layout", "best_ms", "direct_ms",
                                                      "winograd_ms", "auto_rule", "auto_default_ms")],
    "bench_search.py": ["tasks", "search.runs", "search.summary", "quality", "goals"],
    "model_quality.py": [f"tasks.*.{what}" for what in ("pearson", "spearman", "top1", "top5", "random_pearson")]
    + ["mean.pearson", "mean.spearman"],
    "bench_records.py": ["synthetic.loads", "tiny.loads", "tiny.commands.*.command", "tiny.commands.*.seconds",
                         "tiny.commands.*.peak_rss_mb"],
    "bench_orchestrate.py": [f"*.{what}" for what in ("model", "variant", "wall_ms", "kernel_ms", "compile_s",
                                                      "vs_default", "vs_memory", "prediction")],
    "bench_orchestrate_solve.py": [f"*.{what}" for what in ("model", "primitives", "blocks", "candidates",
                                                            "largest_block", "solve_s", "all_optimal")],
    "bench_farm.py": [f"rows.*.{what}" for what in ("runner", "ok", "wall_s", "measurements_per_minute",
                                                    "rpc_overhead_s")],
}


@pytest.mark.parametrize("tool", sorted(FIELDS))
def test_smoke(tool, tmp_path):
    check(tool, tmp_path, FIELDS[tool])
