"""Farm security for real: a TVM RPC client without credentials, connected through a real tracker to a real agent
worker on loopback, cannot read, write or remove anything outside the session's work directory (TVM's own
upload/download/remove/load_module and our adreno.agent.* functions alike); the tracker, like the agent, needs
--expose to bind beyond loopback."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tempfile
import uuid

import pytest

from adreno.farm.agent import PathEscape, confine

REFUSED = "outside the agent's work directory"


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """An RPC session with a real agent worker, leased from a real tracker (no device is touched)."""
    from tvm import rpc

    from adreno.farm.local import LocalFarm

    farm = LocalFarm(agents=1, log_dir=str(tmp_path_factory.mktemp("farm")))
    try:
        host, port = farm.tracker.split(":")
        yield rpc.connect_tracker(host, int(port)).request(farm.key, session_timeout=60)
    finally:
        farm.close()


def _refused(call) -> str:
    with pytest.raises(Exception) as err:  # noqa: PT011 - TVM re-raises the agent's error as its own type
        call()
    assert REFUSED in str(err.value), err.value
    return str(err.value)


def test_upload_outside_the_workdir_writes_nothing(session, tmp_path):
    name = f"escape-{uuid.uuid4().hex}"
    targets = [os.path.join(tempfile.gettempdir(), name), os.path.join(os.path.dirname(tempfile.gettempdir()), name)]
    _refused(lambda: session.upload(bytearray(b"owned"), f"../{name}"))
    _refused(lambda: session.upload(bytearray(b"owned"), f"../../{name}"))
    absolute = tmp_path / "abs"
    _refused(lambda: session.upload(bytearray(b"owned"), str(absolute)))
    assert not absolute.exists() and not any(os.path.exists(t) for t in targets)


def test_download_outside_the_workdir_reads_nothing(session):
    _refused(lambda: session.download("/etc/hostname"))
    _refused(lambda: session.download("../.."))
    _refused(lambda: session.download("../../../../../../etc/hostname"))


def test_remove_outside_the_workdir_removes_nothing(session):
    victim = tempfile.NamedTemporaryFile(prefix="victim-", dir=tempfile.gettempdir(), delete=False)
    victim.close()
    try:
        _refused(lambda: session.remove(f"../{os.path.basename(victim.name)}"))
        _refused(lambda: session.remove(victim.name))
        assert os.path.exists(victim.name)
    finally:
        os.unlink(victim.name)


def test_load_module_outside_the_workdir_is_refused(session):
    _refused(lambda: session.get_function("tvm.rpc.server.load_module")("/usr/lib/x86_64-linux-gnu/libc.so.6"))
    _refused(lambda: session.get_function("tvm.rpc.server.download_linked_module")("../../x.so"))


def test_prepare_of_an_outside_tarball_is_refused(session, tmp_path):
    outside = tmp_path / "outside.tar"
    with tarfile.open(outside, "w") as tar:
        info = tarfile.TarInfo("artifact.json")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"{}"))
    prepare = session.get_function("adreno.agent.prepare")
    _refused(lambda: prepare(str(outside)))
    _refused(lambda: prepare("../../../../../../" + str(outside).lstrip("/")))
    assert sorted(os.listdir(tmp_path)) == ["outside.tar"]


def test_paths_inside_the_workdir_still_work(session):
    session.upload(bytearray(b"inside"), "inside.bin")
    assert bytes(session.download("inside.bin")) == b"inside"
    session.remove("inside.bin")


def test_confine_refuses_a_symlink_leading_out(tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "out").symlink_to(tmp_path)
    with pytest.raises(PathEscape, match=REFUSED):
        confine(str(workdir), "out/secret")
    assert confine(str(workdir), "a/../b.tar") == str((workdir / "b.tar").resolve())


def test_tracker_beyond_loopback_needs_expose():
    refused = subprocess.run([sys.executable, "-m", "adreno.cli", "farm", "tracker", "--host", "0.0.0.0",
                              "--port", "1"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2, refused
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "--expose" in lines[0] and "no authentication" in lines[0], refused.stderr
