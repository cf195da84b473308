"""The program cache survives killed processes and hostile entries: a SIGKILL during a binary load quarantines the
entry that load touched (the rest stays in use), and a FIFO in place of an entry or a marker hangs nothing."""

from __future__ import annotations

import json
import multiprocessing
import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import pytest

from adreno.artifact.format import Artifact
from adreno.cache import DeviceIdentity, ProgramCache, cache_key

HERE = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture
def warm(tiny_artifact, tmp_path, pocl_device):
    """(cache root, the tiny artifact's program sources, the device): every program cached once."""
    import pyopencl as cl

    artifact = Artifact.load(tiny_artifact)
    sources = [artifact.kernel_source(p) for p in artifact.plan.programs]
    context = cl.Context([pocl_device])
    store = ProgramCache(tmp_path / "cache")
    assert {store.build(context, s)[1] for s in sources} == {"miss"}
    return tmp_path / "cache", sources, pocl_device


def _hang_in_load(root: str, identity: DeviceIdentity, key: str, loading) -> None:
    with ProgramCache(pathlib.Path(root)).guard.loading(identity, key):
        loading.set()
        time.sleep(120)


def _warm_starts_forever(root: str, sources: list[str], device_name: str) -> None:
    """Warm start after warm start: every program loaded from the cache, through the crash guard."""
    import pyopencl as cl

    from adreno.opencl.device import select_device

    context = cl.Context([select_device(device_name)])
    store = ProgramCache(pathlib.Path(root))
    while True:
        for source in sources:
            store.build(context, source)


def _outcomes(root, sources, device) -> dict:
    import pyopencl as cl

    store = ProgramCache(root)
    context = cl.Context([device])
    outcomes = [store.build(context, s)[1] for s in sources]
    return {k: outcomes.count(k) for k in set(outcomes)}


def test_sigkill_inside_loads_quarantines_only_what_they_touched(warm):
    """10 processes killed inside a binary load of one of two programs: those two are blocked (built from source
    from then on), the other programs still load from the cache."""
    root, sources, device = warm
    identity = DeviceIdentity.from_cl_device(device)
    ctx = multiprocessing.get_context("spawn")
    for kill in range(10):
        loading = ctx.Event()
        child = ctx.Process(target=_hang_in_load, args=(str(root), identity,
                                                        cache_key(identity, sources[kill % 2], ""), loading))
        child.start()
        assert loading.wait(60)
        os.kill(child.pid, signal.SIGKILL)
        child.join(30)
        assert child.exitcode == -signal.SIGKILL
        _outcomes(root, sources[2:3], device)  # a warm start in between quarantines what the kill left
    assert _outcomes(root, sources, device) == {"disabled": 2, "hit": len(sources) - 2}
    info = ProgramCache(root).info()
    assert len(info["quarantined"]) == 2 and info["entries"] == len(sources) - 2
    assert not list((root / "guard").glob("*.loading")), "every marker was consumed"


def test_random_sigkills_during_warm_starts_leave_the_cache_enabled(warm):
    """10 SIGKILLs at random moments of processes doing nothing but warm starts: an entry a kill landed in is
    rebuilt once, and afterwards every program is a cache hit again, except one whose loads were killed twice
    (blocked, as a binary that crashes the driver twice is)."""
    root, sources, device = warm
    rng = random.Random(14)
    ctx = multiprocessing.get_context("spawn")
    for _ in range(10):
        child = ctx.Process(target=_warm_starts_forever, args=(str(root), sources, "pocl"))
        child.start()
        time.sleep(1.0 + rng.random())  # the spawn's imports, then loads
        os.kill(child.pid, signal.SIGKILL)
        child.join(30)
    notes = ProgramCache(root).info()["quarantined"]
    blocked = sum(note["crashes"] >= 2 for note in notes)
    first = _outcomes(root, sources, device)  # an entry the last kill landed in is rebuilt once
    assert set(first) <= {"hit", "miss", "disabled"} and first.get("disabled", 0) == blocked, first
    again = _outcomes(root, sources, device)
    assert again == {"hit": len(sources) - blocked, **({"disabled": blocked} if blocked else {})}, again
    print(f"10 SIGKILLs during warm starts: {sum(n['crashes'] for n in notes)} landed inside a load, "
          f"{blocked} programs blocked; the next warm start: {again}")


def test_fifo_in_place_of_an_entry_or_marker_hangs_nothing(tiny_artifact, tmp_path, pocl_device):
    from adreno.cache.format import device_key

    cache = tmp_path / "cache"
    env = {**os.environ, "ADRENO_CACHE_DIR": str(cache)}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "adreno.cli", *map(str, args)], capture_output=True, text=True,
                              timeout=90, cwd=HERE, env=env)

    assert cli("run", tiny_artifact, "--repeat", "1", "-q").returncode == 0
    entries = sorted(cache.glob("*.clbin"))
    victim = entries[0]
    victim.unlink()
    os.mkfifo(victim)
    (cache / "guard").mkdir(exist_ok=True)
    os.mkfifo(cache / "guard" / f"{device_key(DeviceIdentity.from_cl_device(pocl_device))}.1-abc.loading")

    verify = cli("cache", "verify", "--json")
    assert verify.returncode == 1, verify.stderr
    report = json.loads(verify.stdout)
    assert report["entries"][victim.name]["reason"] == "unreadable: not a regular file"
    assert report["ok"] == len(entries) - 1

    done = cli("run", tiny_artifact, "--repeat", "1", "-q")
    assert done.returncode == 0, done.stderr
    assert "not a regular file" in done.stderr and "Traceback" not in done.stderr
    assert victim.is_file(), "the program was rebuilt and its entry replaced by a regular file"
    assert not list((cache / "guard").iterdir()), "the FIFO marker was consumed"
