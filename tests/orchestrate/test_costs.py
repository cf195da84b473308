"""Candidates measured on PoCL through the Runner, checked, kept in the records; a second run measures nothing."""

import pytest

from adreno.targets import devices
from adreno.frontend import zoo
from adreno.compile import tuned_configs
from adreno.frontend.importer import to_relax
from adreno.opencl.device import DeviceIdentity, select_device
from adreno.orchestrate.candidates import enumerate_groups, kernel_of
from adreno.orchestrate.launch import CHAIN
from adreno.orchestrate import costs as costs_module
from adreno.orchestrate import launch as launch_module
from adreno.orchestrate.costs import CostTable
from adreno.orchestrate.fuseops import fuseops_groups
from adreno.orchestrate.graph import prepared, primitive_graph
from adreno.options import Memory, Winograd
from adreno.orchestrate.layouts import laid_out
from adreno.orchestrate.report import model_candidates, ops_label
from adreno.orchestrate.subgraph import subgraph
from adreno.schedules.context import ScheduleContext
from adreno.records import Database
from adreno.runners.local import LocalRunner


@pytest.fixture(scope="module")
def tiny():
    mod = prepared(to_relax(zoo.get_model("tiny", seed=0)))
    graph = primitive_graph(mod)
    fused = fuseops_groups(mod, graph, devices.get_device("adreno-740"))
    return graph, [g.primitives for g in fused]


def test_measured_once_then_read_from_the_records(tiny, tmp_path, monkeypatch):
    graph, fused = tiny
    groups = fused + [frozenset([graph.primitives[0].name]), frozenset([graph.primitives[1].name])]
    kernels = [kernel_of(g, graph.primitives, graph.outputs, 0.0, str(i)) for i, g in enumerate(groups)]
    device = DeviceIdentity.from_cl_device(select_device("pocl")).fingerprint
    lines = []
    runner = LocalRunner("pocl")
    try:
        first = CostTable(Database(tmp_path / "r.jsonl"), runner, device, "adreno-740", repeat=3,
                          progress=lines.append)
        costs = first.costs(graph, kernels)
        measured = [line for line in lines if line.startswith("measured ")]
        assert first.measured == len(groups) == len(measured) and measured[-1].startswith(f"measured {len(groups)}/")
        assert set(costs) == set(groups) and all(c is not None and c > 0 for c in costs.values()), costs
        launch = first.launch
        assert launch.per_launch_s >= 0 and launch.per_run_s >= 0 and launch.per_launch_s + launch.per_run_s > 0
        records = Database(tmp_path / "r.jsonl").records
        assert len(records) == len(groups) + 2 and all(r.device == device and r.ok for r in records)
        assert sorted(r.extra["kernels"] for r in records)[-1] == CHAIN  # the launch cost's chain stays unfused
        candidates = [r for r in records if "|launch|" not in r.workload]
        assert all(r.extra["kernels"] == 1 for r in candidates)  # FuseOps' groups and single primitives: one kernel
        for group, cost in costs.items():  # device time plus one launch
            assert cost > launch.per_launch_s
        seen = len(lines)
        again = CostTable(Database(tmp_path / "r.jsonl"), runner, device, "adreno-740", progress=lines.append)
        assert again.costs(graph, kernels) == costs and again.measured == 0
        assert not any(line.startswith("measur") for line in lines[seen:])
        # a compile's --records of the same file takes none of them as a schedule's knobs, nor its memory from them
        tuned = tuned_configs(str(tmp_path / "r.jsonl"), "fp32", "adreno-740")
        assert len(tuned) == 0 and tuned.skipped == 0 and not tuned.elsewhere
        # after the code that makes the kernels changed, no cost measured before stands for today's kernels
        for module in (costs_module, launch_module):
            monkeypatch.setattr(module, "code_fingerprint", lambda: "0" * 12)
        upgraded = CostTable(Database(tmp_path / "r.jsonl"), runner, device, "adreno-740", repeat=1)
        assert set(upgraded.costs(graph, kernels)) == set(groups) and upgraded.measured == len(groups)
        assert len(Database(tmp_path / "r.jsonl").records) == 2 * (len(groups) + 2)
    finally:
        runner.close()


def test_key_is_the_computation_and_its_shapes():
    """The same group in two places of efficientnet_se has one key; another shape gives another key."""
    graph = primitive_graph(prepared(to_relax(zoo.get_model("efficientnet_se", seed=0))))
    kernels = [kernel_of(g, graph.primitives, graph.outputs, 0.0, str(i))
               for i, g in enumerate(enumerate_groups(list(graph.primitives), 2))]
    keys = {}
    for k in kernels:
        keys.setdefault(subgraph(graph, k).key, []).append(k)
    assert len(keys) < len(kernels)
    shared = next(ks for ks in keys.values() if len(ks) > 1)
    assert len({ks.primitives for ks in shared}) == len(shared)  # different primitives, one computation
    assert len({key.split("|")[1] for key in keys}) > 1


def test_texture_keys_hold_the_weights_shapes_not_their_values():
    """In texture memory the measured module keeps the weights as constants (the plan makes them param images), and
    its key is that of the module with the weights as parameters: resnet18_block's two 3x3 convs, equal shapes and
    other weights, share one key, as they do in buffer memory."""
    ctx = ScheduleContext.for_device(devices.get_device("adreno-740"))
    mod = laid_out(to_relax(zoo.get_model("resnet18_block", seed=0)), ctx, Memory.TEXTURE, Winograd.OFF)
    found = model_candidates(mod, "resnet18_block", "adreno-740", 1, None, Memory.TEXTURE)
    convs = [k for k in found.kernels if ops_label(found.graph, k.primitives) == "conv2d_nchw4c"]
    assert len(convs) == 2, [ops_label(found.graph, k.primitives) for k in found.kernels]
    subs = [subgraph(found.graph, k, Memory.TEXTURE) for k in convs]
    assert subs[0].key == subs[1].key
    for sub in subs:  # the weights: constants of the measured module, parameters of the keyed one
        assert len(sub.keyed["main"].params) == len(sub.mod["main"].params) + 1
        assert "16x64x3x3x4" in sub.key.split("|")[1]
