"""The farm's tracker is TVM's own RPC tracker (`tvm.rpc.tracker`); this file runs it and talks to it.

`serve_tracker` runs TVM's tracker in this process (for `adreno farm tracker`); `TrackerClient` speaks TVM's
tracker protocol (through `tvm.rpc.base`) with a deadline on every call, so a stopped tracker or an empty
queue is a clear error instead of TVM's 60 s connect retry or an unbounded wait; `farm_status` gathers
the queue and a health probe of every registered device for `adreno devices --tracker`.
"""

from __future__ import annotations

import socket
import struct
import sys
import time
from dataclasses import dataclass, field

from ..support.command_line import OneLineParser, refused
from .common import (
    DEFAULT_TRACKER_PORT,
    LAST_PORT,
    FarmError,
    NoDeviceError,
    TrackerUnreachable,
    check_listen,
    format_addr,
    parse_addr,
)
from .token import TOKEN_ENV, checked_token, farm_token, new_token, split_token, token_matches


def serve_tracker(host: str = "127.0.0.1", port: int = DEFAULT_TRACKER_PORT, port_end: int | None = None,
                  silent: bool = False, expose: bool = False) -> None:
    """Run TVM's tracker in this process until interrupted (the body of `adreno farm tracker`); a bind beyond
    loopback needs `expose` (`check_listen`: anyone reaching the tracker can lease devices), and the address is
    checked before TVM is loaded. Devices register only with the farm's token (`adreno.farm.token`):
    ADRENO_FARM_TOKEN, or one made here and printed once."""
    port_end = check_listen(host, port, port_end or min(port + 1, LAST_PORT + 1), "tracker", expose)
    given = farm_token()
    token = checked_token(given, "adreno farm tracker") if given else new_token()

    from tvm.rpc.tracker import PopenTrackerServerState

    require_token(token)
    state = PopenTrackerServerState(host, port, port_end, silent=silent)
    print(f"adreno farm tracker: TVM RPC tracker listening on {host}:{state.port}", flush=True)
    if given:
        print(f"adreno farm tracker: devices register with the token in {TOKEN_ENV}", flush=True)
    else:
        print(f"adreno farm tracker: devices register with the token {token} (printed once: give it to `adreno "
              f"farm agent`, `ssh` and `android` as {TOKEN_ENV}={token})", flush=True)
    try:
        while state.thread.is_alive():
            state.thread.join(0.5)
    except KeyboardInterrupt:
        pass


def require_token(token: str) -> None:
    """Make this process's TVM tracker refuse a server's registration (`PUT`) or report (`UPDATE_INFO`) that does
    not carry `token`, and store the address it reports without it. TVM's tracker builds one `TCPEventHandler` per
    connection from its module global and offers no hook, so the global is replaced by a subclass."""
    from tvm.rpc import tracker as tvm_tracker
    from tvm.rpc.base import TrackerCode

    tvm_handler = getattr(tvm_tracker, "_tvm_event_handler", tvm_tracker.TCPEventHandler)

    class TokenCheckingHandler(tvm_handler):
        def call_handler(self, args):
            if isinstance(args, list) and args and args[0] in (TrackerCode.PUT, TrackerCode.UPDATE_INFO):
                args = _without_token(args, token, TrackerCode)
                if args is None:
                    print(f"adreno farm tracker: refused a device registration from {self._addr[0]}: it lacks the "
                          "farm's token", file=sys.stderr, flush=True)
                    self.ret_value(TrackerCode.FAIL)
                    return
            super().call_handler(args)

    tvm_tracker._tvm_event_handler = tvm_handler
    tvm_tracker.TCPEventHandler = TokenCheckingHandler


def _without_token(args: list, token: str, codes) -> list | None:
    """`args` of a PUT or UPDATE_INFO with the reported address stripped of the token; None when the token is
    wrong or missing (an UPDATE_INFO of anything but a server carries none and passes)."""
    if args[0] == codes.PUT:
        address, presented = split_token(args[3] if len(args) > 3 else None)
        return [*args[:3], address] if token_matches(presented, token) else None
    info = args[1] if len(args) > 1 else None
    if not (isinstance(info, dict) and str(info.get("key", "")).startswith("server:")):
        return args
    reported = info.get("addr")
    if not isinstance(reported, list) or not reported:
        return None
    address, presented = split_token(reported[0])
    if not token_matches(presented, token):
        return None
    return [args[0], {**info, "addr": [address, *reported[1:]]}, *args[2:]]


@dataclass
class Lease:
    """A device handed out by the tracker: connect to (host, port) with `matchkey` within a few seconds."""

    key: str
    host: str
    port: int
    matchkey: str


class TrackerClient:
    """One connection to TVM's tracker; every call has a deadline and errors name the tracker's address."""

    def __init__(self, addr: str | tuple[str, int], timeout: float = 5.0):
        self.addr = parse_addr(addr) if isinstance(addr, str) else tuple(addr)
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._connect()

    def _connect(self) -> None:
        from tvm.rpc import base

        where = format_addr(self.addr)
        try:
            sock = socket.create_connection(self.addr, timeout=self.timeout)
        except OSError as err:
            raise TrackerUnreachable(
                f"cannot reach the RPC tracker at {where}: {err.strerror or err}; start one with "
                f"`adreno farm tracker --host {self.addr[0]} --port {self.addr[1]}` "
                "or pass the right --tracker HOST:PORT"
            ) from None
        try:
            sock.settimeout(self.timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # length and body go in two sends
            sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
            magic = struct.unpack("<i", base.recvall(sock, 4))[0]
        except (OSError, RuntimeError) as err:
            sock.close()
            raise TrackerUnreachable(f"{where} did not answer as an RPC tracker: {err}") from None
        if magic != base.RPC_TRACKER_MAGIC:
            sock.close()
            raise TrackerUnreachable(f"{where} is not an RPC tracker (wrong magic)")
        self._sock = sock

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, message, timeout: float | None = None):
        from tvm.rpc import base

        if self._sock is None:
            self._connect()
        self._sock.settimeout(timeout if timeout is not None else self.timeout)
        try:
            base.sendjson(self._sock, message)
            return base.recvjson(self._sock)
        except socket.timeout:
            self.close()  # the tracker drops requests of a closed connection
            raise
        except (OSError, RuntimeError, ValueError) as err:
            self.close()
            raise TrackerUnreachable(f"lost the RPC tracker at {format_addr(self.addr)}: {err}") from None

    def summary(self) -> dict:
        from tvm.rpc.base import TrackerCode

        try:
            value = self._call([TrackerCode.SUMMARY])
        except socket.timeout:
            raise TrackerUnreachable(f"the RPC tracker at {format_addr(self.addr)} did not answer within "
                                     f"{self.timeout} s") from None
        if value[0] != TrackerCode.SUCCESS:
            raise FarmError(f"tracker {format_addr(self.addr)} answered {value!r} to SUMMARY")
        return value[1]

    def request(self, key: str, timeout: float, priority: int = 1) -> Lease:
        """Wait at most `timeout` s for a free device of `key`; `NoDeviceError` when none came."""
        from tvm.rpc.base import TrackerCode

        try:
            value = self._call([TrackerCode.REQUEST, key, "", priority], timeout=timeout)
        except socket.timeout:
            raise NoDeviceError(f"no device with key {key!r} became free at the tracker {format_addr(self.addr)} "
                                f"within {timeout:g} s") from None
        if value[0] != TrackerCode.SUCCESS:
            raise FarmError(f"tracker {format_addr(self.addr)} answered {value!r} to REQUEST {key}")
        host, port, matchkey = value[1]
        return Lease(key, host, int(port), matchkey)


def count_servers(summary: dict, key: str) -> int:
    """How many servers of `key` are registered at the tracker (free or busy)."""
    return sum(1 for s in summary.get("server_info", []) if s.get("key", "").split(":", 1)[-1] == key)


@dataclass
class QueueRow:
    key: str
    total: int
    free: int
    pending: int


@dataclass
class DeviceHealth:
    key: str
    host: str
    port: int
    state: str  # idle | busy | down
    detail: str = ""


@dataclass
class FarmStatus:
    tracker: str
    queues: list[QueueRow] = field(default_factory=list)
    devices: list[DeviceHealth] = field(default_factory=list)


def probe_server(host: str, port: int, timeout: float = 1.0) -> tuple[str, str]:
    """Knock at an RPC server with a key that cannot match: an idle server answers MISMATCH at once (and goes
    on serving); a server in a session does not accept; nothing listening means it is down."""
    from tvm.rpc import base

    started = time.perf_counter()
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            probe = b"client:adreno-health-probe"
            sock.sendall(struct.pack("<i", base.RPC_MAGIC) + struct.pack("<i", len(probe)) + probe)
            code = struct.unpack("<i", base.recvall(sock, 4))[0]
    except socket.timeout:
        return "busy", "in a session (did not answer the handshake)"
    except (OSError, RuntimeError) as err:
        return "down", f"{type(err).__name__}: {err}"
    if code == base.RPC_CODE_MISMATCH:
        return "idle", f"answered in {(time.perf_counter() - started) * 1e3:.1f} ms"
    return "down", f"unexpected handshake reply {code}"


def farm_status(tracker: str | tuple[str, int], probe_timeout: float = 1.0) -> FarmStatus:
    """The tracker's queue per key and the health of every registered device (the data `adreno devices` shows)."""
    with TrackerClient(tracker) as client:
        summary = client.summary()
    status = FarmStatus(format_addr(client.addr))
    keys = set(summary.get("queue_info", {}))
    for server in summary.get("server_info", []):
        key = server.get("key", "").split(":", 1)[-1]
        keys.add(key)
        host, port = server.get("addr", [None, None])
        state, detail = probe_server(host, int(port), probe_timeout) if port else ("down", "no address")
        status.devices.append(DeviceHealth(key, host, int(port or 0), state, detail))
    for key in sorted(keys):
        queue = summary.get("queue_info", {}).get(key, {"free": 0, "pending": 0})
        total = count_servers(summary, key)
        if total or queue["free"] or queue["pending"]:
            status.queues.append(QueueRow(key, total, queue["free"], queue["pending"]))
    status.devices.sort(key=lambda d: (d.key, d.host, d.port))
    return status


def format_status(status: FarmStatus) -> str:
    lines = [f"tracker {status.tracker}"]
    width = max([len(q.key) for q in status.queues] + [3])
    lines.append(f"{'key':<{width}}  total  free  pending")
    lines += [f"{q.key:<{width}}  {q.total:>5}  {q.free:>4}  {q.pending:>7}" for q in status.queues]
    if not status.queues:
        lines.append("(no devices registered)")
    if status.devices:
        lines.append("")
        lines.append(f"{'device':<{width}}  {'address':<21}  state  detail")
        lines += [f"{d.key:<{width}}  {d.host + ':' + str(d.port):<21}  {d.state:<5}  {d.detail}"
                  for d in status.devices]
    return "\n".join(lines)


def print_tracker_devices(addr: str, stream=None) -> int:
    """Print the tracker's queue and each device's health; returns a CLI exit status."""
    stream = stream or sys.stdout
    try:
        print(format_status(farm_status(addr)), file=stream)
    except FarmError as err:
        return refused(err)
    return 0


def main(argv=None) -> int:
    """`python -m adreno.farm.tracker [--host H] [--port P]`: what `adreno farm tracker` runs, a bad argument one
    line and exit status 2."""
    parser = OneLineParser(prog="python -m adreno.farm.tracker")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_TRACKER_PORT)
    parser.add_argument("--silent", action="store_true")
    parser.add_argument("--expose", action="store_true")
    args = parser.parse_args(argv)
    try:
        serve_tracker(args.host, args.port, silent=args.silent, expose=args.expose)
    except FarmError as err:
        return refused(err)
    return 0


if __name__ == "__main__":
    sys.exit(main())
