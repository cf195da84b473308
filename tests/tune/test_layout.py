"""Adaptive weight layout (AL-Ansor): a Winograd-eligible conv's task searches direct vs Winograd F(2x2)/F(4x4)
joined with each layout's knobs; `adreno compile --records` applies the chosen layout.

The real run tunes a 64-channel 3x3 stride-1 conv on an 8x8 map on PoCL (all three layouts measured in the first
round), compiles with the records and checks the artifact against onnxruntime."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest

from adreno.compiler import winograd
from adreno.options import CompileOptions, Memory, Winograd
from adreno.records import LAYOUT_OPS, Database, Record, layout_key, layout_workload
from adreno.schedules import conv2d_winograd
from adreno.tune.extract import extract_tasks
from adreno.tune.layout_task import LAYOUT, LayoutTask, layout_quota
from adreno.tune.strategies import get_strategy
from adreno.workload import key_memory
from tests.conftest import single_op_model
from tests.schedules.sched_helpers import context

KEY = "conv2d_winograd|n1c64h8w8|o64k3x3|s1x1|p1x1x1x1|d1x1|g1|float32"
TARGET = context("adreno-740")


def _conv(path, stride=1):
    w = np.random.default_rng(0).standard_normal((64, 64, 3, 3)) * 0.05
    onnx.save(single_op_model("Conv", {"x": [1, 64, 8, 8]}, {"w": w}, pads=[1, 1, 1, 1], strides=[stride, stride]),
              path)
    return path


def _cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "adreno.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def test_irrelevant_knobs_make_no_distinct_candidates():
    space = LayoutTask(KEY, LAYOUT, "conv2d", "", 1).space()
    rng = np.random.default_rng(0)
    drawn = [space.random(rng) for _ in range(3000)]
    configs = {json.dumps(space.config(c), sort_keys=True) for c in drawn}
    assert len(configs) == len(set(drawn)), "two candidates with the same active knobs"
    assert {space.config(c)["tile"] for c in drawn} == {0, 2, 4}
    for c in drawn[:200]:
        config = space.config(c)
        direct = config["tile"] == 0
        assert ("tile_f" in config) == direct and ("tile_o" in config) != direct, config
        assert space.candidate(config) == c and space.is_valid(c)
        inactive = space.names.index("tile_o" if direct else "tile_f")
        moved = c[:inactive] + (1,) + c[inactive + 1:]  # an irrelevant knob changed: not a new candidate
        assert not space.is_valid(moved) and space.canonical(moved) == c
        assert all(space.config(n)["tile"] != config["tile"] or set(space.config(n)) == set(config)
                   for n in space.neighbours(c))
    direct_size = np.prod([len(v) for k, v in space.knobs.items() if space.conditions.get(k, ("", ()))[1] == (0,)])
    stage_size = np.prod([len(v) for k, v in space.knobs.items() if space.conditions.get(k, ("", ()))[1] == (2, 4)])
    # knobs both layouts read (buffers' `cooperative`) are not conditional
    shared = np.prod([len(v) for k, v in space.knobs.items() if k != "tile" and k not in space.conditions])
    assert "cooperative" not in space.conditions and shared == 2
    assert space.total == shared * (direct_size + 2 * stage_size)
    batch = get_strategy("genetic")(space, seed=0).propose(32, None, None, set())
    assert len({json.dumps(space.config(c), sort_keys=True) for c in batch}) == len(batch) == 32


def test_stride2_conv_gets_no_layout_choice(tmp_path):
    (task,) = extract_tasks(_conv(tmp_path / "s2.onnx", stride=2), layouts=True)
    assert task.family == "conv2d_direct" and "tile" not in task.space().knobs
    (task,) = extract_tasks(_conv(tmp_path / "s1.onnx"), layouts=True)
    assert isinstance(task, LayoutTask) and task.key == KEY and task.space().knobs["tile"] == [0, 2, 4]
    assert [c["tile"] for c in task.seed_configs()] == [4, 0, 2]  # the auto rule's choice first
    # packed stages or conv2d_texture
    (task,) = extract_tasks(tmp_path / "s1.onnx", CompileOptions(memory="texture"), layouts=True)
    assert isinstance(task, LayoutTask) and task.memory is Memory.TEXTURE
    assert task.key == KEY.replace(winograd.OP, LAYOUT_OPS[Memory.TEXTURE])
    seeds = task.seed_configs()
    assert [c["tile"] for c in seeds] == [4, 0, 2] and "tile_cb" in seeds[1] and "tile_f" not in seeds[1]
    (task,) = extract_tasks(tmp_path / "s1.onnx", CompileOptions(memory="texture", precision="fp16"), layouts=True)
    assert task.family == "conv2d_texture"  # no layout choice with half images (see extract_tasks)


def test_layout_records_route_to_the_kernels_schedules_read():
    key = winograd.workload_of((1, 64, 14, 14, 64, (1, 1, 1, 1), 14, 14)).key(winograd.OP)
    f4 = conv2d_winograd.kernel_configs({key: {"tile": 4, "threads_t": 32, "tile_o": 2, "tile_p": 1, "threads_o": 4,
                                        "threads_p": 8, "tile_k": 2}})
    assert f4["winograd_batch_gemm|6x6x64x16x64|float32"] == {"tile_o": 2, "tile_p": 1, "threads_o": 4,
                                                               "threads_p": 8, "tile_k": 2}
    assert f4["winograd_input_transform|6x6x64x16x6|float32"] == {"threads_t": 32}
    direct = conv2d_winograd.kernel_configs({key: {"tile": 0, "tile_f": 4}})
    assert direct[key.replace(winograd.OP, "conv2d_direct")] == {"tile_f": 4}
    assert winograd.choose_tile(layout_workload(key), Winograd.OFF, direct) == 0
    assert winograd.choose_tile(layout_workload(key), Winograd.OFF, f4) == 4  # records win over off/auto
    assert winograd.choose_tile(layout_workload(key), Winograd.F2, f4) == 2  # ... forcing wins over records
    # texture layout records: packed stage keys, the packed direct conv's key; buffer records do not decide there
    wl = layout_workload(key)
    texture_key = layout_key(wl, Memory.TEXTURE)
    assert layout_workload(texture_key) == wl and key_memory(texture_key) is Memory.TEXTURE
    t4 = conv2d_winograd.kernel_configs({texture_key: {"tile": 4, "threads_t": 32, "tile_k": 2}})
    assert t4["winograd_input_transform_nchw4c|6x6x16x16x4x6|float32"] == {"threads_t": 32}
    assert t4["winograd_batch_gemm_nchw4c|6x6x16x16x4x64|float32"] == {"tile_k": 2}
    t0 = conv2d_winograd.kernel_configs({texture_key: {"tile": 0, "tile_cb": 2}})
    assert t0["conv2d_nchw4c|n1c64h14w14|o64k3x3|s1x1|p1x1x1x1|d1x1|g1|float32"] == {"tile_cb": 2}
    auto, off, texture = Winograd.AUTO, Winograd.OFF, Memory.TEXTURE
    assert winograd.choose_tile(wl, auto, t0, texture) == 0 and winograd.choose_tile(wl, auto, {}, texture) == 4
    assert winograd.choose_tile(wl, off, t4, texture) == 4 and winograd.choose_tile(wl, off, f4, texture) == 0


def test_quota_explores_then_concentrates_on_the_winning_layout():
    assert sum(layout_quota({0: None, 2: None, 4: None}, 5).values()) == 5
    assert min(layout_quota({0: None, 2: None, 4: None}, 6).values()) == 2
    quota = layout_quota({0: 2.5, 2: 1.6, 4: 1.0}, 8)
    assert quota[4] >= 6 and quota[0] == 0 and sum(quota.values()) == 8
    assert layout_quota({0: float("inf"), 2: None, 4: 1.0}, 4)[0] == 0


@pytest.mark.parametrize("memory", [Memory.BUFFER, Memory.TEXTURE])
def test_tuning_chooses_the_fastest_layout_and_compile_applies_it(memory, tmp_path):
    from adreno.artifact.format import Artifact

    model = _conv(tmp_path / "c64.onnx")
    records, report_path = tmp_path / "r.jsonl", tmp_path / "rep.json"
    proc = _cli("tune", model, "--memory", memory, "--trials", 6, "--batch", 3, "--records", records,
                "--report", report_path)
    assert proc.returncode == 0, proc.stderr
    db = Database(records)
    ok = [r for r in db.records if r.ok]
    assert {r.config["tile"] for r in ok} == {0, 2, 4}, [r.config for r in db.records]
    assert all(r.extra.get("max_error") is not None for r in ok), "timings only after a check"
    fastest = min(ok, key=lambda r: r.median)
    row = json.loads(report_path.read_text())["tasks"][0]
    name = {0: "direct", 2: "winograd-f2", 4: "winograd-f4"}
    assert row["layout"] == name[fastest.config["tile"]] and row["family"] == LAYOUT
    for tile in (0, 2, 4):
        assert row["layouts"][name[tile]]["best_ms"] == pytest.approx(
            min(r.median for r in ok if r.config["tile"] == tile) * 1e3, abs=1e-3)
    assert row["layout"] in proc.stdout

    again = _cli("tune", model, "--memory", memory, "--trials", 3, "--batch", 3, "--records", records,
                 "-q")  # resume
    assert again.returncode == 0, again.stderr
    configs = [json.dumps(r.config, sort_keys=True) for r in Database(records).records]
    assert len(configs) == len(db.records) + 3 and len(set(configs)) == len(configs)

    key = layout_key(layout_workload(KEY), memory)
    best_tile = Database(records).best(key).config["tile"]
    built = _cli("compile", model, "--records", records, "--host", "native", "-o", tmp_path / "tuned")
    assert built.returncode == 0, built.stderr
    tuned = Artifact.load(tmp_path / "tuned")
    assert tuned.manifest["memory"] == memory  # the records' memory
    steps = [s.func for s in tuned.plan.steps if "pack_nchw4c" not in s.func]
    direct = "conv2d_nchw4c" if memory == "texture" else "conv2d"  # when the direct layout measured fastest
    assert (steps == [direct]) if best_tile == 0 else (steps[0] == f"winograd{best_tile}_input_transform"), steps
    checked = _cli("run", tmp_path / "tuned", "--check", "--repeat", 1)
    assert checked.returncode == 0 and "OK" in checked.stdout, checked.stdout + checked.stderr
    forced = 2 if best_tile != 2 else 4
    built = _cli("compile", model, "--records", records, "--winograd", f"f{forced}", "-o", tmp_path / "forced")
    assert built.returncode == 0, built.stderr
    steps = [s.func for s in Artifact.load(tmp_path / "forced").plan.steps if "pack_nchw4c" not in s.func]
    assert steps[0] == f"winograd{forced}_input_transform"


def test_a_direct_record_of_an_eligible_conv_still_applies(tmp_path):
    """Records of `--no-layouts` runs (or older files) tune the direct kernel; they keep the conv direct."""
    from adreno.artifact.format import Artifact
    from adreno.compile import compile_model

    model = _conv(tmp_path / "c64.onnx")
    (task,) = extract_tasks(model)
    assert task.family == "conv2d_direct"
    config = {**task.default_config(), "threads_x": 7}
    Database(tmp_path / "r.jsonl").append([Record(task.key, "dev", config, [1e-3], trial=1)])
    artifact = Artifact.load(compile_model(model, tmp_path / "a", CompileOptions(records=str(tmp_path / "r.jsonl"))))
    assert [s.func for s in artifact.plan.steps] == ["conv2d"]
    assert artifact.plan.steps[0].kernels[0].local_size[0] == 7
