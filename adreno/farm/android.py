"""Android phones over adb: discover them, push TVM's `tvm_rpc` runtime, and keep one RPC server per phone
registered at the tracker under a key from its GPU name (adreno-740, ...).

Per phone: `adb reverse tcp:T tcp:R` lets the phone's server reach the host's tracker on port T through the
registration relay on port R, which adds the farm's token to its registration (`adreno.farm.relay`); `adb forward
tcp:P tcp:P` lets host clients reach the phone's server, which reports itself as 127.0.0.1:P. The server is
started with `adb shell` and watched: when it dies it is restarted (back-off, bounded rate); on exit the server is
killed and the forwards are removed. The runtime binaries (`tvm_rpc`, `libtvm_runtime.so`) are the user's, built
with the Android NDK (docs/farm.md, "Phones (adb)", says how).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import threading
import time
from dataclasses import dataclass, field

from .common import DEFAULT_TRACKER_PORT, AdbError, check_port
from .relay import RegistrationRelay
from .token import checked_token

REMOTE_DIR = "/data/local/tmp/adreno-farm"
RUNTIME_FILES = ("tvm_rpc", "libtvm_runtime.so")


@dataclass
class Phone:
    serial: str
    model: str = ""
    soc: str = ""
    gpu: str = ""
    android: str = ""
    build: str = ""
    props: dict = field(default_factory=dict, repr=False)

    @property
    def key(self) -> str:
        return gpu_key(self.gpu, self.soc)


def gpu_key(gpu: str, soc: str = "") -> str:
    """'Qualcomm, Adreno (TM) 740, OpenGL ES 3.2 ...' -> 'adreno-740'; other GPUs: vendor-model, lower case."""
    match = re.search(r"adreno[^0-9]*(\d+)", gpu, re.IGNORECASE)
    if match:
        return f"adreno-{match.group(1)}"
    match = re.search(r"mali[- ]?([a-z]*\d+)", gpu, re.IGNORECASE)
    if match:
        return f"mali-{match.group(1).lower()}"
    text = re.sub(r"[^a-z0-9]+", "-", (gpu.split(",")[1] if "," in gpu else gpu or soc).lower()).strip("-")
    return text or "android-unknown"


def parse_devices(text: str) -> list[tuple[str, str, dict]]:
    """`adb devices -l` -> [(serial, state, {model:..., device:..., transport_id:...})]."""
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("List of devices") or line.startswith("*"):
            continue
        parts = line.split()
        if len(parts) < 2:
            continue
        info = dict(p.split(":", 1) for p in parts[2:] if ":" in p)
        rows.append((parts[0], parts[1], info))
    return rows


def parse_getprop(text: str) -> dict:
    """`getprop` output ('[ro.x]: [value]' per line) -> dict."""
    return dict(re.findall(r"^\[([^\]]+)\]:\s*\[(.*)\]\s*$", text, re.MULTILINE))


class Adb:
    """Runs adb (`adb` may be a command list, e.g. [python, stand-in script] in tests)."""

    def __init__(self, adb: str | list[str] = "adb", timeout: float = 30.0):
        self.prefix = [adb] if isinstance(adb, str) else list(adb)
        self.timeout = timeout

    def command(self, *args: str, serial: str | None = None) -> list[str]:
        return [*self.prefix, *(["-s", serial] if serial else []), *args]

    def run(self, *args: str, serial: str | None = None, timeout: float | None = None, check: bool = True) -> str:
        cmd = self.command(*args, serial=serial)
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout or self.timeout)
        except OSError as err:
            raise self._not_runnable(err) from None
        except subprocess.TimeoutExpired:
            raise AdbError(f"`{' '.join(cmd)}` did not finish within {timeout or self.timeout:g} s") from None
        if check and done.returncode != 0:
            raise AdbError(f"`{' '.join(cmd)}` failed ({done.returncode}): {(done.stderr or done.stdout).strip()}")
        return done.stdout

    def popen(self, *args: str, serial: str | None = None) -> subprocess.Popen:
        try:
            return subprocess.Popen(self.command(*args, serial=serial), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        except OSError as err:
            raise self._not_runnable(err) from None

    def _not_runnable(self, err: OSError) -> AdbError:
        """Why adb could not be started at all (missing, not executable, a directory): `--adb` names the wrong
        file, which the user fixes, so it is an AdbError and not the OSError's traceback."""
        if isinstance(err, FileNotFoundError):
            return AdbError(f"adb not found ({self.prefix[0]}); install Android platform-tools or pass --adb PATH")
        return AdbError(f"cannot run adb ({self.prefix[0]}): {err.strerror or err}; pass --adb the adb executable")


def discover(adb: Adb) -> list[Phone]:
    """Every phone adb sees in state `device` (unauthorized/offline ones are reported and skipped)."""
    phones = []
    for serial, state, info in parse_devices(adb.run("devices", "-l")):
        if state != "device":
            print(f"adreno farm android: skipping {serial}: state {state!r} (unlock it and accept the USB debugging "
                  f"prompt)" if state == "unauthorized" else f"adreno farm android: skipping {serial}: state {state!r}")
            continue
        props = parse_getprop(adb.run("shell", "getprop", serial=serial))
        gles = ""
        for line in adb.run("shell", "dumpsys", "SurfaceFlinger", serial=serial, check=False).splitlines():
            if line.strip().startswith("GLES:"):
                gles = line.split("GLES:", 1)[1].strip()
                break
        phones.append(Phone(serial, props.get("ro.product.model", info.get("model", "")),
                            props.get("ro.soc.model") or props.get("ro.board.platform", ""), gles,
                            props.get("ro.build.version.release", ""), props.get("ro.build.fingerprint", ""), props))
    return phones


class PhoneServer:
    """One phone's RPC server: set up, started, watched, restarted, cleaned up."""

    def __init__(self, adb: Adb, phone: Phone, tracker_port: int, server_port: int, runtime: dict[str, str] | None,
                 relay_port: int, key: str | None = None, log=print):
        self.adb, self.phone, self.tracker_port, self.server_port = adb, phone, tracker_port, server_port
        self.relay_port = relay_port  # where the phone's tracker port leads on this host
        self.runtime, self.key, self.log = runtime, key or phone.key, log
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.forwards: list[tuple[str, str]] = []

    def setup(self) -> None:
        serial = self.phone.serial
        self.adb.run("shell", "mkdir", "-p", REMOTE_DIR, serial=serial)
        for name, local in (self.runtime or {}).items():
            self.adb.run("push", local, f"{REMOTE_DIR}/{name}", serial=serial, timeout=300)
        self.adb.run("shell", "chmod", "755", f"{REMOTE_DIR}/tvm_rpc", serial=serial)
        self.adb.run("reverse", f"tcp:{self.tracker_port}", f"tcp:{self.relay_port}", serial=serial)
        self.forwards.append(("reverse", f"tcp:{self.tracker_port}"))
        self.adb.run("forward", f"tcp:{self.server_port}", f"tcp:{self.server_port}", serial=serial)
        self.forwards.append(("forward", f"tcp:{self.server_port}"))

    def server_command(self) -> str:
        return (f"cd {REMOTE_DIR} && LD_LIBRARY_PATH={REMOTE_DIR} ./tvm_rpc server --host=127.0.0.1 "
                f"--port={self.server_port} --port-end={self.server_port + 1} "
                f"--tracker=127.0.0.1:{self.tracker_port} --key={shlex.quote(self.key)} --custom-addr=127.0.0.1")

    def start(self) -> None:
        self.starts += 1
        self.proc = self.adb.popen("shell", self.server_command(), serial=self.phone.serial)
        self.log(f"adreno farm android: {self.phone.serial} ({self.phone.model}): tvm_rpc started as {self.key} "
                 f"(start {self.starts})")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        serial = self.phone.serial
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None
        try:
            self.adb.run("shell", "pkill -x tvm_rpc || true", serial=serial, check=False, timeout=10)
        except AdbError:
            pass
        for kind, spec in reversed(self.forwards):
            try:
                self.adb.run(kind, "--remove", spec, serial=serial, check=False, timeout=10)
            except AdbError:
                pass
        self.forwards = []


def serve_phones(adb: Adb, tracker_port: int = DEFAULT_TRACKER_PORT, runtime: dict[str, str] | None = None,
                 serials: list[str] | None = None, base_port: int = 9300, key: str | None = None, *,
                 token: str | None,
                 stop: threading.Event | None = None, poll: float = 1.0, max_restarts_per_minute: int = 10,
                 log=print) -> list[PhoneServer]:
    """Set up every (selected) phone and keep its server alive until `stop` is set; then clean up. The ports are
    checked first: adb would take a bad one only when the phone's server is started."""
    check_port(tracker_port, "--tracker-port")
    check_port(base_port, "--base-port")
    token = checked_token(token, "adreno farm android")
    stop = stop or threading.Event()
    phones = [p for p in discover(adb) if not serials or p.serial in serials]
    if not phones:
        raise AdbError("no phone in state `device`: plug one in, enable USB debugging and check `adb devices -l`")
    relay = RegistrationRelay(("127.0.0.1", tracker_port), token)
    servers = [PhoneServer(adb, p, tracker_port, base_port + i, runtime, relay.port, key, log)
               for i, p in enumerate(phones)]
    every = list(servers)
    restarts: dict[str, list[float]] = {p.serial: [] for p in phones}
    try:
        for server in servers:
            server.setup()
            server.start()
        while not stop.is_set() and servers:
            stop.wait(poll)
            for server in list(servers):
                if stop.is_set() or server.alive():
                    continue
                now = time.monotonic()
                history = restarts[server.phone.serial] = [t for t in restarts[server.phone.serial] if now - t < 60]
                if len(history) >= max_restarts_per_minute:
                    log(f"adreno farm android: {server.phone.serial}: tvm_rpc died {len(history)} times in a minute; "
                        f"dropping this phone")
                    server.stop()
                    servers.remove(server)
                    continue
                history.append(now)
                code = server.proc.returncode if server.proc else None
                log(f"adreno farm android: {server.phone.serial}: tvm_rpc exited ({code}); restarting")
                server.start()
    finally:
        for server in servers:
            server.stop()
        relay.close()
    return every
