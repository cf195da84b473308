"""`compile -o DIR` writes only into a missing, an empty or an earlier artifact's directory: never over a user's
files (issue 22: `adreno compile tiny -o ne` deleted `ne/keep.txt` and `ne/sub`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def adreno(*args):
    return subprocess.run([sys.executable, "-m", "adreno.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def test_a_directory_with_other_files_is_refused_and_kept(tmp_path):
    target = tmp_path / "ne"
    (target / "sub").mkdir(parents=True)
    (target / "keep.txt").write_text("data")
    proc = adreno("compile", "tiny", "-o", target, "-q")
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "not an earlier artifact" in proc.stderr
    assert (target / "keep.txt").read_text() == "data" and (target / "sub").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ne"], "no temporary sibling left behind"


@pytest.mark.parametrize("given", ["", " "])
def test_an_empty_output_name_is_refused(tmp_path, given):
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", "compile", "tiny", "-o", given, "-q"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2 and "-o" in proc.stderr and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_empty_directory_then_earlier_artifact_are_replaced(tmp_path):
    """An earlier artifact is replaced whole, with the binaries `adreno cache export` bundled into it; a file of the
    user's beside it makes the directory one to keep (issue 22's sweep, session 22: `notes.txt` was deleted)."""
    target = tmp_path / "art"
    target.mkdir()
    assert adreno("compile", "tiny", "-o", target, "-q").returncode == 0
    first = json.loads((target / "manifest.json").read_text())
    (target / "stray.txt").write_text("x")
    proc = adreno("compile", "tiny", "--target", "adreno-650", "-o", target, "-q")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "files of its own (stray.txt)" in proc.stderr and (target / "stray.txt").read_text() == "x"
    (target / "stray.txt").unlink()
    (target / "binaries" / "some-device").mkdir(parents=True)  # where `adreno cache export` bundles binaries
    proc = adreno("compile", "tiny", "--target", "adreno-650", "-o", target, "-q")
    assert proc.returncode == 0, proc.stderr
    second = json.loads((target / "manifest.json").read_text())
    assert first["target"] != second["target"] and not (target / "binaries").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["art"]


def test_a_manifest_of_another_tool_is_not_an_artifact(tmp_path):
    """A web app's folder has a manifest.json too: it is not replaced."""
    target = tmp_path / "webapp"
    target.mkdir()
    (target / "manifest.json").write_text('{"name": "x"}')
    (target / "index.html").write_text("<html>")
    proc = adreno("compile", "tiny", "-o", target, "-q")
    assert proc.returncode == 2 and "not an earlier artifact" in proc.stderr, proc.stderr
    assert sorted(p.name for p in target.iterdir()) == ["index.html", "manifest.json"]


def test_stale_temporary_siblings_of_a_killed_compile_are_removed(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".art.adreno-tmp.{dead.pid}.abc"
    (stale / "kernels").mkdir(parents=True)
    live = tmp_path / f".art.adreno-tmp.{os.getpid()}.def"  # a writer that still runs: left alone
    live.mkdir()
    foreign = tmp_path / ".art.other"  # not ours
    foreign.mkdir()
    assert adreno("compile", "tiny", "-o", tmp_path / "art", "-q").returncode == 0
    assert not stale.exists() and live.is_dir() and foreign.is_dir()
