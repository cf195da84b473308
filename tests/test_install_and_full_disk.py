"""`-o` names the earlier artifact or the new one at every instant, a killed install loses nothing, and a full disk
or TMPDIR is one line, exit 2, with nothing left behind (compile -o, run --output, the records a tune appends).

The full disk is a real one: a 1 MiB tmpfs mounted for the module (the tests run as root, in CI too), filled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from adreno.artifact.format import ArtifactWriter


def _install(final: Path, label: str) -> Path:
    """A minimal artifact (what the install and its recovery look at: a manifest of adreno's) written to `final`."""
    with ArtifactWriter(final) as writer:
        writer.write_text("plan.json", json.dumps({"label": label}))
        writer.write_text("kernels/k.cl.gz", label)
        writer.seal({"adreno_version": "test", "label": label})
        return writer.install()


def _label(final: Path) -> str:
    return json.loads((final / "manifest.json").read_text())["label"]


def _siblings(final: Path) -> list[str]:
    return sorted(p.name for p in final.parent.iterdir() if p.name != final.name)


def test_the_output_names_an_artifact_at_every_instant(tmp_path):
    final = _install(tmp_path / "art", "first")
    missing, done = [], threading.Event()

    def watch():
        while not done.is_set():
            if not (final / "manifest.json").exists():
                missing.append(1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for i in range(40):
            _install(final, f"v{i}")
    finally:
        done.set()
        watcher.join()
    assert not missing and _label(final) == "v39" and _siblings(final) == []


KILLED_INSTALL = """
import os, shutil, signal, sys
from pathlib import Path
import adreno.support.directory_swap as swap
from adreno.artifact.format import ArtifactWriter

final, mode = Path(sys.argv[1]), sys.argv[2]
die = lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)
if mode == "between-renames":  # a file system without RENAME_EXCHANGE: the two-rename fallback, killed midway
    swap.exchange = lambda a, b: False
    rename = os.rename
    os.rename = lambda src, dst: (rename(src, dst), str(dst).endswith(".parked") and die())
else:  # killed after the exchange, before the earlier artifact is removed
    shutil.rmtree = die
with ArtifactWriter(final) as writer:
    writer.write_text("plan.json", "{}")
    writer.write_text("kernels/k.cl.gz", "new")
    writer.seal({"adreno_version": "test", "label": "new"})
    writer.install()
"""


@pytest.mark.parametrize("mode", ["between-renames", "after-exchange"])
def test_a_kill_during_the_install_loses_nothing(tmp_path, mode):
    """SIGKILL inside the install (the issue's window, widened with strace: `-o` was missing and the next compile
    deleted the earlier artifact): the next write onto `-o` finds an artifact there, the earlier one or the new one,
    and a parked earlier artifact is deleted only once another one is at `-o`."""
    final = _install(tmp_path / "art", "old")
    proc = subprocess.run([sys.executable, "-c", KILLED_INSTALL, str(final), mode], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == -9, proc.stderr
    if mode == "between-renames":
        assert not final.exists() and [s for s in _siblings(final) if s.endswith(".parked")]
        writer = ArtifactWriter(final)  # the next compile's start puts the parked artifact back
        writer.abort()
        assert _label(final) == "old"
    else:
        assert _label(final) == "new" and _siblings(final)  # the earlier one, swapped out, not yet removed
        ArtifactWriter(final).abort()
    assert _siblings(final) == []
    _install(final, "later")
    assert _label(final) == "later" and _siblings(final) == []


def test_a_parked_artifact_is_kept_while_nothing_replaced_it(tmp_path):
    """A parked earlier artifact whose `-o` now holds no artifact (a folder made meanwhile) is not deleted."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    parked = tmp_path / f".art.adreno-tmp.{dead.pid}.abc.parked"
    parked.mkdir()
    (parked / "manifest.json").write_text(json.dumps({"adreno_version": "t", "plan_format": 1, "files": {}}))
    (tmp_path / "art").mkdir()
    _install(tmp_path / "art", "new")
    assert parked.is_dir() and _label(tmp_path / "art") == "new"


def _fill(filler: Path) -> None:
    """Append zeros to `filler` until its file system has no byte left."""
    with open(filler, "ab", buffering=0) as out:
        for size in (1 << 16, 1 << 12, 1):
            try:
                while True:
                    out.write(bytes(size))
            except OSError:
                pass


@pytest.fixture(scope="module")
def full_disk(tmp_path_factory):
    """A mounted 1 MiB tmpfs, filled to the last byte."""
    mount = tmp_path_factory.mktemp("full")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True, capture_output=True)
    try:
        _fill(mount / "filler")
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)


def _contents(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def adreno(*args, env=None):
    return subprocess.run([sys.executable, "-m", "adreno.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=env)


def assert_one_line(proc, message: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr[-3000:]


def test_compile_onto_a_full_disk_is_one_line_and_leaves_nothing(full_disk):
    assert_one_line(adreno("compile", "tiny", "-o", full_disk / "art", "-q"), "No space left on device")
    assert _contents(full_disk) == ["filler"]


def test_compile_with_a_nearly_full_tmpdir_is_refused_before_it_starts(full_disk, tmp_path):
    """LLVM ends the process when it cannot write the host library's objects to TMPDIR ("LLVM ERROR: IO failure"),
    past any handler: the compile refuses a TMPDIR without room first. (A TMPDIR full to the last byte is no
    TMPDIR to Python: `tempfile` cannot write its probe there and takes /tmp.)"""
    filler = full_disk / "filler"
    os.truncate(filler, filler.stat().st_size - (16 << 10))
    try:
        proc = adreno("compile", "tiny", "-o", tmp_path / "art", "-q", env={**os.environ, "TMPDIR": str(full_disk)})
    finally:
        _fill(filler)
    assert_one_line(proc, f"TMPDIR {full_disk} has 0 MiB free")
    assert _contents(full_disk) == ["filler"] and _contents(tmp_path) == []


def test_run_output_onto_a_full_disk_is_one_line_and_leaves_nothing(full_disk, tiny_artifact):
    proc = adreno("run", tiny_artifact, "--output", full_disk / "out.npz", "--repeat", "1", "-q")
    assert_one_line(proc, "No space left on device); nothing was written")
    assert _contents(full_disk) == ["filler"]


def test_records_appended_onto_a_full_disk_are_one_line_and_leave_the_file_as_it_was(full_disk):
    """What `tune --records` appends after each round (and the claims file beside it)."""
    from adreno.errors import AdrenoError
    from adreno.records import Database, Record
    from adreno.tune.claims import Claims

    database = Database(full_disk / "r.jsonl")
    with pytest.raises(AdrenoError, match="No space left on device; it is as it was before this batch"):
        database.append([Record("w", "d", {"tile": i}, seconds=[1e-3] * 50) for i in range(200)])
    claims = Claims(database)
    with pytest.raises(OSError, match="No space left"):
        claims._write([{"owner": "x", "claims": "y" * 100_000}])
    assert _contents(full_disk) == ["filler", "r.jsonl.lock"]  # the lock every tune leaves (it is shared)
