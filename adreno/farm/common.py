"""What every farm backend shares: its errors, address parsing, the loopback rule, process helpers.

Security: TVM RPC has no authentication, and a client can write files and run code on the server. Every farm
process binds to 127.0.0.1 unless told otherwise; `check_listen` refuses any other bind without --expose and
warns even with it.
Remote devices are reached through SSH tunnels (`adreno/farm/ssh.py`), never by opening a port to the network.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import time

from ..errors import AdrenoError
from ..support.processes import popen_child_setup

DEFAULT_TRACKER_PORT = 9190
DEFAULT_AGENT_PORT = 9090


class FarmError(AdrenoError):
    """Something in the device farm (tracker, agent, tunnel, phone) failed; the message says what and where."""


class TrackerUnreachable(FarmError):
    """No RPC tracker answers at the given address."""


class NoDeviceError(FarmError):
    """The tracker has no free device of the requested key within the deadline."""


class HostKeyError(FarmError):
    """An SSH host presented a key that is not in known_hosts (or one that differs from it)."""


class TunnelError(FarmError):
    """An SSH connection or one of its port forwards failed or dropped."""


class AdbError(FarmError):
    """adb failed, or a phone is missing or not set up for the farm."""


LAST_PORT = 65535


def is_port(port: int) -> bool:
    """A TCP port a farm process can listen on or connect to: 0 (\"any port\") means nothing to a client, and
    past 65535 `bind()` raises OverflowError deep inside TVM."""
    return 1 <= port <= LAST_PORT


def check_port(port: int, flag: str) -> int:
    """The one check of every farm port option (`--port`, `--ssh-port`, `--base-port`, ...), before anything
    starts: a bad port otherwise surfaces as a traceback from TVM's bind or a connect that never succeeds."""
    if not is_port(port):
        raise FarmError(f"{flag} {port} is not a TCP port: give one in 1..{LAST_PORT}")
    return port


def parse_addr(text: str, default_port: int = DEFAULT_TRACKER_PORT) -> tuple[str, int]:
    """'host:port', 'host' or ':port' -> (host, port); host defaults to 127.0.0.1."""
    text = (text or "").strip()
    if not text:
        return "127.0.0.1", default_port
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, default_port
    if not port.isdigit() or not is_port(int(port)):
        raise FarmError(f"bad address {text!r}: expected HOST:PORT with a port in 1..{LAST_PORT}, e.g. "
                        f"127.0.0.1:{default_port}")
    return host or "127.0.0.1", int(port)


def format_addr(addr: tuple[str, int]) -> str:
    return f"{addr[0]}:{addr[1]}"


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


EXPOSE_HELP = ("TVM RPC has no authentication: any client that reaches a farm port can lease devices, and on an "
               "agent's port upload files and run them (a shared library it loads runs as this user).")


def check_bind(host: str, what: str, expose: bool) -> None:
    """The one rule for every farm server (tracker, agent): a bind beyond loopback needs `expose`, since TVM RPC
    lets anyone who reaches the port in (`check_listen` warns even then)."""
    if not is_loopback(host) and not expose:
        raise FarmError(f"--host {host} exposes the {what} beyond this machine: {EXPOSE_HELP} Reach remote devices "
                        "through `adreno farm ssh`, or pass --expose if this network is yours alone")


def check_listen(host: str, port: int, port_end: int | None, what: str, expose: bool) -> int:
    """Everything a farm server (tracker, agent) checks before it starts, in one place: the port range, the
    loopback rule (`check_bind`), and that `host` is an address of this machine with a free port in the range.
    TVM finds these out only when it binds: a traceback in the tracker, and in an agent a worker that fails and
    is restarted forever. Returns the end of the range (exclusive; by default port+100, at most the last port)."""
    check_port(port, "--port")
    if port_end is None:
        port_end = min(port + 100, LAST_PORT + 1)
    elif not port < port_end <= LAST_PORT + 1:
        raise FarmError(f"--port-end {port_end} must be above --port {port} and at most {LAST_PORT + 1} "
                        f"(the server listens on a port in [--port, --port-end))")
    check_bind(host, what, expose)
    _check_free_port(host, port, port_end)
    warn_if_exposed(host, what)  # after the checks: a refused address prints its error line alone
    return port_end


def _check_free_port(host: str, port: int, port_end: int) -> None:
    """A port in [port, port_end) that `host` can bind, probed as TVM binds (its address family, SO_REUSEADDR), so
    an unknown host, an address of another machine or a busy range is one line, not a server that never starts."""
    try:
        family = socket.getaddrinfo(host, port, 0, 0, socket.IPPROTO_TCP)[0][0]
    except (socket.gaierror, UnicodeError) as err:
        raise FarmError(f"--host {host!r} does not resolve ({getattr(err, 'strerror', None) or err}); give an "
                        "address of this machine, e.g. 127.0.0.1") from None
    for candidate in range(port, port_end):
        err = _bind_error(host, candidate, family)
        if err is None:
            return
        if err.errno != errno.EADDRINUSE:
            raise FarmError(f"cannot listen on {host}:{candidate}: {err.strerror or err}"
                            + ("; --host must be an address of this machine, e.g. 127.0.0.1"
                               if err.errno == errno.EADDRNOTAVAIL else ""))
    where = f"port {port}" if port_end == port + 1 else f"every port in {port}..{port_end - 1}"
    raise FarmError(f"{where} on {host} is in use; pick another --port")


def warn_if_exposed(host: str, what: str, stream=None) -> bool:
    """Print the security warning for a non-loopback bind; True when it was printed."""
    if is_loopback(host):
        return False
    print(f"WARNING: the {what} binds to {host}, not loopback. TVM RPC has no authentication: anyone who can reach "
          f"this port can write files to and run code on this machine. Prefer 127.0.0.1 and an SSH tunnel "
          f"(`adreno farm ssh`).", file=stream or sys.stderr, flush=True)
    return True


def free_port(host: str = "127.0.0.1", span: int = 1) -> int:
    """A port where `span` consecutive ports are free right now on `host` (racy, as every such helper)."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind((host, 0))
            port = probe.getsockname()[1]
        if port + span >= 65535:
            continue
        if all(port_is_free(host, p) for p in range(port + 1, port + span)):
            return port
    raise FarmError(f"no {span} consecutive free ports on {host}")


def port_is_free(host: str, port: int) -> bool:
    return _bind_error(host, port) is None


def _bind_error(host: str, port: int, family=socket.AF_INET) -> OSError | None:
    """Why a socket could not bind host:port as TVM's servers bind (SO_REUSEADDR); None if it could."""
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as err:
            return err
    return None


def wait_port(host: str, port: int, timeout: float) -> bool:
    """Wait until something accepts TCP connections at host:port; False after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def python_module_command(module: str, *args: str) -> list[str]:
    """The command line that runs `python -m module args` with this interpreter."""
    return [sys.executable, "-m", module, *args]


def spawn(cmd: list[str], log_path: str | None = None, env: dict | None = None,
          die_with_parent: bool = True) -> subprocess.Popen:
    """Start a process in its own process group (so that `kill_group` ends it with all its children); by default
    it gets SIGTERM when this process dies, so a killed test run leaves no farm behind."""
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL
    try:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env,
                                preexec_fn=popen_child_setup(signal.SIGTERM) if die_with_parent else None)
    finally:
        if log_path:
            out.close()


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGTERM, wait: float = 5.0) -> None:
    """Signal a process group started by `spawn`, escalate to SIGKILL after `wait` seconds, reap the leader."""
    if proc is None:
        return
    for signum in (sig, signal.SIGKILL):
        try:
            os.killpg(proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    # The leader is reaped; children of the group that outlived it still get the SIGKILL.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
