"""`adreno farm tracker|agent|ssh|android|status`, and the data behind `adreno devices --tracker HOST:PORT`.

Plugs into the main CLI: `register(subparsers, command)` (`adreno/cli/main.py`), so it runs as `adreno farm ...` or
`python -m adreno.cli farm ...` (how remote hosts are driven over SSH).
"""

from __future__ import annotations

from ..support.command_line import require_positive
import os

from ..farm.common import DEFAULT_AGENT_PORT, DEFAULT_TRACKER_PORT, EXPOSE_HELP, FarmError, parse_addr
from ..farm.token import farm_token
from .common import add_device_argument

SECURITY_NOTE = ("TVM RPC has no authentication and lets any client write files and run code on the server: "
                 "everything binds to 127.0.0.1 unless --host says otherwise; reach remote devices through "
                 "`adreno farm ssh`.")


def _cmd_tracker(args) -> int:
    from ..farm.tracker import serve_tracker  # inside: adreno --help does not need it

    serve_tracker(args.host, args.port, expose=args.expose)
    return 0


def _cmd_agent(args) -> int:
    from ..farm.agent import run_agent  # inside: adreno --help does not need it

    return run_agent(args.tracker, args.key, args.device, args.host, args.port, args.port_end, args.custom_addr,
                     expose=args.expose)


def _cmd_status(args) -> int:
    from ..farm.tracker import print_tracker_devices  # inside: adreno --help does not need it

    return print_tracker_devices(args.tracker)


def _cmd_ssh(args) -> int:
    from ..farm.ssh import serve_ssh  # inside: adreno --help does not need it

    require_positive(args, "agents", "keepalive")
    token = farm_token()
    options = dict(port=args.ssh_port, key_filename=args.identity, known_hosts=args.known_hosts,
                   accept_new_host_key=args.accept_new_host_key, keepalive=args.keepalive, agents=args.agents,
                   python=args.remote_python, key=args.key, device=args.device, agent_port=args.agent_port,
                   android=args.android, adb=args.adb, runtime_dir=args.runtime)
    try:
        serve_ssh(args.target, parse_addr(args.tracker), token, reconnect=not args.no_reconnect, **options)
    except KeyboardInterrupt:
        pass
    return 0


def _cmd_android(args) -> int:
    from ..farm.android import RUNTIME_FILES, Adb, discover, serve_phones  # inside: adreno --help does not need it

    adb = Adb(args.adb)
    if args.list:
        for phone in discover(adb):
            print(f"{phone.serial}  key {phone.key}  {phone.model}  SoC {phone.soc}  GPU {phone.gpu}  "
                  f"Android {phone.android}")
        return 0
    runtime = None
    if args.runtime:
        runtime = {name: os.path.join(args.runtime, name) for name in RUNTIME_FILES}
        missing = [p for p in runtime.values() if not os.path.isfile(p)]
        if missing:
            raise FarmError(f"missing runtime binaries {missing}; "
                            "build them with the NDK (docs/farm.md, section 'Phones (adb)')")
    try:
        serve_phones(adb, args.tracker_port, runtime, args.serial or None, args.base_port, args.key,
                     token=farm_token())
    except KeyboardInterrupt:
        pass
    return 0


def register(subparsers, command=None) -> None:
    """Add the `farm` command group to the main CLI's subparsers."""
    if command is not None:
        farm = command("farm", lambda args: (farm.print_help(), 2)[1], "the device farm: tracker, agents, SSH hosts, "
                       "phones", "Measure on many devices at once through TVM's RPC tracker. " + SECURITY_NOTE)
    else:
        farm = subparsers.add_parser("farm", help="the device farm: tracker, agents, SSH hosts, phones",
                                     description="Measure on many devices at once through TVM's RPC tracker. "
                                     + SECURITY_NOTE)
        farm.set_defaults(func=lambda args: (farm.print_help(), 2)[1])
    sub = farm.add_subparsers(dest="farm_command", metavar="FARM_COMMAND")

    p = sub.add_parser("tracker", help="run TVM's RPC tracker")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1; anything else needs "
                   "--expose)")
    p.add_argument("--expose", action="store_true", help="allow --host beyond loopback. " + EXPOSE_HELP +
                   " Prefer an SSH tunnel (`adreno farm ssh`)")
    p.add_argument("--port", type=int, default=DEFAULT_TRACKER_PORT, help=f"port (default {DEFAULT_TRACKER_PORT})")
    p.set_defaults(func=_cmd_tracker)

    p = sub.add_parser("agent", help="serve this host's OpenCL device to the farm (a tvm.rpc server)")
    p.add_argument("--tracker", default=f"127.0.0.1:{DEFAULT_TRACKER_PORT}", metavar="HOST:PORT")
    p.add_argument("--key", help="device key (default: the normalised GPU name, e.g. adreno-740, pocl-cpu)")
    add_device_argument(p)
    p.add_argument("--host", default="127.0.0.1", help="bind address of the RPC server (default 127.0.0.1; "
                   "anything else needs --expose)")
    p.add_argument("--expose", action="store_true", help="allow --host beyond loopback. " + EXPOSE_HELP +
                   " Prefer an SSH tunnel (`adreno farm ssh`)")
    p.add_argument("--port", type=int, default=DEFAULT_AGENT_PORT, help="first port to try")
    p.add_argument("--port-end", type=int, default=None, help="end of the port range (default port+100)")
    p.add_argument("--custom-addr", help="address reported to the tracker (e.g. a tunnel's local end)")
    p.set_defaults(func=_cmd_agent)

    p = sub.add_parser("status", help="the tracker's queue and each device's health")
    p.add_argument("--tracker", default=f"127.0.0.1:{DEFAULT_TRACKER_PORT}", metavar="HOST:PORT")
    p.set_defaults(func=_cmd_status)

    p = sub.add_parser("ssh", help="attach a remote host's devices through an SSH tunnel (paramiko)")
    p.add_argument("target", metavar="[USER@]HOST")
    p.add_argument("--ssh-port", type=int, default=22)
    p.add_argument("-i", "--identity", help="private key file")
    p.add_argument("--known-hosts", help="known_hosts file (default ~/.ssh/known_hosts)")
    p.add_argument("--accept-new-host-key", action="store_true",
                   help="trust and record a host key not yet in known_hosts (a changed key is always refused)")
    p.add_argument("--keepalive", type=float, default=5.0, help="seconds between keepalives (default 5)")
    p.add_argument("--tracker", default=f"127.0.0.1:{DEFAULT_TRACKER_PORT}", metavar="HOST:PORT",
                   help="the local tracker the remote devices register at")
    p.add_argument("--agents", type=int, default=1, help="OpenCL agents to start on the host (default 1)")
    p.add_argument("--agent-port", type=int, default=9400, help="first port for remote agents (default 9400)")
    p.add_argument("--key", help="device key of the remote agents (default: their GPU name)")
    p.add_argument("--device", help="OpenCL device on the remote host")
    p.add_argument("--remote-python", default="python3", help="python with adreno installed on the host")
    p.add_argument("--android", action="store_true", help="run the adb flow on the host instead of OpenCL agents")
    p.add_argument("--adb", default="adb", help="adb on the host (with --android)")
    p.add_argument("--runtime", help="folder on the host with tvm_rpc and libtvm_runtime.so (with --android)")
    p.add_argument("--no-reconnect", action="store_true", help="exit when the link drops")
    p.set_defaults(func=_cmd_ssh)

    p = sub.add_parser("android", help="serve the phones adb sees (TVM's tvm_rpc, adb reverse/forward, restarts)")
    p.add_argument("--adb", default=os.environ.get("ADB", "adb"), help="adb executable (default $ADB or adb)")
    p.add_argument("--list", action="store_true", help="only list the phones with their SoC, GPU and key")
    p.add_argument("--runtime", help="folder with tvm_rpc and libtvm_runtime.so to push (built with the NDK)")
    p.add_argument("--tracker-port", type=int, default=DEFAULT_TRACKER_PORT, help="the host's tracker port")
    p.add_argument("--serial", action="append", help="only this phone (repeatable)")
    p.add_argument("--base-port", type=int, default=9300, help="server port of the first phone (default 9300)")
    p.add_argument("--key", help="key for every phone (default: from each phone's GPU name)")
    p.set_defaults(func=_cmd_android)

