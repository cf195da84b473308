"""Farm security for real: a TVM RPC client without credentials, connected through a real tracker to a real agent
worker on loopback, reaches only the allow-list of RPC functions (every global TVM registers is tried) and cannot
read, write or remove anything outside the session's work directory (TVM's own upload/download/remove/load_module
and our adreno.agent.* functions alike); the tracker, like the agent, needs --expose to bind beyond loopback."""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid

import pytest

from adreno.farm.agent import PathEscape, confine

REFUSED = "outside the agent's work directory"
NOT_ALLOWED = "has no function"  # what TVM's client says of a name the agent's session does not expose


@pytest.fixture(scope="module")
def farm(tmp_path_factory):
    """A real tracker and two real agent workers: one for `session`, one free for a test's own connection."""
    from adreno.farm.local import LocalFarm

    with LocalFarm(agents=2, log_dir=str(tmp_path_factory.mktemp("farm"))) as farm:
        yield farm


@pytest.fixture(scope="module")
def session(farm):
    """An RPC session with a real agent worker, leased from a real tracker (no device is touched)."""
    from tvm import rpc

    host, port = farm.tracker.split(":")
    return rpc.connect_tracker(host, int(port)).request(farm.key, session_timeout=60)


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
    with pytest.raises(Exception, match=NOT_ALLOWED):  # noqa: PT011 - TVM re-raises the refusal as its own type
        session.get_function("tvm.rpc.server.download_linked_module")  # it runs a compiler: not on the list


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


def test_only_the_allow_list_answers(session):
    """Every global registered in this process (TVM's ~2,000, and those the agent's server adds) looked up from a
    loopback client: the allow-list's names answer, every other one is refused before TVM resolves it."""
    import tvm_ffi

    from adreno.farm.rpc_gate import ALLOWED

    server_only = {"tvm.rpc.server.workpath", "tvm.rpc.server.load_module", "tvm.rpc.server.download_linked_module",
                   "tvm.rpc.server.start", "tvm.rpc.server.shutdown"}
    names = set(tvm_ffi.registry.list_global_func_names()) | server_only | ALLOWED
    assert {"ffi.ModuleWriteToFile", "ffi.ModuleLoadFromFile", "s_tir.meta_schedule.remove_build_dir"} <= names
    answered = set()
    for name in sorted(names):
        try:
            session.get_function(name)
        except Exception as err:  # noqa: BLE001 - TVM re-raises the refusal as its own type
            assert NOT_ALLOWED in str(err), (name, err)
        else:
            answered.add(name)
    assert answered == ALLOWED
    for odd in ("", "x" * 5000, "tvm.rpc.server.upload "):
        with pytest.raises(Exception, match=NOT_ALLOWED):  # noqa: PT011
            session.get_function(odd)


def _lookup(name: bytes, type_index: int = 8, count: int = 1, inner: bytes = b"") -> bytes:
    return struct.pack("<ii", count, type_index) + inner + struct.pack("<Q", len(name)) + name


@pytest.mark.parametrize("body, message", [
    (_lookup(b"tvm.rpc.server.upload\0ffi.ModuleWriteToFile"), "malformed function lookup"),  # TVM reads to the NUL
    (_lookup(b"tvm.rpc.server.upload", count=2), "malformed function lookup"),
    (_lookup(b"tvm.rpc.server.upload") + b"x", "malformed function lookup"),
    (_lookup(b"tvm.rpc.server.upload")[:-3], "malformed function lookup"),
    (_lookup(b"tvm.rpc.server.upload", type_index=9), "a function name that is not a string"),
    (_lookup(b"tvm.rpc.server.upload", type_index=65, inner=struct.pack("<I", 66)), "malformed function name"),
    (_lookup(b"\xff\xfe"), "not UTF-8"),
    (b"\x01", "malformed function lookup"),
])
def test_the_gate_refuses_lookups_it_cannot_read_exactly(body, message):
    from adreno.farm.rpc_gate import Refused, RequestGate

    gate = RequestGate(None)
    with pytest.raises(Refused, match=message):
        gate.check(9, body)
    gate.check(9, _lookup(b"tvm.rpc.server.upload"))
    gate.check(9, _lookup(b"tvm.rpc.server.upload", type_index=11, inner=struct.pack("<I", 65)))


def test_a_session_constructor_is_refused_before_it_runs(farm, session, tmp_path):  # noqa: ARG001 - holds one agent
    """The first packet of a session names a constructor that TVM would look up among all globals and call with
    the client's arguments: the gate refuses any, and the directory it would have removed is still there."""
    from tvm import rpc

    from adreno.farm.tracker import TrackerClient

    victim = tmp_path / "victim"
    victim.mkdir()
    with TrackerClient(farm.tracker) as tracker:
        lease = tracker.request(farm.key, timeout=30)  # the agent `session` does not hold
    with pytest.raises(Exception, match="a session constructor is not allowed"):  # noqa: PT011
        rpc.connect(lease.host, lease.port, key=lease.matchkey,
                    session_constructor_args=["s_tir.meta_schedule.remove_build_dir", str(victim)])
    assert victim.is_dir()


def test_an_uploaded_module_loads_runs_and_is_timed(session, tmp_path):
    """What a measurement through TVM's runtime needs passes the gate: upload, load_module, a function of the
    module, time_evaluator; timing a global by name (no module) does not."""
    import numpy as np
    import tvm
    from tvm import te

    a = te.placeholder((4,), name="a", dtype="float32")
    b = te.compute((4,), lambda i: a[i] + 1.0, name="b")
    tvm.compile(te.create_prim_func([a, b]), target="llvm").export_library(str(tmp_path / "add.so"))
    session.upload(str(tmp_path / "add.so"))
    module = session.load_module("add.so")
    device = session.cpu()
    x = tvm.runtime.tensor(np.arange(4, dtype=np.float32), device)
    y = tvm.runtime.tensor(np.zeros(4, dtype=np.float32), device)
    module["main"](x, y)
    np.testing.assert_array_equal(y.numpy(), np.arange(4, dtype=np.float32) + 1)
    assert module.time_evaluator("main", device, number=2, repeat=1)(x, y).mean > 0
    evaluator = session.get_function("runtime.RPCTimeEvaluator")
    with pytest.raises(Exception, match="time_evaluator of the global"):  # noqa: PT011
        evaluator(None, "ffi.ModuleLoadFromFile", 1, 0, 1, 1, 0, 0, 0, 0, 0, "")
    with pytest.raises(Exception, match="pre-processing function"):  # noqa: PT011
        evaluator(module, "main", 1, 0, 1, 1, 0, 0, 0, 0, 0, "ffi.ModuleWriteToFile")


def _register(tracker: str, key: str, reported) -> int:
    """One registration in TVM's tracker protocol, as a device server sends it; the tracker's answer code."""
    import socket as sockets

    from tvm.rpc import base

    host, port = tracker.split(":")
    with sockets.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
        assert struct.unpack("<i", base.recvall(sock, 4))[0] == base.RPC_TRACKER_MAGIC
        base.sendjson(sock, [base.TrackerCode.PUT, key, [9, f"{key}:rogue"], reported])
        return base.recvjson(sock)


def test_a_registration_without_the_farm_token_is_refused(farm):
    """Any loopback process could register a server under the farm's key and get the next client: without the
    token (or with another) the tracker refuses it; with it, it accepts, and the token is in no summary."""
    from tvm.rpc.base import TrackerCode

    from adreno.farm.token import with_token
    from adreno.farm.tracker import TrackerClient

    assert _register(farm.tracker, farm.key, None) == TrackerCode.FAIL
    assert _register(farm.tracker, farm.key, "127.0.0.1") == TrackerCode.FAIL
    assert _register(farm.tracker, farm.key, with_token("127.0.0.1", "not-the-token")) == TrackerCode.FAIL
    assert _register(farm.tracker, "a-new-key", None) == TrackerCode.FAIL
    assert _register(farm.tracker, farm.key, with_token("127.0.0.1", farm.token)) == TrackerCode.SUCCESS
    with TrackerClient(farm.tracker) as client:
        summary = client.summary()
    assert farm.token not in json.dumps(summary) and "adreno-token" not in json.dumps(summary)
    assert all(s["addr"][0] == "127.0.0.1" for s in summary["server_info"])


def test_a_phone_registers_through_the_relay_that_adds_the_token(farm, tmp_path):
    """A phone's `tvm_rpc` cannot carry the token (it reports only an IP address): `adreno farm android` points
    its `adb reverse` at a relay that adds it. Stand-in for the phone: TVM's own RPC server, which registers the
    same way; straight at the tracker it is refused, through the relay it is registered, with no token shown."""
    from adreno.farm.common import free_port, kill_group, python_module_command, spawn
    from adreno.farm.relay import RegistrationRelay
    from adreno.farm.tracker import TrackerClient, count_servers

    def registered(key):
        with TrackerClient(farm.tracker) as client:
            return count_servers(client.summary(), key)

    tracker_port = int(farm.tracker.split(":")[1])
    with RegistrationRelay(("127.0.0.1", tracker_port), farm.token) as relay:
        servers = []
        try:
            for key, port in (("phone-direct", tracker_port), ("phone-relayed", relay.port)):
                server_port = free_port()
                servers.append(spawn(python_module_command(
                    "tvm.exec.rpc_server", "--host", "127.0.0.1", "--port", str(server_port), "--port-end",
                    str(server_port + 1), "--tracker", f"127.0.0.1:{port}", "--key", key),
                    str(tmp_path / f"{key}.log")))
            deadline = time.monotonic() + 60
            while registered("phone-relayed") < 1 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert registered("phone-relayed") == 1 and registered("phone-direct") == 0
            with TrackerClient(farm.tracker) as client:
                assert farm.token not in json.dumps(client.summary())
        finally:
            for server in servers:
                kill_group(server, wait=5)


def test_the_tracker_makes_a_token_and_prints_it_once(tmp_path):
    """Without ADRENO_FARM_TOKEN, `adreno farm tracker` makes one and prints it once; an agent given it registers."""
    from adreno.farm.common import free_port, kill_group, python_module_command, spawn, wait_port
    from adreno.farm.tracker import TrackerClient, count_servers

    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "ADRENO_FARM_TOKEN"}
    log = tmp_path / "tracker.log"
    tracker = spawn(python_module_command("adreno.farm.tracker", "--port", str(port), "--silent"), str(log), env=env)
    agent = None
    try:
        assert wait_port("127.0.0.1", port, 30)
        deadline = time.monotonic() + 10
        while "register with the token" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        text = log.read_text()
        token = text.split("register with the token ", 1)[1].split()[0]
        assert len(token) >= 32 and text.count(token) == 2  # the line names it, then shows the export
        agent_port = free_port(span=5)
        agent = spawn(python_module_command("adreno.farm.agent", "--tracker", f"127.0.0.1:{port}", "--key",
                                            "tokened", "--port", str(agent_port), "--port-end", str(agent_port + 5)),
                      str(tmp_path / "agent.log"), env={**env, "ADRENO_FARM_TOKEN": token})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with TrackerClient(f"127.0.0.1:{port}") as client:
                if count_servers(client.summary(), "tokened"):
                    break
            time.sleep(0.2)
        with TrackerClient(f"127.0.0.1:{port}") as client:
            assert count_servers(client.summary(), "tokened") == 1, (tmp_path / "agent.log").read_text()
    finally:
        for proc in (agent, tracker):
            if proc is not None:
                kill_group(proc, wait=5)
