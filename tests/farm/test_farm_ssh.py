"""SSH hosts through paramiko against a real OpenSSH sshd on 127.0.0.1 (throwaway keys, see conftest)."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from adreno.farm.common import HostKeyError
from adreno.farm.deadline import Timeouts
from adreno.runners.rpc import RPCRunner
from adreno.farm.ssh import SSHLink
from adreno.runners.interface import RunInput
from tests.farm.conftest import wait_for


def known_hosts_with(sshd, path):
    path.write_text(f"[127.0.0.1]:{sshd['port']} {sshd['host_key_type']} {sshd['host_key_b64']}\n")
    return str(path)


def link_for(sshd, known_hosts, **kw):
    return SSHLink("127.0.0.1", sshd["user"], sshd["port"], key_filename=sshd["client_key"], known_hosts=known_hosts,
                   keepalive=1, **kw)


def test_unknown_host_key_is_refused(sshd, tmp_path):
    known = tmp_path / "known_hosts"
    with pytest.raises(HostKeyError, match="--accept-new-host-key"):
        link_for(sshd, str(known)).connect()
    assert not known.exists()


def test_changed_host_key_is_refused(sshd, tmp_path):
    known = tmp_path / "known_hosts"
    other = "AAAAC3NzaC1lZDI1NTE5AAAAIBp0cmFja2VyLWZha2Uta2V5LWZvci10ZXN0cy0wMDAw"
    known.write_text(f"[127.0.0.1]:{sshd['port']} ssh-ed25519 {other}\n")
    with pytest.raises(HostKeyError, match="differs"):
        link_for(sshd, str(known), accept_new_host_key=True).connect()


def test_accept_new_host_key_records_it(sshd, tmp_path):
    known = tmp_path / "known_hosts"
    with link_for(sshd, str(known), accept_new_host_key=True).connect() as link:
        assert link.run("echo hello")[1].strip() == "hello"
    assert sshd["host_key_b64"] in known.read_text()
    with link_for(sshd, str(known)).connect() as link:  # now known: no flag needed
        assert link.is_alive()


def test_tunnel_carries_a_real_rpc_session(sshd, tmp_path, farm2, tiny_artifact):
    """`adreno farm ssh` (its own process, as in use: TVM's RPC client holds the GIL while it waits, so the tunnel
    must not live in the runner's process) starts an agent over SSH; it registers at the local tracker through the
    reverse forward, and the runner reaches it through the local forward 127.0.0.2:P -> remote 127.0.0.1:P."""
    from adreno.farm.common import kill_group, python_module_command, spawn
    from adreno.farm.tracker import farm_status

    known = known_hosts_with(sshd, tmp_path / "known_hosts")
    cli = spawn(python_module_command(
        "adreno.cli", "farm", "ssh", f"{sshd['user']}@127.0.0.1", "--ssh-port", str(sshd["port"]),
        "-i", sshd["client_key"], "--known-hosts", known, "--tracker", farm2.tracker, "--agents", "1",
        "--agent-port", "9950", "--key", "pocl-ssh", "--remote-python", sys.executable, "--no-reconnect"),
        str(tmp_path / "farm_ssh.log"), env=farm2.env)

    def _registered():
        return [d for d in farm_status(farm2.tracker).devices if d.key == "pocl-ssh"]

    try:
        devices = wait_for(_registered, timeout=30, interval=0.2)
        assert devices and devices[0].host == "127.0.0.2", (tmp_path / "farm_ssh.log").read_text()
        runner = RPCRunner(farm2.tracker, "pocl-ssh", timeouts=Timeouts(request=20, run=20))
        try:
            results = runner.run_batch([RunInput(str(tiny_artifact), repeat=1, warmup=0, tag=f"s{i}")
                                        for i in range(3)])
        finally:
            runner.close()
        assert all(r.ok for r in results), [r.error for r in results]
        assert all(r.device == f"pocl-ssh@127.0.0.2:{devices[0].port}" for r in results)
    finally:
        kill_group(cli)
    # the link closed: the remote agent was hung up and left the tracker
    assert wait_for(lambda: not _registered(), timeout=20, interval=0.2)


def test_a_dropped_link_is_noticed(sshd, tmp_path):
    known = known_hosts_with(sshd, tmp_path / "known_hosts")
    link = link_for(sshd, known).connect()
    try:
        notified = []
        link.on_drop = notified.append
        # kill this connection's sshd session process (children of the listening sshd), not the listener
        import psutil

        children = psutil.Process(sshd["proc"].pid).children(recursive=False)
        assert children
        for child in children:
            os.kill(child.pid, signal.SIGKILL)
        assert link.dropped.wait(15)
        assert notified == [link] and not link.is_alive()
    finally:
        link.close()
