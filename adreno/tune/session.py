"""One way to put a tuner together, for the CLI and the benchmark tools alike: where candidates are measured (a
local OpenCL device, the farm's agents, or TVM RPC servers such as a phone's `tvm_rpc`), what the records are keyed
by, and the limits the cost model's features use."""

from __future__ import annotations

import os

from ..farm.deadline import Timeouts
from ..opencl.device import DeviceIdentity, select_device
from ..options import Runtime
from ..records import Database
from ..runners.local import IsolatedLocalRunner
from ..runners.native import NativeRunner
from ..runners.rpc import RPCRunner, farm_fingerprint
from .task import Task
from .tuner import Tuner, target_limits


def open_tuner(tasks: list[Task], records: str | os.PathLike | Database, *, target: str = "adreno-740",
               device: str | None = None, tracker: str | None = None, key: str = "pocl-cpu", runner=None,
               timeout_s: float = 60.0, cache: bool = True, outage_s: float | None = None,
               runtime: Runtime = Runtime.PLAN, server: str | None = None, **options) -> Tuner:
    """A Tuner of `tasks` writing to `records`. With `Runtime.TVM` candidates are TVM libraries measured through
    TVM's runtime by the TVM-native runner, on a TVM RPC server of `key` from `tracker` or on `server` (HOST:PORT;
    records keyed `<key>|tvm-rpc`; the builder must build them: `Builder(native=...)`). Else they are launch plans,
    measured on the farm's agents of `key` when `tracker` (HOST:PORT) is given (records keyed `<key>|rpc`;
    `outage_s`: how long the farm may be unreachable before a candidate is left pending), else on the local OpenCL
    `device` spec (records keyed by its `DeviceIdentity.fingerprint`) through `runner`, by default an isolated
    local runner. `options` go to `Tuner` (strategy, model, batch, builder, seed, repeat, progress). Closing the
    tuner closes what it opened."""
    opened = runner is None
    timeouts = Timeouts() if outage_s is None else Timeouts(outage=outage_s)
    if runtime is Runtime.TVM:
        runner = runner or NativeRunner(tracker=tracker, key=key, server=server, timeouts=timeouts)
        fingerprint, limits = f"{key}|tvm-rpc", target_limits(target)
    elif tracker:
        runner = runner or RPCRunner(tracker, key, timeouts=timeouts)
        fingerprint, limits = farm_fingerprint(key), target_limits(target)
    else:
        found = select_device(device)
        runner = runner or IsolatedLocalRunner(device, timeout_s=timeout_s, cache=cache)
        fingerprint, limits = DeviceIdentity.from_cl_device(found).fingerprint, target_limits(target, found)
    database = records if isinstance(records, Database) else Database(records)
    try:
        tuner = Tuner(tasks, runner, database, fingerprint, limits=limits, **options)
    except BaseException:
        if opened:  # nothing will close it otherwise
            runner.close()
        raise
    if opened:
        tuner.closing.append(runner.close)
    return tuner
