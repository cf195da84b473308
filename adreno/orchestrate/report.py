"""`adreno orchestrate MODEL --report`: one model orchestrated block by block on measured costs, next to FuseOps.

`orchestrate_module` runs the whole chain (`orchestrate_model` imports the model and rewrites its Winograd convs
first, as the compile does: `imported`): `graph.prepared_graph` (fission, constant folding, numbering), FuseOps'
partition of the unsplit model through the compile's own pipeline (`fuseops.py`: today's compile, each operator
fission split one group), blocks and their candidates (`choose.py`), the costs the records
lack measured on the device (`costs.CostTable`), and the BLP of every block. The report is plain data (what `--json`
writes); `report_text` is its table. A cost is a candidate's device time in its fastest cold repeat plus its
launches (`launch.py`), in seconds; the chosen and FuseOps' totals are sums of them, and a run's predicted wall time
adds the device's per-run cost (`launch.per_run_s`). A kernel entry's `kernels` is how many kernels the normal
lowering made of its group (more than one where FuseOps would not fuse it). The `Orchestration` also keeps what a
compile needs to emit the choice (`partition.py`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from adreno.targets.devices import get_device
from adreno.errors import AdrenoError
from adreno.frontend.importer import load_model, to_relax
from adreno.options import Host, Memory, Winograd
from adreno.orchestrate.blp import Choice
from adreno.orchestrate.candidates import TooManyCandidates, kernel_of
from adreno.orchestrate.choose import block_candidates, choose
from adreno.orchestrate.fuseops import FuseOpsMismatch, fuseops_groups
from adreno.orchestrate.graph import op_name, prepared_graph
from adreno.orchestrate.layouts import laid_out
from adreno.schedules.context import ScheduleContext


@dataclass(frozen=True)
class Orchestration:
    """One module orchestrated: the prepared (fissioned, numbered) module and its primitive graph, every block's
    choice (`choose.BlockChoice`), the costs, and the report (plain data)."""

    mod: object
    graph: object
    chosen: list
    costs: dict
    report: dict


def orchestrate_model(model, target_name: str, costs_of, max_size: int = 4, time_limit_s: float = 10.0,
                      progress=None, winograd: Winograd = Winograd.AUTO, config=None) -> dict:
    """The report of `model` (a zoo name, .onnx path or ModelProto) for `target_name` in the memory of `costs_of`
    (a `costs.CostTable`: its `costs(graph, kernels)`, `measured` and `memory`); `winograd`, `config`: see
    `imported`."""
    mod, name = imported(model, target_name, costs_of.memory, winograd, config)
    return orchestrate_module(mod, name, target_name, costs_of, max_size, time_limit_s, progress).report


def imported(model, target_name: str, memory: Memory = Memory.BUFFER, winograd: Winograd = Winograd.AUTO,
             config=None):
    """(`model`'s Relax module, its name) as `adreno compile --orchestrate` hands it to the orchestration: imported,
    then laid out for `memory` (`layouts.laid_out`: Winograd stages by the mode `winograd` and the tuned layout
    records of `config`; in texture memory the packed layouts), so that what the compile makes of the convs are
    primitives the candidates group."""
    onnx_model, name = load_model(model)
    mod = to_relax(onnx_model)
    if mod is None:
        raise AdrenoError(f"{name}: every output is empty, there are no kernels to choose")
    ctx = ScheduleContext.for_device(get_device(target_name), host=Host.NATIVE, knobs=config)
    return laid_out(mod, ctx, memory, winograd), name


@dataclass(frozen=True)
class ModelCandidates:
    """A module's candidates: the prepared module, its primitive graph, FuseOps' groups by name, the blocks with
    their candidates (`choose.BlockCandidates`), and every candidate as a `blp.Kernel` (cost 0) to be costed."""

    mod: object
    graph: object
    fused_names: dict
    blocks: list
    kernels: list


def model_candidates(mod, name: str, target_name: str, max_size: int = 4, progress=None,
                     memory: Memory = Memory.BUFFER) -> ModelCandidates:
    """Fission, FuseOps' partition in `memory`, the blocks and their candidates of `mod` (the model's Relax module,
    `imported`); a partition that does not map or a block with too many candidates is an `AdrenoError` naming
    `name`."""
    (progress or (lambda line: None))("fission and FuseOps' partition")
    mod, graph = prepared_graph(mod)
    fused = fuseops_groups(mod, graph, get_device(target_name), memory, graph.composites)
    if isinstance(fused, FuseOpsMismatch):
        raise AdrenoError(f"{name}: FuseOps' partition does not map onto the primitives ({fused.reason})")
    fused_names = {g.primitives: g.name for g in fused}
    candidates = block_candidates(graph, list(fused_names), max_size)
    too_many = next((bc for bc in candidates if isinstance(bc.groups, TooManyCandidates)), None)
    if too_many is not None:
        raise AdrenoError(f"{name}: a block has more than {too_many.groups.limit} candidates; lower --max-size")
    kernels = [kernel_of(g, list(bc.block.primitives), bc.block.outputs, 0.0, "")
               for bc in candidates for g in bc.groups]
    return ModelCandidates(mod, graph, fused_names, candidates, kernels)


def orchestrate_module(mod, name: str, target_name: str, costs_of, max_size: int = 4, time_limit_s: float = 10.0,
                       progress=None) -> Orchestration:
    """`mod` (the model's imported Relax module) orchestrated for `target_name` on the costs of `costs_of`."""
    say = progress or (lambda line: None)
    started = time.perf_counter()
    found = model_candidates(mod, name, target_name, max_size, say, costs_of.memory)
    mod, graph, fused_names, candidates, kernels = (found.mod, found.graph, found.fused_names, found.blocks,
                                                    found.kernels)
    say(f"costs of {len(kernels)} candidates")
    costs = costs_of.costs(graph, kernels)
    chosen = choose(candidates, costs, time_limit_s)

    def kernel(group, fused_name=None):
        return {"name": fused_name or ops_label(graph, group), "ops": ops_label(graph, group),
                "primitives": sorted(group), "cost_s": costs.get(group), "kernels": costs_of.launches.get(group)}

    blocks = []
    for i, bc in enumerate(chosen):
        choice = bc.choice
        entry = {"block": i, "primitives": len(bc.candidates.block.primitives),
                 "candidates": len(bc.candidates.groups), "measured": bc.measured,
                 "fuseops": [kernel(g, fused_names.get(g)) for g in bc.candidates.fuseops],
                 "fuseops_cost_s": bc.fuseops_cost}
        if isinstance(choice, Choice):
            entry.update(chosen=[kernel(k.primitives, fused_names.get(k.primitives)) for k in choice.kernels],
                         chosen_cost_s=choice.cost, optimal=choice.optimal, gap=choice.gap, solve_s=choice.solve_s)
        else:
            entry.update(chosen=None, chosen_cost_s=None, refusal=choice.value, solve_s=0.0)
        blocks.append(entry)
    complete = all(b["chosen"] is not None for b in blocks)
    fuseops_total = [b["fuseops_cost_s"] for b in blocks]
    report = {"model": name, "target": target_name, "device": costs_of.device, "memory": costs_of.memory,
              "max_size": max_size, "primitives": len(graph.primitives), "blocks": blocks,
              "candidates": sum(b["candidates"] for b in blocks),
              "measured_now": costs_of.measured, "solve_s": sum(b["solve_s"] for b in blocks),
              "fuseops_cost_s": sum(fuseops_total) if None not in fuseops_total else None,
              "chosen_cost_s": sum(b["chosen_cost_s"] for b in blocks) if complete else None,
              "complete": complete, "seconds": time.perf_counter() - started,
              "launch": {"per_launch_s": costs_of.launch.per_launch_s, "per_run_s": costs_of.launch.per_run_s}}
    return Orchestration(mod, graph, chosen, costs, report)


def ops_label(graph, group) -> str:
    """The operators of a group in graph order, e.g. `conv2d+add+relu`."""
    return "+".join(op_name(graph.calls[p.name]) for p in graph.primitives if p.name in group)


def report_text(report: dict) -> str:
    """The report as a table: per block FuseOps' kernels next to the chosen ones, then the totals."""
    lines = []
    for b in report["blocks"]:
        solved = ("optimal" if b.get("optimal") else f"gap {b.get('gap', 0):.2f}") if b["chosen"] else b["refusal"]
        lines.append(f"block {b['block']}: {b['primitives']} primitives, {b['candidates']} candidates "
                     f"({b['measured']} with a cost), FuseOps {_us(b['fuseops_cost_s'])} -> chosen "
                     f"{_us(b['chosen_cost_s'])} ({solved}, {b['solve_s']:.2f} s)")
        lines.append("  FuseOps: " + " | ".join(map(_kernel_text, b["fuseops"])))
        if b["chosen"]:
            lines.append("  chosen:  " + " | ".join(map(_kernel_text, b["chosen"])))
    fuseops, chosen = report["fuseops_cost_s"], report["chosen_cost_s"]
    ratio = f" ({fuseops / chosen:.2f}x)" if fuseops and chosen else ""
    lines.append(f"{report['model']} for {report['target']} measured on {report['device'].split('|')[0]} "
                 f"({report['memory']} memory): {report['primitives']} primitives, {len(report['blocks'])} blocks, "
                 f"{report['candidates']} candidates ({report['measured_now']} measured now, the rest from the "
                 f"records), solve {report['solve_s']:.2f} s; "
                 f"FuseOps {_us(fuseops)} -> chosen {_us(chosen)}{ratio} (sums of kernel times and launches of "
                 f"{_us(report['launch']['per_launch_s'])} each)")
    return "\n".join(lines)


def _kernel_text(kernel: dict) -> str:
    """`name cost`, with the number of kernels where the lowering made more than one of the group."""
    launches = f" ({kernel['kernels']} kernels)" if (kernel["kernels"] or 1) > 1 else ""
    return f"{kernel['name']} {_us(kernel['cost_s'])}{launches}"


def _us(seconds) -> str:
    return "unmeasured" if seconds is None else f"{seconds * 1e6:.1f} us"
