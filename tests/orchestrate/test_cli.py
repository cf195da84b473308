"""`adreno orchestrate tiny --report`: per block FuseOps next to the choice, JSON written, records reused; bad input
is one line and exit status 2."""

import json

import pytest

from adreno.cli.main import main


def test_report_on_tiny_then_from_the_records(tmp_path, capsys):
    records, out = tmp_path / "r.jsonl", tmp_path / "report.json"
    args = ["orchestrate", "tiny", "--report", "--max-size", "1", "--repeat", "3", "--records", str(records)]
    assert main(args + ["--json", str(out)]) == 0
    captured = capsys.readouterr()
    report = json.loads(out.read_text())
    assert "measured 1/" in captured.err and "FuseOps: fused_conv2d_add_relu" in captured.out
    assert report["model"] == "tiny" and report["complete"] and report["measured_now"] > 0
    assert sum(b["primitives"] for b in report["blocks"]) == report["primitives"] and len(report["blocks"]) > 3
    for block in report["blocks"]:
        assert block["chosen_cost_s"] <= block["fuseops_cost_s"] + 1e-12  # FuseOps' partition is a candidate
        chosen = {p for k in block["chosen"] for p in k["primitives"]}
        assert chosen == {p for k in block["fuseops"] for p in k["primitives"]}  # max size 1: a partition
        assert all(k["kernels"] == 1 for k in block["fuseops"])  # each of FuseOps' groups lowers to one kernel
    assert report["chosen_cost_s"] <= report["fuseops_cost_s"] + 1e-12
    lines = len(records.read_text().splitlines())
    assert main(args + ["--json", str(out)]) == 0
    again = json.loads(out.read_text())
    assert again["measured_now"] == 0 and "measured 1/" not in capsys.readouterr().err
    assert len(records.read_text().splitlines()) == lines
    assert again["chosen_cost_s"] == report["chosen_cost_s"]


@pytest.mark.parametrize("extra, message", [
    (["no_such_model"], "no_such_model"),
    (["tiny", "--max-size", "0"], "--max-size must be positive"),
    (["tiny", "--target", "adreno-999"], "adreno-999"),
    (["tiny", "--json", "."], "is a directory"),
])
def test_bad_input_is_one_line_and_status_2(extra, message, capsys):
    assert main(["orchestrate", "--report", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
