"""Records are validated on load: every malformed kind of line is skipped and counted, valid ones are kept, and
`adreno compile --records` applies only valid records whose knobs are in today's space."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from adreno.options import Precision
from adreno.records import Database

DEPTHWISE = "depthwise_conv2d|n1c16h16w16|o16k3x3|s1x1|p1x1x1x1|d1x1|g16|float32"  # keys of the bundled `tiny`
SOFTMAX = "softmax|x1x10|axes1|float32"
POINTWISE = "conv2d_direct|n1c16h16w16|o16k1x1|s1x1|p0x0x0x0|d1x1|g1|float32"
STEM = "conv2d_direct|n1c3h32w32|o16k3x3|s1x1|p1x1x1x1|d1x1|g1|float32"
LAYOUT = "conv2d_winograd|n1c3h32w32|o16k3x3|s1x1|p1x1x1x1|d1x1|g1|float32"
POOL = "max_pool2d|n1c16h32w32|k2x2|s2x2|p0x0x0x0|d1x1|float32"


def line(workload, config, seconds=(1e-3,), **fields) -> str:
    return json.dumps({"workload": workload, "device": "dev", "config": config, "seconds": seconds, **fields})


VALID = [
    line(DEPTHWISE, {"tile_f": 1, "tile_y": 2, "tile_x": 4, "threads_f": 2, "threads_y": 8, "threads_x": 4,
                     "unroll_k": 1, "stage": 0}, trial=1),
    line(SOFTMAX, {"threads_x": 2, "threads_y": 1}, trial=1),
    line(DEPTHWISE, {"tile_f": 1, "tile_y": 1, "tile_x": 1, "threads_f": 1, "threads_y": 1, "threads_x": 1,
                     "unroll_k": 0, "stage": 0}, seconds=None, error="slow", stage="run", trial=2),
]
MALFORMED = {  # kind -> line; each would be the "best" record of its workload if it were loaded
    "seconds is text": line(POOL, {"threads_x": 2}, seconds="fast"),
    "config is null": line(POOL, None),
    "config is a list": line(POOL, [1, 2]),
    "config nests": line(POOL, {"threads_x": {"a": 1}}),
    "negative time": line(POOL, {"threads_x": 4}, seconds=[-1.0]),
    "zero time": line(POOL, {"threads_x": 4}, seconds=[0.0]),
    "NaN time": line(POOL, {"threads_x": 4}, seconds=[float("nan")]),
    "infinite time": line(POOL, {"threads_x": 4}, seconds=[float("inf")]),
    "boolean time": line(POOL, {"threads_x": 4}, seconds=[True]),
    "empty times": line(POOL, {"threads_x": 4}, seconds=[]),
    "neither time nor error": line(POOL, {"threads_x": 4}, seconds=None),
    "workload is a number": line(7, {"threads_x": 4}),
    "no device": json.dumps({"workload": POOL, "config": {}, "seconds": [1e-3]}),
    "unknown field": line(POOL, {}, colour="red"),
    "trial is text": line(POOL, {}, trial="one"),
    "negative trial": line(POOL, {}, trial=-3),
    "unknown image precision": line(POOL, {"threads_x": 4}, extra={"precision": "fp8"}),
    "unhashable image precision": line(POOL, {"threads_x": 4}, extra={"precision": ["fp16"]}),
    "a list, not a record": json.dumps([POOL, {}, [1e-3]]),
    "a number": "42",
    "not JSON": "{workload: oops",
    "deeply nested": "[" * 100_000 + "]" * 100_000,
}
OUTSIDE_SPACE = [  # well-formed records of an older knob table: the fastest of their workloads, never applied
    line(POINTWISE, {"spin": 1}, seconds=[1e-9]),
    line(STEM, {"threads_x": 1024}, seconds=[1e-9]),
    line(LAYOUT, {"tile": 3}, seconds=[1e-9]),
]


@pytest.fixture
def records(tmp_path):
    path = tmp_path / "records.jsonl"
    lines = [VALID[0], *MALFORMED.values(), VALID[1], *OUTSIDE_SPACE, VALID[2]]
    binary = b"\xff\xfe\x00{not utf-8"
    path.write_bytes("\n".join(lines).encode() + b"\n" + binary + b'\n{"workload": "torn')
    return path


SKIPPED = len(MALFORMED) + 2  # + the binary line and the torn last line


def test_every_malformed_kind_is_skipped_and_counted(records):
    db = Database(records)
    assert db.skipped == SKIPPED, db.skips
    assert [r.workload for r in db.records] == [DEPTHWISE, SOFTMAX, POINTWISE, STEM, LAYOUT, DEPTHWISE]
    assert all(r.ok == (r.error is None) for r in db.records)
    summary = db.skipped_summary()
    assert f"skipped {SKIPPED}" in summary and "\n" not in summary
    assert db.best(POOL) is None, "no malformed record is anybody's best"
    db.append([db.records[0].__class__(SOFTMAX, "dev", {"threads_x": 4, "threads_y": 1}, [2e-3], trial=2)])
    assert len(Database(records).records) == 7, "appending after skipped lines keeps every valid record"


def _compile_tiny_with(records, out) -> dict:
    """`adreno compile tiny --records RECORDS` (buffer memory, native host): its --json summary."""
    done = subprocess.run([sys.executable, "-m", "adreno.cli", "compile", "tiny", "--memory", "buffer", "--host",
                           "native", "--records", str(records), "-o", str(out), "--json"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def test_compile_applies_only_valid_records_in_space(records, tmp_path):
    out = tmp_path / "tuned"
    summary = _compile_tiny_with(records, out)
    assert summary["tuned_kernels"] == 2, "the depthwise and softmax records; no malformed or out-of-space one"
    assert summary["records_skipped"] == SKIPPED + len(OUTSIDE_SPACE)
    plan = json.loads((out / "plan.json").read_text())
    assert plan, "the artifact was written"


def test_tuner_resume_ignores_malformed_records(records):
    """The tuner resumes from `Database.query`: malformed lines never reach it (out-of-space ones are filtered
    by its own `_in_space`)."""
    from adreno.tune.tuner import _in_space
    from adreno.tune.space import SearchSpace

    db = Database(records)
    space = SearchSpace({"threads_x": [1, 2, 4], "threads_y": [1]})
    resumed = [r for r in db.query(SOFTMAX, "dev") if _in_space(space, r)]
    assert [r.config for r in resumed] == [{"threads_x": 2, "threads_y": 1}]
    assert db.query(POOL) == []


def test_a_faster_out_of_space_record_does_not_hide_the_valid_one(tmp_path):
    """Issue 22: the fastest record of a workload has a knob outside today's space; the schedule refuses it and
    the next-fastest valid record of the same workload is applied (not the defaults)."""
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join([line(POINTWISE, {"tile_f": 2}, seconds=[2e-3], trial=1),
                               line(POINTWISE, {"threads_x": 1024}, seconds=[1e-9], trial=2),
                               line(POINTWISE, {"threads_x": 999}, seconds=[1e-8], trial=3)]) + "\n")
    out = tmp_path / "tuned"
    summary = _compile_tiny_with(path, out)
    assert summary["tuned_kernels"] == 1, "the valid record of the pointwise conv is applied"
    assert summary["records_skipped"] == 2, "both faster out-of-space records are skipped, one by one"


def test_refused_config_falls_back_to_the_next_fastest(tmp_path):
    from adreno.records import TunedConfigs

    path = tmp_path / "records.jsonl"
    path.write_text("\n".join([line(SOFTMAX, {"threads_x": 2}, seconds=[3e-3], trial=1),
                               line(SOFTMAX, {"threads_x": 4}, seconds=[2e-3], trial=2),
                               line(SOFTMAX, {"threads_x": 4}, seconds=[5e-3], trial=3),
                               line(SOFTMAX, {"threads_x": 8}, seconds=[1e-3], trial=4)]) + "\n")
    tuned = TunedConfigs.load(path, Precision.FP32, dict, lambda key, config: True, "dev")
    assert tuned[SOFTMAX] == {"threads_x": 8}
    assert tuned.refuse(SOFTMAX, "too wide") == {"threads_x": 4}
    assert tuned.refuse(SOFTMAX, "too wide") == {"threads_x": 2}
    assert tuned.refuse(SOFTMAX, "too wide") is None and SOFTMAX not in tuned and tuned.skipped == 3


def test_records_of_the_target_device_come_first(tmp_path):
    """Issue 22: a workload's records measured on the compile's target win over faster ones of another device;
    a workload with records of other devices only takes those, and `elsewhere` names the device."""
    from adreno.records import TunedConfigs

    def measured(device, config, seconds):
        return json.dumps({"workload": SOFTMAX if config["threads_x"] < 8 else POOL, "device": device,
                           "config": config, "seconds": [seconds]})

    path = tmp_path / "records.jsonl"
    path.write_text("\n".join([measured("adreno-740|Adreno (TM) 740|0676.32", {"threads_x": 2}, 3e-3),
                               measured("nvidia-h200|NVIDIA H200|570", {"threads_x": 4}, 1e-3),
                               measured("nvidia-h200|NVIDIA H200|570", {"threads_x": 8}, 1e-3)]) + "\n")
    tuned = TunedConfigs.load(path, Precision.FP32, dict, lambda key, config: True, "adreno-740")
    assert tuned[SOFTMAX] == {"threads_x": 2} and tuned.runners_up[SOFTMAX] == []
    assert tuned[POOL] == {"threads_x": 8} and tuned.elsewhere == {POOL: "nvidia-h200|NVIDIA H200|570"}


def test_the_ranker_is_given_at_construction_and_never_set_later(tmp_path):
    """Issue 50: `--defaults model`'s ranker is part of the knob source from its construction (`TunedConfigs(ranker=)`,
    `TunedConfigs.load(..., ranker=)`); a kernel without records gets its pick, and no one assigns it afterwards."""
    from adreno.records import TunedConfigs

    def ranker(family, matched, rule, ctx):
        return {**rule, "ranked": (family, matched, ctx)}

    path = tmp_path / "records.jsonl"
    path.write_text(VALID[1] + "\n")
    loaded = TunedConfigs.load(path, Precision.FP32, dict, lambda key, config: True, "dev", ranker)
    assert loaded.ranker is ranker and loaded[SOFTMAX] == {"threads_x": 2, "threads_y": 1}
    assert loaded.default("pool", POOL, {"threads_x": 8}, "ctx") == {"threads_x": 8, "ranked": ("pool", POOL, "ctx")}
    assert TunedConfigs().default("pool", POOL, {"threads_x": 8}, "ctx") == {"threads_x": 8}  # the rule
    with pytest.raises(AttributeError):
        loaded.ranker = None


def test_compile_says_in_one_line_when_records_are_from_another_device(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text(VALID[1] + "\n")  # device "dev": not adreno-740

    def compile_tiny(*flags):
        done = subprocess.run([sys.executable, "-m", "adreno.cli", "compile", "tiny", "--memory", "buffer",
                               "--host", "native", "--records", str(path), "-o", str(tmp_path / "out"), "--json",
                               *flags], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout), [line for line in done.stderr.splitlines() if "measured on" in line]

    summary, said = compile_tiny()
    assert summary["tuned_kernels"] == 1 and summary["records_elsewhere"] == {SOFTMAX: "dev"}
    assert said == ["warning: 1 workload(s) use records measured on dev, none on adreno-740 "
                    "(--records-from-any-device: allow this silently)"]
    summary, said = compile_tiny("--records-from-any-device")
    assert summary["tuned_kernels"] == 1 and said == []


def test_compile_keeps_only_the_fastest_record_per_config(tmp_path):
    """Issue 22: compile streams the file and holds one record per (workload, device, config), not one per line
    (speed: tools/bench_records.py)."""
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join([*(line(SOFTMAX, {"threads_x": 2}, seconds=[t * 1e-3], trial=t) for t in range(1, 40)),
                               line(SOFTMAX, {"threads_x": 4}, seconds=[5e-3], trial=41),
                               line(SOFTMAX, {"threads_x": 4}, seconds=None, error="slow", trial=42),
                               *MALFORMED.values()]) + "\n")
    database, fastest = Database.fastest(path, Precision.FP32)
    assert database.records == [] and database.skipped == len(MALFORMED)
    assert sorted((r.config["threads_x"], r.median, count) for r, count in fastest) == [(2, 1e-3, 39), (4, 5e-3, 1)]
