"""Device agent: a `tvm.rpc` server that runs our artifacts on this host's OpenCL device through pyopencl.

`adreno farm agent --tracker HOST:PORT [--key KEY] [--device N]` starts two processes:

* the **supervisor** (this process): resolves the key (a normalised GPU name: adreno-740, nvidia-h200,
  pocl-cpu), starts the worker, and restarts it whenever it dies (back-off, bounded rate);
* the **worker** (`python -m adreno.farm.agent --serve ...`): TVM's own RPC server (`tvm.rpc.server`) registered
  at the tracker under the key, with the functions below registered as TVM globals. TVM forks one session
  process per client connection; OpenCL is only ever initialised in that session process (never before a
  fork), and the session process dies with its worker (PR_SET_PDEATHSIG), so a killed agent leaves nothing behind.

Functions a client calls over RPC (see `adreno/runners/rpc.py`):

* `adreno.agent.hello() -> json`: device name, key, pid.
* `adreno.agent.prepare(tar_name) -> json`: unpack an uploaded artifact tarball, build its programs (stage build).
* `adreno.agent.measure(name, request_json) -> json`: run once (outputs saved for download), then profile;
  with `"cold": true` each timed run starts with the device's caches evicted, and the reply's `evicted_bytes`
  says how much was filled (an agent without it ignored the request, and the runner refuses its times).
* `adreno.agent.export(tar_name) -> json`: build the artifact's programs on this device (through the agent's
  program cache) and pack their binaries (`adreno cache export`'s bundle) as a tar to download
  (`adreno cache warm`).

A client reaches only the functions on the allow-list (`adreno.farm.rpc_gate`: the functions above and TVM's
upload, download, remove, load_module, ModuleGetFunction and time_evaluator); every other global of the process
is refused on the wire, before TVM sees the request. Every path a client names (TVM's own upload/download/remove/
load_module and the functions above) is confined to the session's work directory (`confine`): an absolute path,
`..` or a symlink leading out is refused with `PathEscape` before anything is read or written; time_evaluator
times a function of a loaded module only (not a global by name), with no pre-processing function but TVM's cache
flush.

The worker registers at the tracker with the farm's token (`adreno.farm.token`, from ADRENO_FARM_TOKEN): the
tracker refuses a registration without it.

Each `measure` arms a watchdog: if the call outlives `watchdog_s` (the host's run deadline plus a grace period)
the session process exits, the worker notices that its server stopped and exits, and the supervisor starts a
fresh one. The host does not wait for that: its own deadline has already recorded the timeout.

Fault injection (tests only): a worker started with `--allow-fault-injection` honours `"fault": "hang"` (sleep
forever inside `measure`, as a kernel that never returns would) and `"fault": "crash"` (the session process
dies at once) in a measure request. Without the flag those fields are refused.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import sys
import tarfile
import threading
import time

from ..support.command_line import OneLineParser, refused
from ..errors import AdrenoError
from ..opencl.device import DeviceIdentity, select_device
from ..opencl.evict import Evictor
from .common import (DEFAULT_AGENT_PORT, DEFAULT_TRACKER_PORT, EXPOSE_HELP, FarmError, check_listen, format_addr,
                     kill_group, parse_addr, python_module_command)
from ..support.processes import set_parent_death_signal
from .rpc_gate import RequestGate
from .token import TOKEN_ENV, checked_token, farm_token, with_token
from .uploads import safe_extract

# --- the worker side: state of one worker process and of its forked session processes -------------------------

_CONFIG = {"device": None, "key": "", "faults": False}
_EXECUTORS: dict = {}  # artifact name -> Executor, per session process
_DEVICE = {}


def _workpath(name: str) -> str:
    import tvm

    return tvm.get_global_func("tvm.rpc.server.workpath")(name)


def _device():
    if "device" not in _DEVICE:
        _DEVICE["device"] = select_device(_CONFIG["device"])
    return _DEVICE["device"]


def _hello() -> str:
    set_parent_death_signal()  # this runs in the session process TVM forked: die with the worker
    device = _device()
    return json.dumps({"key": _CONFIG["key"], "device": device.name.strip(), "platform": device.platform.name.strip(),
                       "pid": os.getpid(), "faults": _CONFIG["faults"]})


def _unpack(tar_name: str) -> tuple[str, str]:
    """(artifact name, directory) of an uploaded artifact tarball, unpacked once (`safe_extract`: regular files and
    directories only, under size, count and ratio ceilings), into a temporary sibling renamed into place when
    complete, so a refused or interrupted upload never leaves a directory that a later call would trust."""
    name = os.path.basename(tar_name).removesuffix(".tar")
    dest = _workpath(name)
    if not os.path.isdir(dest):
        partial = f"{dest}.partial-{os.getpid()}"
        try:
            with open(_workpath(tar_name), "rb") as upload:
                safe_extract(upload, os.fstat(upload.fileno()).st_size, partial)
            os.replace(partial, dest)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return name, dest


def _prepare(tar_name: str) -> str:
    from adreno.cache import ProgramCache  # inside: loads pyopencl at import
    from adreno.opencl.executor import Executor  # inside: loads numpy at import

    name, dest = _unpack(tar_name)
    if name not in _EXECUTORS:
        _EXECUTORS[name] = Executor(dest, _device(), cache=ProgramCache())
    return json.dumps({"name": name, "build_seconds": _EXECUTORS[name].build_seconds})


def _measure(name: str, request_json: str) -> str:
    import numpy as np

    from adreno.artifact.format import random_inputs  # inside: loads numpy at import

    request = json.loads(request_json)
    fault = request.get("fault")
    if fault and not _CONFIG["faults"]:
        raise FarmError("fault injection is disabled on this agent (start it with --allow-fault-injection)")
    watchdog = None
    if request.get("watchdog_s"):
        watchdog = threading.Timer(float(request["watchdog_s"]), os._exit, (70,))
        watchdog.daemon = True
        watchdog.start()
    try:
        if fault == "hang":  # FAULT INJECTION (tests): behave like a kernel that never returns
            while True:
                time.sleep(3600)
        if fault == "crash":  # FAULT INJECTION (tests): the device process dies mid-run
            os._exit(71)
        executor = _EXECUTORS.get(name)
        if executor is None:
            raise FarmError(f"artifact {name} was not prepared in this session")
        if request.get("inputs"):
            with np.load(_workpath(request["inputs"])) as data:
                inputs = [data[f"arr_{i}"] for i in range(len(data.files))]
        else:
            inputs = random_inputs(executor.artifact.input_specs(), int(request.get("seed", 0)),
                                   executor.artifact.value_ranges())
        reply = {"outputs": None}
        if request.get("want_outputs"):
            outputs = executor.run(inputs)
            out_name = f"outputs-{name}.npz"
            buffer = io.BytesIO()
            np.savez(buffer, *outputs)
            with open(_workpath(out_name), "wb") as handle:
                handle.write(buffer.getvalue())
            reply["outputs"] = out_name
        evictor = Evictor(executor.context) if request.get("cold") else None
        profile = executor.profile(inputs, repeat=int(request.get("repeat", 10)), warmup=int(request.get("warmup", 1)),
                                   evictor=evictor)
        reply.update(seconds=[ms * 1e-3 for ms in profile.run_device_ms], wall_ms=profile.latencies_ms,
                     device=executor.device.name.strip(), evicted_bytes=evictor.nbytes if evictor else 0)
        return json.dumps(reply)
    finally:
        if watchdog is not None:
            watchdog.cancel()


def _export(tar_name: str) -> str:
    import pyopencl as cl

    from adreno.artifact.format import Artifact  # inside: loads numpy at import
    from adreno.cache import ProgramCache, export_bundle  # inside: loads pyopencl at import

    name, dest = _unpack(tar_name)
    summary = export_bundle(Artifact.load(dest), cl.Context([_device()]), ProgramCache())
    bundle = summary["path"]
    packed = f"{name}-binaries.tar"
    with tarfile.open(_workpath(packed), "w") as tar:
        tar.add(bundle, arcname=os.path.basename(bundle))
    return json.dumps({"download": packed, "summary": summary}, default=str)


# --- confinement: every path a client names stays inside its session's work directory --------------------------

# TVM's server globals that take a client's path first; TVM joins it to the work directory unchecked (an absolute
# path or `..` goes anywhere). `workpath` is also what upload/download/remove resolve through and what our own
# functions use (`_workpath`), so confining it covers prepare, measure and export too.
_PATH_FUNCS = ("tvm.rpc.server.workpath", "tvm.rpc.server.upload", "tvm.rpc.server.download",
               "tvm.rpc.server.remove", "tvm.rpc.server.load_module", "tvm.rpc.server.download_linked_module")


class PathEscape(FarmError):
    """A client's path leads outside the agent's work directory; nothing was read or written."""


def confine(workdir: str, name) -> str:
    """The real path of a client's `name` under `workdir`, or PathEscape (TVM sends its message back to the
    client) when it is absolute or resolves outside (`..`, a symlink leading out)."""
    root = os.path.realpath(workdir)
    path = os.path.realpath(os.path.join(root, str(name)))
    if os.path.isabs(str(name)) or os.path.commonpath([root, path]) != root:
        raise PathEscape(f"path {str(name)!r} is outside the agent's work directory: refused")
    return path


# time_evaluator's pre-processing functions a client may name (TVM looks the name up among all globals)
_PREPROCESSORS = ("", "cache_flush_cpu_non_first_arg")


def _timed_module_functions_only(func):
    """`runtime.RPCTimeEvaluator` refusing what would reach past the allow-list: timing a global by name (no
    module) and a pre-processing function other than TVM's cache flush, both looked up among all globals."""
    def call(module, name, *rest):
        if module is None:
            raise FarmError(f"time_evaluator of the global {name!r} refused: time a function of a module loaded "
                            "from an upload")
        if rest and rest[-1] not in _PREPROCESSORS:
            raise FarmError(f"time_evaluator's pre-processing function {rest[-1]!r} refused (only "
                            f"{_PREPROCESSORS[1]!r})")
        return func(module, name, *rest)

    return call


def _confined(func, workdir: str):
    """`func` (a path-taking server global) behind `confine`: the check runs before TVM touches the path."""
    def call(name, *rest):
        confine(workdir, name)
        return func(name, *rest)

    return call


def _confine_session() -> None:
    """TVM's `tvm.rpc.server.start` hook: it runs in each session process after TVM registered its server
    globals for that session's work directory, so re-registering them confined here leaves no unconfined one."""
    import tvm_ffi

    workdir = tvm_ffi.get_global_func("tvm.rpc.server.workpath")("")
    for name in _PATH_FUNCS:
        tvm_ffi.register_global_func(name, _confined(tvm_ffi.get_global_func(name), workdir), override=True)
    tvm_ffi.register_global_func("runtime.RPCTimeEvaluator",
                                 _timed_module_functions_only(tvm_ffi.get_global_func("runtime.RPCTimeEvaluator")),
                                 override=True)


def _serve_gated(sock, load_library, work_path):
    """A session process's body: TVM's (`tvm.rpc.server._serve_loop`), with the client's bytes read through the
    allow-list (`RequestGate`) instead of by TVM from the socket directly."""
    from tvm.rpc import _ffi_api, server

    server._server_env(load_library, work_path)
    sock.settimeout(None)
    gate = RequestGate(sock)
    _ffi_api.ServerLoop(gate.send, gate.recv)


def _register_functions() -> None:
    import tvm_ffi

    tvm_ffi.register_global_func("tvm.rpc.server.start", _confine_session, override=True)
    tvm_ffi.register_global_func("adreno.agent.hello", _hello, override=True)
    tvm_ffi.register_global_func("adreno.agent.prepare", _prepare, override=True)
    tvm_ffi.register_global_func("adreno.agent.measure", _measure, override=True)
    tvm_ffi.register_global_func("adreno.agent.export", _export, override=True)


def serve_worker(tracker: tuple[str, int] | None, key: str, device, host: str, port: int, port_end: int,
                 custom_addr: str | None, faults: bool) -> int:
    """Run TVM's RPC server in this process until it stops; the exit status tells the supervisor to restart."""
    import logging

    from tvm.rpc import server
    from tvm.rpc.server import PopenRPCServerState

    set_parent_death_signal(signal.SIGTERM)
    _CONFIG.update(device=device, key=key, faults=faults)
    _register_functions()
    # TVM forks each session process with this module function as its target: ours reads the client through the
    # allow-list. The one hook TVM offers (`tvm.rpc.server.start`) runs after the server loop has its socket.
    server._serve_loop = _serve_gated
    logging.getLogger("RPCServer").setLevel(logging.WARNING)
    reported = with_token(custom_addr, checked_token(farm_token(), "the agent's worker")) if tracker else custom_addr
    state = PopenRPCServerState(host, port, port_end, tracker_addr=tracker, key=key, custom_addr=reported,
                                silent=True)
    print(f"adreno agent worker {os.getpid()}: serving key {key} on {host}:{state.port}"
          f"{' via tracker ' + format_addr(tracker) if tracker else ''}", flush=True)
    while state.thread.is_alive():
        state.thread.join(0.5)
    print(f"adreno agent worker {os.getpid()}: the RPC server stopped (a session died, the tracker is gone, or it "
          f"refused the registration: is {TOKEN_ENV} the tracker's token?)", flush=True)
    return 3


# --- the supervisor --------------------------------------------------------------------------------------------

def resolve_key(device_spec) -> tuple[str, str]:
    """(key, device name) for an OpenCL device spec; the key is the device's normalised `DeviceIdentity.rpc_key`."""
    identity = DeviceIdentity.from_cl_device(select_device(device_spec))
    return identity.rpc_key, identity.device_name


def worker_command(tracker: str | None, key: str, device, host: str, port: int, port_end: int,
                   custom_addr: str | None = None, faults: bool = False) -> list[str]:
    args = ["--serve", "--key", key, "--host", host, "--port", str(port), "--port-end", str(port_end)]
    if tracker:
        args += ["--tracker", tracker]
    if device is not None:
        args += ["--device", str(device)]
    if custom_addr:
        args += ["--custom-addr", custom_addr]
    if faults:
        args.append("--allow-fault-injection")
    return python_module_command("adreno.farm.agent", *args)


def supervise(command: list[str], log=print, max_restarts_per_minute: int = 30, stop: threading.Event | None = None,
              env: dict | None = None) -> int:
    """Run `command`, restart it when it exits (back-off 0.2 s doubling to 5 s); stop on SIGTERM/SIGINT or `stop`."""
    stop = stop or threading.Event()
    child = {"proc": None}

    def _terminate(signum, frame):  # noqa: ARG001 - the signal-handler signature
        stop.set()
        if child["proc"] is not None:
            kill_group(child["proc"], signal.SIGTERM, wait=2.0)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
        signal.signal(signal.SIGINT, _terminate)
    starts: list[float] = []
    backoff = 0.2
    while not stop.is_set():
        now = time.monotonic()
        starts = [t for t in starts if now - t < 60] + [now]
        if len(starts) > max_restarts_per_minute:
            log(f"adreno agent: {len(starts) - 1} restarts in the last minute; giving up")
            return 1
        proc = child["proc"] = _spawn_inherit(command, env)
        code = proc.wait()
        child["proc"] = None
        if stop.is_set():
            break
        lived = time.monotonic() - now
        backoff = 0.2 if lived > 10 else min(backoff * 2, 5.0)
        log(f"adreno agent: worker {proc.pid} exited with status {code}; restarting in {backoff:.1f} s")
        stop.wait(backoff)
    return 0


def _spawn_inherit(command, env):
    """The worker keeps the supervisor's stdout/stderr; its own process group (so one killpg ends its sessions)."""
    import subprocess

    def _child_setup():
        set_parent_death_signal(signal.SIGTERM)

    return subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True, env=env,
                            preexec_fn=_child_setup)


def run_agent(tracker: str, key: str | None = None, device=None, host: str = "127.0.0.1",
              port: int = DEFAULT_AGENT_PORT, port_end: int | None = None, custom_addr: str | None = None,
              faults: bool = False, expose: bool = False) -> int:
    """The body of `adreno farm agent`. A bind beyond loopback needs `expose` (`check_listen`: the agent runs what
    any client that reaches it uploads), and warns even then. The address is checked here, before the supervisor
    starts: a worker that cannot bind would be restarted again and again."""
    port_end = check_listen(host, port, port_end, "device agent", expose)
    tracker_addr = parse_addr(tracker, DEFAULT_TRACKER_PORT)
    checked_token(farm_token(), "adreno farm agent")  # here: the worker would fail to register again and again
    device_name = None
    if not key:
        key, device_name = resolve_key(device)
    print(f"adreno farm agent: key {key}{' (' + device_name + ')' if device_name else ''}, tracker "
          f"{format_addr(tracker_addr)}, ports {port}..{port_end - 1} on {host}", flush=True)
    return supervise(worker_command(format_addr(tracker_addr), key, device, host, port, port_end, custom_addr,
                                    faults))


def main(argv=None) -> int:
    """`python -m adreno.farm.agent`: the worker (`--serve`, which the supervisor starts) or, run by hand, what
    `adreno farm agent` runs; a bad argument is one line and exit status 2 either way."""
    parser = OneLineParser(prog="python -m adreno.farm.agent")
    parser.add_argument("--tracker", default=None)
    parser.add_argument("--key", default=None)
    parser.add_argument("--device", default=None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_AGENT_PORT)
    parser.add_argument("--port-end", type=int, default=None)
    parser.add_argument("--custom-addr", default=None)
    parser.add_argument("--expose", action="store_true", help=EXPOSE_HELP)
    parser.add_argument("--allow-fault-injection", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # worker mode
    args = parser.parse_args(argv)
    try:
        if args.serve:
            tracker = parse_addr(args.tracker) if args.tracker else None
            return serve_worker(tracker, args.key or "", args.device, args.host, args.port,
                                args.port_end or args.port + 100, args.custom_addr, args.allow_fault_injection)
        return run_agent(args.tracker or f"127.0.0.1:{DEFAULT_TRACKER_PORT}", args.key, args.device, args.host,
                         args.port, args.port_end, args.custom_addr, args.allow_fault_injection, args.expose)
    except AdrenoError as err:
        return refused(err)


if __name__ == "__main__":
    sys.exit(main())
