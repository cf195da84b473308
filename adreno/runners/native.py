"""TVM-native runner: measures a compiled TVM library on a device that runs TVM's own `tvm_rpc` server
(a phone with TVM's OpenCL runtime), without our agent on the other side.

A native artifact is a directory holding the exported library and `native.json`:

    {"library": "lib.so", "entry": "add", "device": "cl",
     "args": [{"name": "a", "shape": [64], "dtype": "float32", "scope": "global", "role": "input"}, ...]}

`scope` is the argument's memory scope: `global` for buffers, `global.texture*` for texture (image2d)
arguments. Arguments are allocated on the remote device *in that scope* (MetaSchedule's runner allocates every
argument as a plain buffer, which a texture kernel cannot read). A run is: upload the library, `load_module`,
allocate the arguments, `time_evaluator`, then run once and download the outputs for the check. Each stage has a
host-side deadline; a stage that overruns drops the session (a fresh one is requested for the next candidate).

`export_native` writes such a directory from a built `tvm.runtime.Module`; for a phone pass the NDK's clang
as `cc` (docs/farm.md, "Phones (adb)"). A tuner candidate's is written by `adreno.tune.native_build`. On this
machine a `tvm.rpc` server that loaded adreno's OpenCL plugin stands in for a phone's `tvm_rpc`
(tests/farm/test_farm_native.py).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass

import numpy as np

from adreno.errors import TVM_ERRORS
from adreno.artifact.format import random_inputs
from adreno.farm.tracker import TrackerClient
from adreno.runners.interface import RunInput, Runner, RunResult, check_outputs, refuse_cold

from ..farm.common import FarmError, parse_addr
from ..farm.deadline import StageTimeout, Timeouts, call_with_deadline, short_error

NATIVE_JSON = "native.json"
DEVICE_KINDS = ("cl", "cpu", "cuda", "vulkan")


@dataclass
class NativeArg:
    name: str
    shape: list[int]
    dtype: str = "float32"
    scope: str = "global"
    role: str = "input"  # input | output

    @property
    def is_texture(self) -> bool:
        return self.scope.startswith("global.texture")


def export_native(module, out_dir: str | os.PathLike, entry: str, args: list[NativeArg], device: str = "cl",
                  cc: str | None = None, library: str = "lib.so") -> str:
    """Export a built module and its calling convention to `out_dir` (a native artifact)."""
    if device not in DEVICE_KINDS:
        raise FarmError(f"device must be one of {DEVICE_KINDS}, not {device!r}")
    os.makedirs(out_dir, exist_ok=True)
    kwargs = {"cc": cc} if cc else {}
    module.export_library(os.path.join(out_dir, library), **kwargs)
    with open(os.path.join(out_dir, NATIVE_JSON), "w") as handle:
        json.dump({"library": library, "entry": entry, "device": device, "args": [asdict(a) for a in args]}, handle,
                  indent=1)
    return str(out_dir)


def load_native(path: str) -> dict:
    try:
        with open(os.path.join(path, NATIVE_JSON)) as handle:
            spec = json.load(handle)
        spec["args"] = [NativeArg(**a) for a in spec["args"]]
        return spec
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise FarmError(f"{path} is not a native artifact ({NATIVE_JSON}): {err}") from None


def allocate(arg: NativeArg, device, empty=None):
    """An empty tensor for `arg` on `device`, in the argument's memory scope (images for texture scopes)."""
    if empty is None:
        import tvm

        empty = tvm.runtime.empty
    return empty(tuple(arg.shape), arg.dtype, device, mem_scope=None if arg.scope == "global" else arg.scope)


class NativeRunner(Runner):
    """Runs native artifacts over TVM RPC: through a tracker (`tracker` + `key`) or on one server (`server`)."""

    name = "tvm-native"
    remote = True

    def __init__(self, tracker: str | None = None, key: str | None = None, server: str | None = None,
                 server_key: str = "", timeouts: Timeouts | None = None):
        super().__init__()
        if not (tracker and key) and not server:
            raise FarmError("NativeRunner needs tracker + key, or server HOST:PORT")
        self.tracker, self.key, self.server, self.server_key = tracker, key, server, server_key
        self.timeouts = timeouts or Timeouts()
        self._session = None
        self._loaded: dict[str, object] = {}
        self._where = ""

    def _connect(self):
        from tvm import rpc

        if self._session is not None:
            return self._session
        if self.server:
            host, port = parse_addr(self.server)
            key, self._where = self.server_key, f"{host}:{port}"
        else:
            with TrackerClient(self.tracker, timeout=min(5.0, self.timeouts.request)) as client:
                lease = client.request(self.key, self.timeouts.request)
            host, port, key = lease.host, lease.port, lease.matchkey
            self._where = f"{self.key}@{lease.host}:{lease.port}"
        try:
            self._session = call_with_deadline(lambda: rpc.connect(host, port, key), self.timeouts.request, "request")
        except StageTimeout:
            raise
        except (*TVM_ERRORS, OSError) as err:
            raise FarmError(f"cannot connect to the RPC server {self._where}: {short_error(err)}") from None
        self._loaded = {}
        return self._session

    def _drop(self) -> None:
        self._session, self._loaded = None, {}

    def run(self, run_input: RunInput) -> RunResult:
        if (refused := refuse_cold(self.name, run_input)) is not None:
            return refused
        try:  # an artifact that is not native is the candidate's failure; the farm's start at "request"
            spec = load_native(run_input.artifact)
        except FarmError as err:
            return RunResult(error=str(err), stage="build", tag=run_input.tag)
        stage = "request"
        stages: dict[str, float] = {}
        try:
            session = self._connect()
            device = getattr(session, spec["device"])(0)
            lib_path = os.path.join(run_input.artifact, spec["library"])
            module = self._loaded.get(lib_path)
            if module is None:
                stage, started = "upload", time.perf_counter()
                remote_name = f"native-{abs(hash((lib_path, os.stat(lib_path).st_mtime_ns)))}-{spec['library']}"
                self._call("upload", lambda: session.upload(lib_path, remote_name), self.timeouts.upload)
                stages["upload"] = time.perf_counter() - started
                stage, started = "build", time.perf_counter()
                module = self._call("build", lambda: session.load_module(remote_name), self.timeouts.build)
                stages["build"] = time.perf_counter() - started
                self._loaded[lib_path] = module
            stage, started = "upload", time.perf_counter()
            inputs_spec = [a for a in spec["args"] if a.role == "input"]
            arrays = (list(run_input.inputs) if run_input.inputs is not None
                      else random_inputs(inputs_spec, run_input.seed))
            if len(arrays) != len(inputs_spec):
                return RunResult(error=f"{len(arrays)} inputs given, the function takes {len(inputs_spec)}",
                                 stage="upload", tag=run_input.tag)

            def _allocate():
                feed = iter(arrays)
                tensors = []
                for arg in spec["args"]:
                    tensor = allocate(arg, device)
                    if arg.role == "input":
                        tensor.copyfrom(np.ascontiguousarray(next(feed), dtype=arg.dtype))
                    tensors.append(tensor)
                return tensors

            tensors = self._call("upload", _allocate, self.timeouts.upload)
            stages["upload"] = stages.get("upload", 0.0) + time.perf_counter() - started
            stage, started = "run", time.perf_counter()
            evaluator = module.time_evaluator(spec["entry"], device, number=1,
                                              repeat=run_input.warmup + run_input.repeat)
            timing = self._call("run", lambda: evaluator(*tensors), self.timeouts.run)
            seconds = [float(x) for x in timing.results][run_input.warmup:]
            stages["run"] = time.perf_counter() - started
            max_error = None
            if run_input.reference is not None:
                stage, started = "download", time.perf_counter()

                def _outputs():
                    module[spec["entry"]](*tensors)
                    return [t.numpy() for t, a in zip(tensors, spec["args"]) if a.role == "output"]

                outputs = self._call("download", _outputs, self.timeouts.download)
                stages["download"] = time.perf_counter() - started
                max_error, problem = check_outputs(outputs, run_input.reference, run_input.rtol, run_input.atol)
                if problem:
                    return RunResult(error=problem, stage="check", max_error=max_error, tag=run_input.tag,
                                     device=self._where, extra={"stage_seconds": stages})
        except StageTimeout as err:  # a server that never answered the handshake is the farm's (`infrastructure`)
            self._drop()
            return RunResult(error=f"timeout: {err} on {self._where}; the session was dropped",
                             stage="request" if err.stage == "request" else "timeout", tag=run_input.tag,
                             device=self._where, extra={"stage": err.stage, "reason": "timeout"})
        except FarmError as err:
            self._drop()
            return RunResult(error=str(err), stage=stage, tag=run_input.tag, device=self._where)
        except (*TVM_ERRORS, OSError) as err:  # the remote side failed: a value, never raised
            self._drop()
            return RunResult(error=f"{stage} failed on {self._where}: {short_error(err)}", stage=stage,
                             tag=run_input.tag, device=self._where, extra={"stage": stage})
        return RunResult(seconds=seconds, max_error=max_error, tag=run_input.tag, device=self._where,
                         extra={"stage_seconds": stages})

    def _call(self, stage: str, fn, timeout: float):
        return call_with_deadline(fn, timeout, stage)

    def close(self) -> None:
        super().close()
        self._drop()
