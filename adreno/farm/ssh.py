"""SSH hosts (paramiko): reach devices on other machines without exposing TVM RPC to the network.

`adreno farm ssh user@host` connects (host keys verified against known_hosts; an unknown key is refused unless
`--accept-new-host-key`, a changed key always), then per remote agent:

* a **reverse forward** remote 127.0.0.1:T -> local tracker, so the remote agent registers at our tracker;
* the agent started remotely (`python -m adreno.farm.agent`, or `-m adreno.cli farm android` for phones
  plugged into that host) bound to the remote 127.0.0.1:P, reporting itself as `127.0.0.2:P`;
* a **local forward** 127.0.0.2:P -> remote 127.0.0.1:P, so the address the tracker hands out reaches it.
  (127.0.0.2 is loopback too; using it keeps P free on this side even when "remote" is this machine.)

The link sends keepalives and a watcher notices when it drops (`dropped` event, `on_drop` callback);
`serve_ssh` then reconnects with back-off and restarts the remote side.

Run the link in its own process (`adreno farm ssh`), not in the process that makes RPC calls through it: TVM's
RPC client holds the GIL while it waits for a reply, which would starve the tunnel's Python copier threads.
"""

from __future__ import annotations

import os
import select
import shlex
import socket
import threading

from .common import LAST_PORT, FarmError, HostKeyError, TunnelError, check_port, format_addr, port_is_free
from .token import TOKEN_ENV, checked_token

LOCAL_ALIAS = "127.0.0.2"


def _pump(a, b, stop: threading.Event) -> None:
    """Copy bytes both ways between two socket-likes (sockets or paramiko channels) until either side closes:
    one blocking copier thread per direction (select() on a paramiko channel can miss buffered data)."""

    def _copy(source, sink):
        try:
            while not stop.is_set():
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except (OSError, EOFError):
            pass
        finally:
            for end in (a, b):
                try:
                    end.close()
                except Exception:  # noqa: BLE001
                    pass

    threading.Thread(target=_copy, args=(b, a), daemon=True).start()
    _copy(a, b)


class SSHLink:
    """One SSH connection with its port forwards and remote processes."""

    def __init__(self, host: str, user: str | None = None, port: int = 22, key_filename: str | None = None,
                 known_hosts: str | None = None, accept_new_host_key: bool = False, keepalive: float = 5.0,
                 timeout: float = 10.0):
        self.host, self.user, self.port = host, user, port
        self.key_filename, self.accept_new_host_key = key_filename, accept_new_host_key
        self.known_hosts = known_hosts or os.path.expanduser("~/.ssh/known_hosts")
        self.keepalive, self.timeout = keepalive, timeout
        self.client = None
        self.dropped = threading.Event()
        self._stop = threading.Event()
        self._listeners: list[socket.socket] = []
        self._channels: list = []
        self.on_drop = None

    @property
    def where(self) -> str:
        return f"{self.user + '@' if self.user else ''}{self.host}:{self.port}"

    def connect(self) -> "SSHLink":
        import paramiko

        client = paramiko.SSHClient()
        self._load_known_hosts(client)
        refused = {}

        class _Policy(paramiko.MissingHostKeyPolicy):
            def missing_host_key(policy, client_, hostname, key):  # noqa: N805
                fingerprint = key.fingerprint if hasattr(key, "fingerprint") else key.get_base64()[:32]
                if not self.accept_new_host_key:
                    refused["text"] = (f"the SSH host {hostname} presented an unknown {key.get_name()} key "
                                       f"({fingerprint}); it is not in {self.known_hosts}. Check the fingerprint "
                                       f"with the host's owner, then rerun with --accept-new-host-key (or add it "
                                       f"with ssh-keyscan)")
                    raise paramiko.SSHException(refused["text"])
                client_.get_host_keys().add(hostname, key.get_name(), key)
                os.makedirs(os.path.dirname(os.path.abspath(self.known_hosts)), exist_ok=True)
                client_.save_host_keys(self.known_hosts)

        client.set_missing_host_key_policy(_Policy())
        try:
            client.connect(self.host, port=self.port, username=self.user, key_filename=self.key_filename,
                           timeout=self.timeout, banner_timeout=self.timeout, auth_timeout=self.timeout,
                           look_for_keys=self.key_filename is None, allow_agent=self.key_filename is None)
        except paramiko.BadHostKeyException as err:
            raise HostKeyError(f"the SSH host {self.where} presented a key that differs from {self.known_hosts} "
                               f"({err}); refusing: someone may be intercepting the connection") from None
        except paramiko.SSHException as err:
            if "text" in refused:
                raise HostKeyError(refused["text"]) from None
            raise TunnelError(f"SSH to {self.where} failed: {err}") from None
        except OSError as err:
            raise TunnelError(f"cannot reach SSH at {self.where}: {err}") from None
        transport = client.get_transport()
        transport.set_keepalive(max(1, int(self.keepalive)))
        self.client = client
        threading.Thread(target=self._watch, name=f"ssh-watch-{self.host}", daemon=True).start()
        return self

    def _load_known_hosts(self, client) -> None:
        """Read known_hosts (a missing file is an empty one): a file paramiko cannot read (binary, a directory,
        unreadable) is the user's to fix, so it is a FarmError naming the file, not paramiko's traceback."""
        if not os.path.exists(self.known_hosts):
            return
        try:
            client.load_host_keys(self.known_hosts)
        except (OSError, UnicodeError) as err:
            raise FarmError(f"cannot read the known-hosts file {self.known_hosts}: "
                            f"{getattr(err, 'strerror', None) or err}; give an OpenSSH known_hosts file "
                            "(--known-hosts)") from None

    def _watch(self) -> None:
        """Notice a dropped link: the transport dies, or a keepalive round trip fails."""
        transport = self.client.get_transport()
        while not self._stop.is_set():
            self._stop.wait(min(1.0, self.keepalive))
            if self._stop.is_set():
                return
            alive = transport is not None and transport.is_active()
            if alive:
                try:
                    transport.send_ignore()
                except Exception:  # noqa: BLE001
                    alive = False
            if not alive:
                self.dropped.set()
                if self.on_drop:
                    self.on_drop(self)
                return

    def is_alive(self) -> bool:
        transport = self.client.get_transport() if self.client else None
        return bool(transport and transport.is_active()) and not self.dropped.is_set()

    def run(self, command: str, timeout: float = 30.0) -> tuple[int, str]:
        """Run a command to completion on the host: (exit status, stdout+stderr)."""
        _, stdout, stderr = self.client.exec_command(command, timeout=timeout, get_pty=False)
        text = stdout.read().decode(errors="replace") + stderr.read().decode(errors="replace")
        return stdout.channel.recv_exit_status(), text

    def start(self, command: str):
        """Start a long-running command; it gets a pty so it is hung up (SIGHUP) when the channel closes."""
        channel = self.client.get_transport().open_session()
        channel.get_pty()
        channel.exec_command(command)
        self._channels.append(channel)
        return channel

    def forward_remote(self, remote_port: int, local_host: str, local_port: int) -> int:
        """Remote 127.0.0.1:remote_port -> local_host:local_port (e.g. the tracker); returns the remote port."""
        transport = self.client.get_transport()

        def _handler(channel, origin, server):  # noqa: ARG001 - paramiko's port-forward handler signature
            try:
                sock = socket.create_connection((local_host, local_port), timeout=self.timeout)
                sock.settimeout(None)
            except OSError:
                channel.close()
                return
            threading.Thread(target=_pump, args=(channel, sock, self._stop), daemon=True).start()

        try:
            return transport.request_port_forward("127.0.0.1", remote_port, handler=_handler)
        except Exception as err:  # noqa: BLE001 - paramiko.SSHException
            raise TunnelError(f"{self.where} refused the reverse forward of port {remote_port}: {err}") from None

    def forward_local(self, local_host: str, local_port: int, remote_host: str, remote_port: int) -> int:
        """local_host:local_port -> remote_host:remote_port through the link; returns the bound local port."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((local_host, local_port))
        except OSError as err:
            listener.close()
            raise TunnelError(f"cannot listen on {local_host}:{local_port} for the tunnel: {err}") from None
        listener.listen(16)
        self._listeners.append(listener)
        bound = listener.getsockname()[1]

        def _accept():
            while not self._stop.is_set():
                try:
                    readable, _, _ = select.select([listener], [], [], 0.5)
                    if not readable:
                        continue
                    conn, origin = listener.accept()
                except OSError:
                    return
                try:
                    channel = self.client.get_transport().open_channel(
                        "direct-tcpip", (remote_host, remote_port), origin, timeout=self.timeout)
                except Exception:  # noqa: BLE001 - the link is gone or the remote port is closed
                    conn.close()
                    continue
                threading.Thread(target=_pump, args=(conn, channel, self._stop), daemon=True).start()

        threading.Thread(target=_accept, name=f"ssh-forward-{bound}", daemon=True).start()
        return bound

    def close(self) -> None:
        self._stop.set()
        for listener in self._listeners:
            try:
                listener.close()
            except OSError:
                pass
        for channel in self._channels:
            try:
                channel.close()
            except Exception:  # noqa: BLE001
                pass
        if self.client is not None:
            self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _with_token_env(command: str, token: str) -> str:
    """`command` run with the farm's token in its environment (the remote agents register with it)."""
    return f"{TOKEN_ENV}={shlex.quote(token)} {command}"


def remote_agent_command(python: str, tracker_port: int, agent_port: int, token: str, key: str | None = None,
                         device: str | None = None, extra: list[str] | None = None) -> str:
    args = [python, "-m", "adreno.farm.agent", "--tracker", f"127.0.0.1:{tracker_port}", "--host", "127.0.0.1",
            "--port", str(agent_port), "--port-end", str(agent_port + 1), "--custom-addr", LOCAL_ALIAS]
    if key:
        args += ["--key", key]
    if device is not None:
        args += ["--device", str(device)]
    return _with_token_env(" ".join(shlex.quote(a) for a in [*args, *(extra or [])]), token)


def remote_android_command(python: str, tracker_port: int, token: str, adb: str = "adb",
                           runtime_dir: str | None = None) -> str:
    args = [python, "-m", "adreno.cli", "farm", "android", "--tracker-port", str(tracker_port), "--adb", adb]
    if runtime_dir:
        args += ["--runtime", runtime_dir]
    return _with_token_env(" ".join(shlex.quote(a) for a in args), token)


def _free_port_both(link: SSHLink, start: int, python: str = "python3") -> int:
    """A port free on the remote 127.0.0.1 and on the local alias address."""
    for port in range(start, min(start + 200, LAST_PORT + 1)):
        if not port_is_free(LOCAL_ALIAS, port):
            continue
        code, _ = link.run(f"{shlex.quote(python)} -c "
                           f"'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", {port}))' "
                           f"2>/dev/null || exit 1", timeout=10)
        if code == 0:
            return port
    raise TunnelError(f"no free port from {start} on both sides of {link.where}")


def attach_remote_agents(link: SSHLink, tracker: tuple[str, int], token: str, agents: int = 1,
                         python: str = "python3",
                         key: str | None = None, device: str | None = None, agent_port: int = 9400,
                         remote_tracker_port: int = 0, android: bool = False, adb: str = "adb",
                         runtime_dir: str | None = None, extra: list[str] | None = None) -> dict:
    """Open the tunnels and start the remote side; returns what was set up."""
    remote_tracker = link.forward_remote(remote_tracker_port, tracker[0], tracker[1])
    setup = {"remote_tracker_port": remote_tracker, "agents": []}
    if android:
        link.start(remote_android_command(python, remote_tracker, token, adb, runtime_dir))
        setup["android"] = True
        return setup
    port = agent_port
    for _ in range(agents):
        port = _free_port_both(link, port, python)
        link.forward_local(LOCAL_ALIAS, port, "127.0.0.1", port)
        link.start(remote_agent_command(python, remote_tracker, port, token, key, device, extra))
        setup["agents"].append(port)
        port += 1
    return setup


def _check_target(host: str, port: int, agent_port: int, key_filename: str | None) -> None:
    """What `serve_ssh` can tell is wrong before it connects: otherwise each is one more "cannot reach" that the
    reconnect loop retries forever."""
    if not host:
        raise FarmError("[USER@]HOST names no host: give one, e.g. user@192.168.1.20")
    check_port(port, "--ssh-port")
    check_port(agent_port, "--agent-port")
    if key_filename is not None and not os.path.isfile(key_filename):
        raise FarmError(f"-i {key_filename}: no such private key file")


def serve_ssh(target: str, tracker: tuple[str, int], token: str | None, stop: threading.Event | None = None,
              reconnect: bool = True, log=print, **options) -> None:
    """The body of `adreno farm ssh`: connect, attach, watch; reconnect with back-off when the link drops. Without
    `reconnect`, a host that cannot be reached or attached raises its TunnelError (the CLI's one line and exit
    status 2, as an unreachable tracker or phone); a link that drops after attaching ends it normally."""
    stop = stop or threading.Event()
    user, _, host = target.rpartition("@")
    link_options = {k: options.pop(k) for k in ("port", "key_filename", "known_hosts", "accept_new_host_key",
                                                  "keepalive") if k in options}
    _check_target(host, link_options.get("port", 22), options.get("agent_port", 9400),
                  link_options.get("key_filename"))
    token = checked_token(token, "adreno farm ssh")
    backoff = 1.0
    while not stop.is_set():
        link = SSHLink(host, user or None, **link_options)
        try:
            link.connect()
            setup = attach_remote_agents(link, tracker, token, **options)
            log(f"adreno farm ssh: {link.where} attached to tracker {format_addr(tracker)}: {setup}")
            backoff = 1.0
            while not stop.is_set() and not link.dropped.wait(0.5):
                pass
            if link.dropped.is_set():
                log(f"adreno farm ssh: the link to {link.where} dropped")
        except HostKeyError:
            link.close()
            raise
        except TunnelError as err:
            if not reconnect:
                raise
            log(f"adreno farm ssh: {err}")
        finally:
            link.close()
        if not reconnect or stop.is_set():
            return
        log(f"adreno farm ssh: reconnecting to {host} in {backoff:.0f} s")
        stop.wait(backoff)
        backoff = min(backoff * 2, 60.0)
