"""Fixtures of the farm tests: a real TVM tracker and real agents on loopback, a real sshd on loopback.

Every process is started in its own process group and killed in the fixture's finalizer."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import pytest

from adreno.farm.common import free_port, wait_port


@pytest.fixture(scope="module")
def farm2(tmp_path_factory):
    """A tracker and two PoCL agents (fault injection allowed: tests only)."""
    from adreno.farm.local import LocalFarm

    farm = LocalFarm(agents=2, faults=True, log_dir=str(tmp_path_factory.mktemp("farm")))
    yield farm
    farm.close()


@pytest.fixture(scope="session")
def tiny_reference(tiny_artifact):
    """Outputs of the tiny artifact on the local PoCL device for seed 0 (the agents must reproduce them)."""
    from adreno.opencl.executor import Executor
    from adreno.artifact.format import random_inputs

    executor = Executor(str(tiny_artifact), None)
    return executor.run(random_inputs(executor.artifact.input_specs(), 0))


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """A real OpenSSH server on 127.0.0.1 with a throwaway host key and one authorized throwaway client key."""
    binary = "/usr/sbin/sshd"
    if not os.path.exists(binary) or not shutil.which("ssh-keygen"):
        pytest.skip("openssh-server is not installed (apt-get install -y openssh-server)")
    root = tmp_path_factory.mktemp("sshd")
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / name)], check=True)
    (root / "authorized_keys").write_text((root / "client_key.pub").read_text())
    os.chmod(root / "authorized_keys", 0o600)
    os.makedirs("/run/sshd", exist_ok=True)
    port = free_port()
    config = root / "sshd_config"
    config.write_text(f"""Port {port}
ListenAddress 127.0.0.1
HostKey {root / 'host_key'}
PidFile {root / 'sshd.pid'}
AuthorizedKeysFile {root / 'authorized_keys'}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
AllowTcpForwarding yes
ClientAliveInterval 2
LogLevel ERROR
""")
    from adreno.support.processes import set_parent_death_signal

    proc = subprocess.Popen([binary, "-D", "-e", "-f", str(config)], stdout=subprocess.DEVNULL,
                            stderr=open(root / "sshd.log", "wb"), stdin=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=lambda: set_parent_death_signal(signal.SIGTERM))
    if not wait_port("127.0.0.1", port, 10):
        proc.kill()
        pytest.fail(f"sshd did not start: {(root / 'sshd.log').read_text()}")
    host_pub = (root / "host_key.pub").read_text().split()
    info = {"port": port, "client_key": str(root / "client_key"), "host_key_type": host_pub[0],
            "host_key_b64": host_pub[1], "root": root, "proc": proc, "user": os.environ.get("USER", "root")}
    yield info
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


def wait_for(predicate, timeout: float, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()
