"""A farm on this machine: a TVM tracker and N device agents as subprocesses, all on loopback.

Used by the tests and `tools/bench_farm.py`, and handy to try the RPC path without hardware:

    with LocalFarm(agents=2) as farm:
        runner = RPCRunner(farm.tracker, key=farm.key)

Every process is started in its own process group and the whole group is killed on `close()`. The farm makes its
own registration token (`token`, in ADRENO_FARM_TOKEN of every process it starts; `adreno.farm.token`).
"""

from __future__ import annotations

import os
import signal
import tempfile
import time

from .common import FarmError, free_port, kill_group, python_module_command, spawn, wait_port
from .token import TOKEN_ENV, new_token
from .tracker import TrackerClient, count_servers


class LocalFarm:
    def __init__(self, agents: int = 1, key: str | None = None, device=None, faults: bool = False,
                 log_dir: str | None = None, start_timeout: float = 30.0):
        self.log_dir = log_dir or tempfile.mkdtemp(prefix="adreno-farm-")
        os.makedirs(self.log_dir, exist_ok=True)
        self.device, self.faults, self.start_timeout = device, faults, start_timeout
        self.key = key or "pocl-cpu"
        self.token = new_token()
        self.env = {**os.environ, TOKEN_ENV: self.token}  # what a process joining this farm runs with
        self.tracker_port = free_port()
        self.tracker = f"127.0.0.1:{self.tracker_port}"
        self.tracker_proc = None
        self.agents: list = []
        try:
            self.start_tracker()
            for _ in range(agents):
                self.add_agent()
            self.wait_registered(agents)
        except BaseException:
            self.close()
            raise

    def add_agent(self):
        port = free_port(span=20)
        args = ["--tracker", self.tracker, "--key", self.key, "--port", str(port), "--port-end", str(port + 20)]
        if self.device is not None:
            args += ["--device", str(self.device)]
        if self.faults:
            args.append("--allow-fault-injection")
        index = len(self.agents)
        proc = spawn(python_module_command("adreno.farm.agent", *args), os.path.join(self.log_dir, f"agent{index}.log"),
                     env=self.env)
        self.agents.append(proc)
        return proc

    def registered(self) -> int:
        with TrackerClient(self.tracker) as client:
            return count_servers(client.summary(), self.key)

    def free(self) -> int:
        with TrackerClient(self.tracker) as client:
            return client.summary().get("queue_info", {}).get(self.key, {}).get("free", 0)

    def wait_registered(self, count: int, timeout: float | None = None, free: bool = False) -> None:
        deadline = time.monotonic() + (timeout or self.start_timeout)
        while time.monotonic() < deadline:
            if (self.free() if free else self.registered()) >= count:
                return
            time.sleep(0.1)
        raise FarmError(f"{count} agents did not register at {self.tracker} within the deadline; "
                        f"logs in {self.log_dir}")

    def worker_pids(self, index: int) -> list[int]:
        """The worker process (TVM's server) of agent `index`, which its supervisor restarts."""
        import psutil

        try:
            return [c.pid for c in psutil.Process(self.agents[index].pid).children(recursive=False)]
        except psutil.NoSuchProcess:
            return []

    def kill_worker(self, index: int, sig: int = signal.SIGKILL) -> list[int]:
        """SIGKILL agent `index`'s server and its session (its process group); the supervisor restarts it."""
        killed = []
        for pid in self.worker_pids(index):
            try:
                os.killpg(pid, sig)
                killed.append(pid)
            except ProcessLookupError:
                pass
        return killed

    def start_tracker(self) -> None:
        """Start the tracker on this farm's port (again, after `stop_tracker`: agents re-register by themselves)."""
        self.tracker_proc = spawn(python_module_command("adreno.farm.tracker", "--port", str(self.tracker_port),
                                                        "--silent"), os.path.join(self.log_dir, "tracker.log"),
                                 env=self.env)
        if not wait_port("127.0.0.1", self.tracker_port, self.start_timeout):
            raise FarmError(f"the tracker did not start; see {self.log_dir}/tracker.log")

    def stop_tracker(self) -> None:
        kill_group(self.tracker_proc, signal.SIGKILL, wait=5)
        self.tracker_proc = None

    def close(self) -> None:
        for proc in self.agents:  # SIGTERM all first: each supervisor stops its worker, then reap
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for proc in self.agents:
            kill_group(proc, signal.SIGTERM, wait=3)
        self.agents = []
        kill_group(self.tracker_proc, signal.SIGTERM, wait=3)
        self.tracker_proc = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
