"""Bad addresses and files given to `adreno farm ...` are one `error:` line on stderr and exit status 2, at once:
no traceback, no server started, no agent worker restarted forever, no "cannot reach" on stdout with status 0."""

from __future__ import annotations

import socket
import os
import subprocess
import sys

import pytest

from adreno.farm.common import FarmError, check_listen, check_port, free_port


def farm(*args: str, timeout: float = 30, module: str = "adreno.cli farm", token: str | None = "a-token"
         ) -> subprocess.CompletedProcess:
    """`adreno farm ARGS`, or with `module` another entry point (`adreno.farm.agent`: `python -m adreno.farm.agent`),
    with `token` as the farm's registration token (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != "ADRENO_FARM_TOKEN"}
    if token is not None:
        env["ADRENO_FARM_TOKEN"] = token
    return subprocess.run([sys.executable, "-m", *module.split(), *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, env=env)


def assert_one_error(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    """Exit status 2, stderr one `error:` line naming every fragment, nothing else (not even a blank line)."""
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    assert all(f in lines[0] for f in fragments), lines[0]
    return lines[0]


@pytest.mark.parametrize("args, fragment", [
    (["--port", "99999"], "--port 99999"),
    (["--port", "-5"], "--port -5"),
    (["--port", "9000", "--port-end", "8000"], "--port-end 8000"),
    (["--port", "65535", "--port-end", "65537"], "--port-end 65537"),
    (["--host", "nonsense.invalid", "--expose"], "does not resolve"),
])
def test_the_agent_refuses_a_bad_address_at_once(args, fragment):
    """These once started the supervisor, whose worker failed to bind and was restarted forever (a traceback each
    time): the timeout here is that hang."""
    assert_one_error(farm("agent", "--key", "pocl-cpu", *args, timeout=30), fragment)


@pytest.mark.parametrize("args, fragment", [
    (["--port", "99999"], "--port 99999"),
    (["--port", "-1"], "--port -1"),
    (["--port", "0"], "--port 0"),
    (["--host", "nonsense.invalid", "--expose"], "does not resolve"),
    (["--host", "", "--expose"], "does not resolve"),
    (["--host", "8.8.8.8", "--expose"], "address of this machine"),
])
def test_the_tracker_refuses_a_bad_address(args, fragment):
    assert_one_error(farm("tracker", *args), fragment)


def test_a_busy_tracker_port_is_one_line():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        assert_one_error(farm("tracker", "--port", str(port)), f"port {port}", "in use")


@pytest.mark.parametrize("module", ["adreno.farm.agent", "adreno.farm.tracker"])
@pytest.mark.parametrize("args, fragment", [
    (["--port", "99999"], "--port 99999"),
    (["--port", "x"], "argument --port: invalid int value: 'x'"),
    (["--host", "8.8.8.8"], "--expose"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_the_servers_run_as_modules_refuse_in_one_line(module, args, fragment):
    """`python -m adreno.farm.agent` and `python -m adreno.farm.tracker` (how the agent's supervisor and a local farm
    start them) refuse as `adreno farm` does, not with a traceback and status 1."""
    assert_one_error(farm(*args, module=module), fragment)


@pytest.mark.parametrize("module, range_end", [("adreno.farm.agent", ["--port-end"]), ("adreno.farm.tracker", [])])
def test_a_busy_port_is_one_line_for_the_modules_too(module, range_end):
    """The agent listens on a free port of [--port, --port-end): a range of the busy port alone."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        proc = farm("--port", str(port), *[a for flag in range_end for a in (flag, str(port + 1))], module=module)
        assert_one_error(proc, f"port {port}", "in use")


def test_the_exposure_rule_comes_before_the_address_probe():
    """A non-loopback --host without --expose is refused for exposure (naming --expose), whatever the address."""
    assert_one_error(farm("tracker", "--host", "8.8.8.8"), "--expose")


def test_check_listen_returns_the_range_end():
    port = free_port()
    assert check_listen("127.0.0.1", port, None, "agent", False) == min(port + 100, 65536)
    assert check_listen("127.0.0.1", port, port + 1, "tracker", False) == port + 1
    assert check_listen("127.0.0.1", 65535, None, "agent", False) == 65536
    with pytest.raises(FarmError, match="--flag 65536"):
        check_port(65536, "--flag")


def test_a_non_executable_adb_is_one_line(tmp_path):
    adb = tmp_path / "adb"
    adb.write_text("not a program\n")
    adb.chmod(0o644)
    assert_one_error(farm("android", "--adb", str(adb), "--list"), str(adb), "cannot run adb")


@pytest.mark.parametrize("args, fragment", [
    (["--tracker-port", "0"], "--tracker-port 0"),
    (["--base-port", "70000"], "--base-port 70000"),
])
def test_android_ports_are_checked_before_adb_runs(args, fragment):
    assert_one_error(farm("android", "--adb", "/nonexistent/adb", *args), fragment)


@pytest.mark.parametrize("args, fragment", [
    (["user@127.0.0.1", "--ssh-port", "99999"], "--ssh-port 99999"),
    (["user@127.0.0.1", "--ssh-port", "0"], "--ssh-port 0"),
    (["127.0.0.1", "--agent-port", "0"], "--agent-port 0"),
    ([""], "names no host"),
    (["user@"], "names no host"),
    (["127.0.0.1", "-i", "/nonexistent/key"], "/nonexistent/key"),
    (["127.0.0.1", "--agents", "-1"], "--agents"),
    (["127.0.0.1", "--agents", "0"], "--agents"),
    (["127.0.0.1", "--keepalive", "-1"], "--keepalive"),
    (["127.0.0.1", "--tracker", "127.0.0.1:0"], "127.0.0.1:0"),
])
def test_ssh_refuses_bad_options_up_front(args, fragment):
    """Checked before connecting, with or without --no-reconnect (the reconnect loop would retry them forever)."""
    assert_one_error(farm("ssh", *args, timeout=30), fragment)


@pytest.mark.parametrize("args", [["agent", "--port", "0"], ["ssh", "user@127.0.0.1", "--no-reconnect"],
                                  ["agent"]])
def test_a_device_server_without_the_farm_token_is_refused(args):
    """A server without ADRENO_FARM_TOKEN would be refused by the tracker at every registration: it says so in one
    line before it starts (a bad option is still reported first)."""
    line = assert_one_error(farm(*args, token=None))
    assert ("--port 0 is not a TCP port" in line) if "0" in args else ("ADRENO_FARM_TOKEN" in line)


def test_an_unreachable_ssh_host_without_reconnect_fails():
    """With --no-reconnect, a host that cannot be reached ends with status 2 and the reason on stderr (it was
    status 0 and a line on stdout)."""
    port = free_port()
    proc = farm("ssh", "user@127.0.0.1", "--ssh-port", str(port), "--no-reconnect")
    assert_one_error(proc, "cannot reach SSH", f"127.0.0.1:{port}")
    assert proc.stdout == ""


def test_a_binary_known_hosts_file_is_one_line(tmp_path):
    known = tmp_path / "known_hosts"
    known.write_bytes(b"PK\x03\x04\x2d\x00\x00\x00\x00\x00\xb9\xff\xfe" * 8)
    proc = farm("ssh", "user@127.0.0.1", "--known-hosts", str(known), "--ssh-port", str(free_port()),
                "--no-reconnect")
    assert_one_error(proc, "known-hosts file", str(known))
