"""Orchestration's candidates measured on the farm: a real tracker and a PoCL agent on loopback, the agent evicting
the caches before each timed run as the local runner does."""

from __future__ import annotations

import json

from adreno.cli.main import main
from adreno.farm.common import free_port
from adreno.records import Database
from adreno.runners.rpc import farm_fingerprint


def test_compile_orchestrate_measures_on_the_farm(farm2, tmp_path, capsys):
    farm2.wait_registered(2, timeout=30)
    records, out = tmp_path / "r.jsonl", tmp_path / "a"
    args = ["compile", "tiny", "-o", str(out), "--orchestrate", "--max-size", "2", "--records", str(records),
            "--host", "native", "--measure-tracker", farm2.tracker, "--measure-key", farm2.key]
    assert main(args) == 0, capsys.readouterr().err
    assert "measured 1/" in capsys.readouterr().err
    measured = Database(records).records
    assert measured and {r.device for r in measured} == {farm_fingerprint(farm2.key)}
    assert all(r.ok and r.median > 0 for r in measured), [r.error for r in measured if not r.ok]
    assert any("|launch|" in r.workload for r in measured)  # the farm device's own launch cost
    summary = json.loads((out / "manifest.json").read_text())["orchestration"]
    assert summary["measured_now"] == len(measured) - 2 and summary["predicted_run_s"] > 0
    assert main(["run", str(out), "--check", "--repeat", "2"]) == 0
    # the same records measured nothing a second time
    assert main(["orchestrate", "tiny", "--report", "--max-size", "2", "--records", str(records),
                 "--tracker", farm2.tracker, "--key", farm2.key]) == 0
    assert "measured 1/" not in capsys.readouterr().err and len(Database(records).records) == len(measured)


def test_orchestrate_on_an_absent_farm_is_one_line(farm2, capsys):
    for tracker, key, message in ((f"127.0.0.1:{free_port()}", "pocl-cpu", "tracker"),
                                  (farm2.tracker, "adreno-999", "no device of key adreno-999")):
        assert main(["orchestrate", "tiny", "--report", "--tracker", tracker, "--key", key]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
    assert main(["orchestrate", "tiny", "--report", "--tracker", "no:port:here"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
