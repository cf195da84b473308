"""The tune -> compile contract: tuning records, what they are keyed by, and how a compile reads them.

Records. An append-only JSON-lines database keyed by (workload key, device fingerprint): the workload key is a
family's text key (`adreno.workload`), the fingerprint `adreno.opencl.device.DeviceIdentity.fingerprint` (or
`<farm key>|rpc` for farm measurements).

Every measurement, failed or not, is one line. Lines are written, flushed and fsynced per batch, so a killed
tuner loses at most the batch in flight; a torn last line (the process died mid-write) is skipped with a
warning on load, and the next append starts on a fresh line. Duplicates (same workload, device, config and
trial id) are ignored on load, so a resumed run that re-writes a batch does not double-count it.

Layout records. A Winograd-eligible 3x3 conv is tuned as a whole pipeline under its layout key (`layout_key`: the
conv's key with the op `conv2d_winograd`, or `conv2d_winograd_nchw4c` when tuned in texture memory); the record's
config holds `tile` (0 = direct, 2, 4) and that layout's knobs. Keys of texture-memory kernels have `nchw4c` in
their op (`key_memory`), which is how a compile without `--memory` picks its memory from the records
(`default_memory`). `TunedConfigs` is what a compile reads: the best config per key for its image precision.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .layout import LANES
from .workload import ConvWorkload, key_op

log = logging.getLogger("adreno.tune")


@dataclass
class Record:
    """One measured candidate: seconds per repeat, or the error and the stage it failed in."""

    workload: str
    device: str
    config: dict
    seconds: list[float] | None = None
    error: str | None = None
    stage: str | None = None
    trial: int = 0
    strategy: str = ""
    timestamp: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.seconds)

    @property
    def median(self) -> float:
        return sorted(self.seconds)[len(self.seconds) // 2] if self.ok else float("inf")

    @property
    def precision(self) -> str:
        """The image storage it was measured with: "fp16" (half-float images, `extra["precision"]`) or "fp32"."""
        return self.extra.get("precision", "fp32")

    def identity(self) -> tuple:
        return (self.workload, self.device, json.dumps(self.config, sort_keys=True), self.trial)


class Database:
    """Records in one JSON-lines file. Loading is lazy and tolerant; appends are durable per batch."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.records: list[Record] = []
        self._seen: set[tuple] = set()
        self.skipped_lines = 0
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = Record(**json.loads(line))
            except (json.JSONDecodeError, UnicodeDecodeError, TypeError) as err:
                self.skipped_lines += 1
                where = "torn last line" if number >= len(lines) - 1 else f"line {number}"
                log.warning("%s: skipping %s (%s)", self.path, where, type(err).__name__)
                continue
            self._add(record)

    def _add(self, record: Record) -> bool:
        identity = record.identity()
        if identity in self._seen:
            return False
        self._seen.add(identity)
        self.records.append(record)
        return True

    def append(self, records: list[Record]) -> None:
        """Append a batch durably (one write, flush, fsync). Records already present are not written again."""
        fresh = [r for r in records if self._add(r)]
        if not fresh:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = "".join(json.dumps(asdict(r), sort_keys=True) + "\n" for r in fresh).encode()
        with open(self.path, "ab") as f:
            if f.tell() and not self._ends_with_newline():
                data = b"\n" + data  # a torn line from a killed writer: start ours on a fresh line
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    def _ends_with_newline(self) -> bool:
        with open(self.path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"

    def query(self, workload: str | None = None, device: str | None = None,
              precision: str | None = None) -> list[Record]:
        """Records of a workload, device and image precision (None: any)."""
        return [r for r in self.records if (workload is None or r.workload == workload)
                and (device is None or r.device == device) and (precision is None or r.precision == precision)]

    def best(self, workload: str, device: str | None = None, precision: str | None = None) -> Record | None:
        """The fastest successful record of a workload (on one device, or any; of one precision, or any)."""
        ok = [r for r in self.query(workload, device, precision) if r.ok]
        return min(ok, key=lambda r: r.median) if ok else None

    def best_configs(self, device: str | None = None, precision: str | None = None) -> dict[str, dict]:
        """workload key -> config of its best record: what `adreno compile --records` applies (`precision`: the
        compile's, so that knobs measured on half-float images do not decide an fp32 build, nor the reverse)."""
        best = {}
        for workload in {r.workload for r in self.records}:
            record = self.best(workload, device, precision)
            if record is not None:
                best[workload] = record.config
        return best

    def next_trial(self, workload: str, device: str) -> int:
        return 1 + max((r.trial for r in self.query(workload, device)), default=0)


# --- layout keys ---------------------------------------------------------------------------------------------------

LAYOUT_OPS = {"buffer": "conv2d_winograd", "texture": "conv2d_winograd_nchw4c"}  # memory -> op of its layout keys


def key_memory(key: str) -> str:
    """The memory a workload key was tuned in: "texture" (packed kernels on images) or "buffer"."""
    return "texture" if "nchw4c" in key_op(key) else "buffer"


def layout_key(wl: ConvWorkload, memory: str = "buffer") -> str:
    """The key of a conv's layout record: the layout (`tile`) and its knobs, tuned in `memory`."""
    return wl.key(LAYOUT_OPS[memory])


def layout_workload(key: str) -> ConvWorkload | None:
    """The conv of a layout key (None for any other key)."""
    parsed = ConvWorkload.parse(key)
    return parsed[1] if parsed is not None and parsed[0] in LAYOUT_OPS.values() else None


def packed_workload(wl: ConvWorkload) -> ConvWorkload:
    """The conv as the texture families see it: channel counts padded to multiples of 4."""
    from dataclasses import replace

    return replace(wl, c=-(-wl.c // LANES) * LANES, o=-(-wl.o // LANES) * LANES)


def direct_key(wl: ConvWorkload, memory: str = "buffer") -> str:
    """The key of the conv's direct kernel records in `memory` (`conv2d_direct` or the packed `conv2d_texture`)."""
    return packed_workload(wl).key("conv2d_nchw4c") if memory == "texture" else wl.key("conv2d_direct")


def default_memory(keys) -> str:
    """The memory a compile gets when none is asked for: "texture", except "buffer" for tuning records of which
    none is a texture workload (records tuned with `adreno tune --memory buffer`)."""
    keys = list(keys)
    return "buffer" if keys and not any(key_memory(k) == "texture" for k in keys) else "texture"


class TunedConfigs(dict):
    """workload key -> best tuned config from a records file, among the records of the compile's image precision,
    with layout records expanded into the keys the schedules look up (`expand`: `conv2d_winograd.kernel_configs`);
    remembers which keys the schedules looked up and found, so the manifest can say how many kernels were tuned."""

    def __init__(self, configs: dict | None = None):
        super().__init__(configs or {})
        self.used: set[str] = set()

    @classmethod
    def load(cls, records: str | os.PathLike, precision: str, expand) -> TunedConfigs:
        return cls(expand(Database(records).best_configs(precision=precision)))

    def get(self, key, default=None):
        if key in self:
            self.used.add(key)
        return super().get(key, default)
