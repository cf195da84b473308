"""RPCRunner: measures artifacts on the farm's device agents (`adreno/farm/agent.py`) through TVM's tracker.

A batch runs on every free device of a key in parallel: one worker thread per device holds one RPC session and
takes candidates from a shared queue. Every stage has a deadline held here on the host (request, upload, build,
run, download): an RPC call runs in a daemon thread and the worker waits for it at most that long. When a call
overruns, the candidate is recorded as a timeout naming the stage, the session is dropped (the agent's
watchdog and supervisor restart the device), and the worker asks the tracker for another device. When a device
dies mid-candidate the candidate is retried once on another device, then recorded as a device error. Every
submitted candidate ends with exactly one `RunResult`; nothing raises across the interface.

An infrastructure failure (the tracker unreachable, no device of the key, a stale lease) is not the candidate's:
the candidate goes back to the queue for any live device, and a worker without a session backs off (0.25 s
doubling to 4 s) and asks again, until the outage has lasted `Timeouts.outage`. Only then are the queued
candidates finished, with stage "request" (`RunResult.infrastructure`): the tuner records nothing for them and
measures them again later.
"""

from __future__ import annotations

import collections
import concurrent.futures as futures
import hashlib
import io
import json
import os
import threading
import time

import numpy as np

from adreno.errors import TVM_ERRORS
from adreno.runners.interface import RunFuture, RunInput, Runner, RunResult, check_outputs

from ..farm.common import FarmError, NoDeviceError, TrackerUnreachable, format_addr, parse_addr
from ..farm.deadline import RemoteError, StageTimeout, Timeouts, call_with_deadline, short_error
from ..farm.tracker import TrackerClient, count_servers
from ..farm.uploads import artifact_tarball, safe_extract


class DeviceSession:
    """One RPC session with a device agent, obtained through the tracker."""

    def __init__(self, tracker: TrackerClient, key: str, timeouts: Timeouts):
        from tvm import rpc

        self.timeouts = timeouts
        self.broken = False
        self.prepared: set[str] = set()
        self.uploaded: set[str] = set()
        started = time.monotonic()
        lease = tracker.request(key, timeouts.request)
        self.address = f"{lease.host}:{lease.port}"
        self.name = f"{key}@{self.address}"
        left = max(1.0, timeouts.request - (time.monotonic() - started))
        try:
            self.session = call_with_deadline(lambda: rpc.connect(lease.host, lease.port, lease.matchkey), left,
                                              "request")
        except StageTimeout:
            raise
        except (*TVM_ERRORS, OSError) as err:  # the server went away after the tracker leased it
            raise FarmError(f"cannot connect to {self.name}: {short_error(err)}") from None
        hello = self.call("request", lambda: self.session.get_function("adreno.agent.hello")(),
                          max(1.0, timeouts.request - (time.monotonic() - started)))
        info = json.loads(hello)
        self.device_name = info.get("device", "")

    def alive(self, timeout: float = 3.0) -> bool:
        try:
            call_with_deadline(lambda: self.session.get_function("adreno.agent.hello")(), timeout, "probe")
            return True
        except BaseException:  # noqa: BLE001
            return False

    def call(self, stage: str, fn, timeout: float):
        try:
            return call_with_deadline(fn, timeout, stage)
        except StageTimeout:
            self.broken = True
            raise
        except (*TVM_ERRORS, OSError) as err:  # RPC and remote errors
            alive = self.alive()
            self.broken = not alive
            raise RemoteError(stage, short_error(err), alive) from None

    def close(self) -> None:
        session, self.session = getattr(self, "session", None), None
        if session is not None and not self.broken:
            del session  # dropping the last reference closes the connection; the agent re-registers


class _Candidate:
    __slots__ = ("input", "future", "attempts")

    def __init__(self, run_input: RunInput, future: futures.Future):
        self.input, self.future, self.attempts = run_input, future, 0


class RPCRunner(Runner):
    """Measures `RunInput`s on the farm's agents of one key, in parallel over all of its free devices."""

    name = "rpc"
    remote = True

    def __init__(self, tracker: str = "127.0.0.1:9190", key: str = "pocl-cpu", max_parallel: int | None = None,
                 timeouts: Timeouts | None = None, device_loss_retries: int = 1, idle_release_s: float = 2.0,
                 fault: dict | None = None):
        """`fault`: FAULT INJECTION for tests only, {tag: "hang"|"crash"}; agents refuse it unless started with
        --allow-fault-injection."""
        self.tracker_addr = parse_addr(tracker) if isinstance(tracker, str) else tuple(tracker)
        self.key = key
        self.max_parallel = max_parallel
        self.timeouts = timeouts or Timeouts()
        self.device_loss_retries = device_loss_retries
        self.idle_release_s = idle_release_s
        self.fault = dict(fault or {})
        self._queue: collections.deque[_Candidate] = collections.deque()
        self._cond = threading.Condition()
        self._workers: list[threading.Thread] = []
        self._holding = 0  # workers that hold a session now
        self._last_scale = -1e9
        self._servers = 0
        self._closed = False
        self._outage_since: float | None = None  # when the current run of infrastructure failures began
        self._outage_tries = 0
        self._tarballs: dict[tuple, tuple[str, bytes]] = {}
        self._tar_lock = threading.Lock()
        self.events: list[str] = []  # what happened to devices (drops, timeouts), for logs and tests

    # --- the Runner interface ---------------------------------------------------------------------------------

    def submit(self, run_input: RunInput) -> RunFuture:
        future: futures.Future = futures.Future()
        candidate = _Candidate(run_input, future)
        with self._cond:
            if self._closed:
                future.set_result(RunResult(error="the runner is closed", stage="request", tag=run_input.tag))
                return RunFuture(future, run_input)
            self._queue.append(candidate)
            self._cond.notify()
        self._scale()
        return RunFuture(future, run_input)

    def run(self, run_input: RunInput) -> RunResult:
        return self.submit(run_input).result()

    def run_batch(self, inputs: list[RunInput]) -> list[RunResult]:
        pending = [self.submit(i) for i in inputs]
        return [p.result() for p in pending]

    def close(self) -> None:
        with self._cond:
            self._closed = True
            leftover = list(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        for candidate in leftover:
            self._finish(candidate, RunResult(error="the runner was closed before this candidate ran",
                                              stage="request", tag=candidate.input.tag))
        for worker in list(self._workers):
            worker.join(timeout=self.timeouts.request + 5)

    # --- workers ----------------------------------------------------------------------------------------------

    def _scale(self) -> None:
        """Start one worker per registered device of the key (at least one), up to max_parallel. The tracker is
        asked at most once a second (a batch submits many candidates at once)."""
        with self._cond:
            self._workers = [w for w in self._workers if w.is_alive()]
            queued = len(self._queue)
            now = time.monotonic()
            refresh = now - self._last_scale >= 1.0
            if refresh:
                self._last_scale = now
        if queued == 0:
            return
        if refresh:
            try:
                with TrackerClient(self.tracker_addr, timeout=min(5.0, self.timeouts.request)) as client:
                    self._servers = count_servers(client.summary(), self.key)
            except FarmError:
                self._servers = 0  # a worker reports the tracker error as the candidate's result
        want = max(1, self._servers)
        if self.max_parallel:
            want = min(want, self.max_parallel)
        with self._cond:
            self._workers = [w for w in self._workers if w.is_alive()]
            want = min(want, len(self._workers) + len(self._queue))
            for _ in range(want - len(self._workers)):
                worker = threading.Thread(target=self._worker, name=f"rpc-runner-{self.key}", daemon=True)
                self._workers.append(worker)
                worker.start()

    def _take(self, timeout: float) -> _Candidate | None:
        with self._cond:
            deadline = time.monotonic() + timeout
            while not self._queue and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            return self._queue.popleft() if self._queue else None

    def _requeue(self, candidate: _Candidate) -> None:
        with self._cond:
            if self._closed:
                closed = True
            else:
                closed = False
                self._queue.appendleft(candidate)
                self._cond.notify()
        if closed:
            self._finish(candidate, RunResult(error="the runner was closed", stage="request", tag=candidate.input.tag))

    def _finish(self, candidate: _Candidate, result: RunResult) -> None:
        result.tag = candidate.input.tag
        if not candidate.future.done():
            candidate.future.set_result(result)

    def _outage(self, candidate: _Candidate, err: BaseException) -> None:
        """An infrastructure failure while this worker had no session: requeue the candidate and back off, unless
        the outage has outlasted `Timeouts.outage`; then finish every queued candidate as an infrastructure
        failure (stage "request")."""
        self.events.append(f"infrastructure: {err}")
        with self._cond:
            now = time.monotonic()
            if self._outage_since is None:
                self._outage_since, self._outage_tries = now, 0
            self._outage_tries += 1
            lasted, backoff = now - self._outage_since, min(4.0, 0.25 * 2 ** min(self._outage_tries - 1, 4))
            if lasted > self.timeouts.outage:
                rest = list(self._queue)
                self._queue.clear()
            else:
                rest = None
        if rest is None:
            self._requeue(candidate)
            with self._cond:
                self._cond.wait_for(lambda: self._closed, backoff)
            return
        for each in [candidate, *rest]:
            self._finish(each, RunResult(error=f"{err} (for {lasted:.0f} s; not measured, left pending)",
                                         stage="request", extra={"reason": "infrastructure"}))

    def _outage_over(self) -> None:
        with self._cond:
            self._outage_since = None

    def _worker(self) -> None:
        session: DeviceSession | None = None
        tracker: TrackerClient | None = None
        try:
            while True:
                candidate = self._take(self.idle_release_s)
                if candidate is None:
                    return
                if session is None:
                    try:
                        if tracker is None:
                            tracker = TrackerClient(self.tracker_addr, timeout=min(5.0, self.timeouts.request))
                        session = DeviceSession(tracker, self.key, self.timeouts)
                        with self._cond:
                            self._holding += 1
                        self._outage_over()
                    except NoDeviceError as err:
                        tracker = None  # the timed-out request died with its connection
                        with self._cond:
                            others = self._holding
                        if others:  # other devices are working: leave the candidate to them, shrink the pool
                            self._requeue(candidate)
                            return
                        self._outage(candidate, err)
                        continue
                    except (TrackerUnreachable, StageTimeout, RemoteError, FarmError, OSError) as err:
                        # the tracker is gone, or the lease went stale (the device died after registering)
                        if tracker is not None:
                            tracker.close()
                        tracker = None
                        self._outage(candidate, FarmError(f"could not open a session on a {self.key} device: "
                                                          f"{err}"))
                        continue
                try:
                    result = self._measure(session, candidate)
                except Exception as err:  # noqa: BLE001 - a bug here must not lose the candidate
                    session.broken = True
                    result = RunResult(error=f"internal error in the RPC runner: {type(err).__name__}: {err}",
                                       stage="device", device=session.name)
                if session.broken:
                    self.events.append(f"dropped {session.name}: "
                                       f"{result.error if result else 'lost during a candidate, retrying'}")
                    with self._cond:
                        self._holding -= 1
                    session.close()
                    session = None
                if result is None:  # the device died under a candidate that may be retried elsewhere
                    self._requeue(candidate)
                    continue
                self._finish(candidate, result)
        finally:
            if session is not None:
                with self._cond:
                    self._holding -= 1
                session.close()
            if tracker is not None:
                tracker.close()
            # A candidate queued while this worker was leaving must still find a worker.
            with self._cond:
                orphaned = bool(self._queue) and not self._closed
            if orphaned:
                threading.Thread(target=self._scale, daemon=True).start()

    # --- one candidate on one device --------------------------------------------------------------------------

    def _tarball(self, artifact: str) -> tuple[str, bytes]:
        stat = os.stat(os.path.join(artifact, "plan.json"))
        cache_key = (os.path.realpath(artifact), stat.st_mtime_ns, stat.st_size)
        with self._tar_lock:
            if cache_key not in self._tarballs:
                self._tarballs[cache_key] = artifact_tarball(artifact)
            return self._tarballs[cache_key]

    def _measure(self, session: DeviceSession, candidate: _Candidate) -> RunResult | None:
        run_input, timeouts = candidate.input, self.timeouts
        stages: dict[str, float] = {}
        try:
            name, data = self._tarball(run_input.artifact)
        except (OSError, FarmError) as err:
            return RunResult(error=f"cannot read the artifact {run_input.artifact}: {err}", stage="upload")
        request = {"repeat": run_input.repeat, "warmup": run_input.warmup, "seed": run_input.seed,
                   "want_outputs": run_input.reference is not None, "cold": run_input.cold,
                   "watchdog_s": timeouts.run + timeouts.watchdog_grace}
        if run_input.tag in self.fault:
            request["fault"] = self.fault[run_input.tag]
        try:
            started = time.perf_counter()
            if name not in session.uploaded:
                session.call("upload", lambda: session.session.upload(bytearray(data), name + ".tar"), timeouts.upload)
                session.uploaded.add(name)
            if run_input.inputs is not None:
                buffer = io.BytesIO()
                np.savez(buffer, *[np.asarray(a) for a in run_input.inputs])
                blob = buffer.getvalue()
                inputs_name = f"inputs-{hashlib.sha256(blob).hexdigest()[:20]}.npz"
                if inputs_name not in session.uploaded:
                    session.call("upload", lambda: session.session.upload(bytearray(blob), inputs_name),
                                 timeouts.upload)
                    session.uploaded.add(inputs_name)
                request["inputs"] = inputs_name
            stages["upload"] = time.perf_counter() - started
            started = time.perf_counter()
            if name not in session.prepared:
                session.call("build", lambda: session.session.get_function("adreno.agent.prepare")(name + ".tar"),
                             timeouts.build)
                session.prepared.add(name)
            stages["build"] = time.perf_counter() - started
            started = time.perf_counter()
            reply = json.loads(session.call(
                "run", lambda: session.session.get_function("adreno.agent.measure")(name, json.dumps(request)),
                timeouts.run))
            stages["run"] = time.perf_counter() - started
            if run_input.cold and not reply.get("evicted_bytes"):
                return RunResult(error=f"the agent at {session.name} cannot run with cold caches (it predates them: "
                                 "update adreno there)", stage="run", device=session.name)
            max_error = None
            if run_input.reference is not None:
                started = time.perf_counter()
                blob = session.call("download", lambda: session.session.download(reply["outputs"]), timeouts.download)
                stages["download"] = time.perf_counter() - started
                with np.load(io.BytesIO(bytes(blob))) as npz:
                    outputs = [npz[f"arr_{i}"] for i in range(len(npz.files))]
                max_error, problem = check_outputs(outputs, run_input.reference, run_input.rtol, run_input.atol)
                if problem:
                    return RunResult(error=problem, stage="check", max_error=max_error, device=session.name,
                                     extra={"stage_seconds": stages})
        except StageTimeout as err:
            return RunResult(error=f"timeout: {err} on {session.name}; the device was dropped", stage="timeout",
                             device=session.name, extra={"stage": err.stage, "reason": "timeout",
                                                         "stage_seconds": stages})
        except RemoteError as err:
            if not err.alive:
                candidate.attempts += 1
                if candidate.attempts <= self.device_loss_retries:
                    self.events.append(f"{session.name} died during {err.stage} of {run_input.tag!r}; retrying")
                    return None
                return RunResult(error=f"the device {session.name} died during {err.stage}: {err}", stage="device",
                                 device=session.name, extra={"stage": err.stage, "reason": "device lost"})
            return RunResult(error=f"{err.stage} failed on {session.name}: {err}", stage=err.stage,
                             device=session.name, extra={"stage": err.stage, "reason": "remote error"})
        return RunResult(seconds=reply["seconds"], max_error=max_error, device=session.name,
                         extra={"device_name": reply.get("device", session.device_name),
                                "wall_ms": reply.get("wall_ms"), "evicted_bytes": reply.get("evicted_bytes", 0),
                                "stage_seconds": stages, "address": session.address,
                                "tracker": format_addr(self.tracker_addr)})


def farm_fingerprint(key: str) -> str:
    """The device fingerprint records measured on the farm's devices of `key` are kept under."""
    return f"{key}|rpc"


def warm_artifact(artifact: str, tracker: str, key: str, timeouts: Timeouts | None = None) -> dict:
    """Build an artifact's OpenCL programs on one farm device of `key` and bring their binaries back into
    `<artifact>/binaries/<device>/` (what `adreno cache export` writes locally): `adreno cache warm`.
    Returns the device's export summary; a device or tracker problem raises `FarmError` naming it."""
    import shutil
    import tempfile

    timeouts = timeouts or Timeouts()
    name, data = artifact_tarball(artifact)
    with TrackerClient(parse_addr(tracker)) as client:
        session = DeviceSession(client, key, timeouts)
        try:
            session.call("upload", lambda: session.session.upload(bytearray(data), name + ".tar"), timeouts.upload)
            reply = json.loads(session.call(
                "build", lambda: session.session.get_function("adreno.agent.export")(name + ".tar"), timeouts.build))
            blob = session.call("download", lambda: session.session.download(reply["download"]), timeouts.download)
        except (StageTimeout, RemoteError) as err:
            raise FarmError(f"warming {artifact} on {session.name} failed: {err}") from None
        finally:
            session.close()
    binaries = os.path.join(artifact, "binaries")
    os.makedirs(binaries, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=binaries) as staging:
        safe_extract(io.BytesIO(bytes(blob)), len(blob), staging)
        for entry in os.listdir(staging):
            final = os.path.join(binaries, entry)
            shutil.rmtree(final, ignore_errors=True)
            os.replace(os.path.join(staging, entry), final)
    summary = reply["summary"]
    summary["path"] = os.path.join(binaries, os.path.basename(summary["path"]))
    summary["remote"] = session.name
    return summary
