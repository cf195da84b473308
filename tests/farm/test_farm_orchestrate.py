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
    args = ["compile", "tiny", "-o", str(out), "--orchestrate", "--max-size", "1", "--records", str(records),
            "--memory", "buffer", "--host", "native", "--measure-tracker", farm2.tracker, "--measure-key", farm2.key]
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
    assert main(["orchestrate", "tiny", "--report", "--max-size", "1", "--records", str(records),
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


def test_the_farm_measures_candidates_on_every_device_while_the_next_compile(farm2, tmp_path):
    """With a remote runner the table submits each candidate as soon as it is compiled: the key's two agents
    measure at once, and the records and progress still come in the candidates' order."""
    from adreno.targets import devices
    from adreno.frontend import zoo
    from adreno.frontend.importer import to_relax
    from adreno.orchestrate.candidates import enumerate_groups, kernel_of
    from adreno.orchestrate.costs import CostTable
    from adreno.orchestrate.fuseops import fuseops_groups
    from adreno.orchestrate.graph import prepared, primitive_graph
    from adreno.runners.rpc import RPCRunner

    farm2.wait_registered(2, timeout=30)
    mod = prepared(to_relax(zoo.get_model("tiny", seed=0)))
    graph = primitive_graph(mod)
    groups = {g.primitives for g in fuseops_groups(mod, graph, devices.get_device("adreno-740"))}
    groups |= set(enumerate_groups(list(graph.primitives), 1))
    kernels = [kernel_of(g, graph.primitives, graph.outputs, 0.0, str(i)) for i, g in enumerate(groups)]
    runner = RPCRunner(farm2.tracker, farm2.key)
    results, submit = [], runner.submit
    runner.submit = lambda run: results.append(submit(run)) or results[-1]
    lines = []
    try:
        table = CostTable(Database(tmp_path / "r.jsonl"), runner, farm_fingerprint(farm2.key), "adreno-740",
                          repeat=2, progress=lines.append)
        costs = table.costs(graph, kernels)
    finally:
        runner.close()
    assert all(c is not None and c > 0 for c in costs.values()), costs
    measured = [line for line in lines if line.startswith("measured ")]
    assert [line.split(":")[0] for line in measured] == [f"measured {n}/{len(measured)}" for n in
                                                           range(1, len(measured) + 1)]
    assert len({r.result().device for r in results}) == 2  # both agents measured
