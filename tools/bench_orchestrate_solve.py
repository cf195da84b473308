"""The BLP's solve time per model, block by block, on placeholder costs (1 + 0.1 per primitive): how big the blocks'
programs are and whether they close, without measuring anything (`adreno orchestrate --report` measures).

    python tools/bench_orchestrate_solve.py [MODEL ...] [--max-size 4] [--whole] [--json OUT] [--smoke]

`--whole` also solves the whole graph in one program (10 s limit) for comparison.
"""

import argparse
import json
import time
from pathlib import Path


def solve_model(name: str, max_size: int, whole: bool) -> dict:
    from adreno.frontend import zoo
    from adreno.frontend.importer import to_relax
    from adreno.orchestrate.blp import Choice, solve
    from adreno.orchestrate.candidates import enumerate_groups, kernel_of
    from adreno.orchestrate.choose import choose
    from adreno.orchestrate.report import model_candidates

    found = model_candidates(to_relax(zoo.get_model(name, seed=0)), name, "adreno-740", max_size)
    graph, fused, candidates = found.graph, list(found.fused_names), found.blocks
    costs = {g: 1 + 0.1 * len(g) for bc in candidates for g in bc.groups}
    started = time.perf_counter()
    chosen = choose(candidates, costs)
    row = {"model": name, "primitives": len(graph.primitives), "fused_groups": len(fused), "blocks": len(candidates),
           "candidates": len(costs), "largest_block": max(len(bc.block.primitives) for bc in candidates),
           "solve_s": round(sum(c.choice.solve_s for c in chosen if isinstance(c.choice, Choice)), 3),
           "wall_s": round(time.perf_counter() - started, 3),
           "all_optimal": all(isinstance(c.choice, Choice) and c.choice.optimal for c in chosen)}
    if whole:
        groups = enumerate_groups(list(graph.primitives), max_size, required=fused)
        kernels = [kernel_of(g, graph.primitives, graph.outputs, 1 + 0.1 * len(g), str(i))
                   for i, g in enumerate(groups)]
        choice = solve(kernels, graph.outputs, graph.external, time_limit_s=10)
        row["whole"] = {"candidates": len(groups), "solve_s": round(choice.solve_s, 2), "optimal": choice.optimal,
                        "gap": round(choice.gap, 3)} if isinstance(choice, Choice) else choice.value
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", default=["tiny", "efficientnet_se"])
    parser.add_argument("--max-size", type=int, default=4)
    parser.add_argument("--whole", action="store_true")
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--smoke", action="store_true", help="CI's smoke run: tiny, blocks of at most 2")
    args = parser.parse_args()
    if args.smoke:
        args.models, args.max_size = ["tiny"], 2
    rows = []
    for name in args.models:
        rows.append(solve_model(name, args.max_size, args.whole))
        print(rows[-1], flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
