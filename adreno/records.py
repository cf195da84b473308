"""The tune -> compile contract: tuning records, what they are keyed by, and how a compile reads them.

Records. An append-only JSON-lines database keyed by (workload key, device fingerprint): the workload key is a
family's text key (`adreno.workload`), the fingerprint `adreno.opencl.device.DeviceIdentity.fingerprint` (or
`<farm key>|rpc` for farm measurements, `<key>|tvm-rpc` for TVM-runtime ones: `adreno tune --runtime tvm`).

Every measurement, failed or not, is one line. Lines are written, flushed and fsynced per batch, so a killed
tuner loses at most the batch in flight; a torn last line (the process died mid-write) is skipped on load, and
the next append starts on a fresh line. Duplicates (same workload, device, config and trial id) are ignored on
load, so a resumed run that re-writes a batch does not double-count it. Appends hold an `flock` on the sibling
`<file>.lock` and first read what other processes appended (`Database.locked`), so tuners sharing a file number
their trials after each other's and drop a config another one recorded meanwhile (`Database.append_trials`);
claims on configs (`adreno.tune.claims`) keep them from measuring the same config in the first place.

Every line is validated on load (`Record.from_json`): a line that is not JSON, nests deeper than the parser's
recursion limit, or holds a record of the wrong shape (a config that is not a flat dict of scalars, a time that
is not a list of finite positive numbers, ...) is skipped. Nothing malformed reaches the tuner or
`adreno compile --records`, where a negative or NaN time would otherwise win as the "best" record. The count of
skipped lines is a value (`Database.skipped`, `Database.skipped_summary()`) that the commands show as one
warning.

Layout records. A Winograd-eligible 3x3 conv is tuned as a whole pipeline under its layout key (`layout_key`: the
conv's key with the op `conv2d_winograd`, or `conv2d_winograd_nchw4c` when tuned in texture memory); the record's
config holds `tile` (0 = direct, 2, 4) and that layout's knobs. Keys of texture-memory kernels have `nchw4c` in
their op (`adreno.workload.key_memory`), which is how a compile without `--memory` picks its memory from the records
(`default_memory`). `TunedConfigs` is what a compile reads: the best config per key for its image precision, of
the target device where the key has records of it, streamed in one pass (`Database.fastest`), with the slower
valid configs kept for a schedule that refuses the best.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from .errors import AdrenoError
from .targets.layout import LANES
from .options import Memory, Precision
from .support.paths import creatable, regular_file
from .runners.interface import INFRASTRUCTURE_STAGES
from .workload import ConvWorkload, key_memory, key_op, memory_op


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
    def fastest(self) -> float:
        """The fastest repeat: what the candidate costs when nothing else takes the device's cores or clocks, which
        only ever slow a run down."""
        return min(self.seconds) if self.ok else float("inf")

    @property
    def infrastructure(self) -> bool:
        """The farm failed it before it ran (stage "request", written by versions that recorded such failures):
        not a measurement; the tuner measures the candidate again."""
        return self.stage in INFRASTRUCTURE_STAGES

    @property
    def precision(self) -> Precision:
        """The image storage it was measured with: fp16 (half-float images, `extra["precision"]`) or fp32."""
        return Precision(self.extra.get("precision", Precision.FP32))

    def identity(self) -> tuple:
        return (self.workload, self.device, json.dumps(self.config, sort_keys=True), self.trial)

    @classmethod
    def from_json(cls, data) -> "Record":
        """The record a parsed JSON line holds; ValueError (saying what is wrong) when it is not a well-formed one:
        a record either failed (`error` text, `seconds` null) or holds the finite positive seconds of its repeats."""
        if not isinstance(data, dict):
            raise ValueError(f"a {type(data).__name__}, not an object")
        unknown = set(data) - _FIELDS
        if unknown:
            raise ValueError(f"unknown fields {sorted(unknown)}")
        for name, kinds in _TYPES.items():
            if name in data and not _is(data[name], kinds):
                raise ValueError(f"{name}: {type(data[name]).__name__} {str(data[name])[:40]!r}")
        for name in ("workload", "device", "config"):
            if name not in data:
                raise ValueError(f"no {name}")
        if not all(isinstance(k, str) and _is(v, (int, float, str)) for k, v in data["config"].items()):
            raise ValueError("config: not a flat object of numbers and strings")
        seconds = data.get("seconds")
        if seconds is not None and not (seconds and all(_is(t, (int, float)) and math.isfinite(t) and t > 0
                                                        for t in seconds)):
            raise ValueError(f"seconds: {str(seconds)[:40]} (must be finite and positive)")
        if data.get("error") is None and seconds is None:
            raise ValueError("neither seconds nor an error")
        if not math.isfinite(data.get("timestamp", 0.0)) or data.get("trial", 0) < 0:
            raise ValueError("timestamp or trial out of range")
        if data.get("extra", {}).get("precision", Precision.FP32) not in tuple(Precision):
            raise ValueError(f"extra.precision: {str(data['extra']['precision'])[:40]!r} is no image precision")
        return cls(**data)


_FIELDS = {f.name for f in fields(Record)}
# field -> accepted JSON types (bool is refused where a number is meant: JSON true is not a time or a trial)
_TYPES = {"workload": (str,), "device": (str,), "config": (dict,), "seconds": (list, type(None)),
          "error": (str, type(None)), "stage": (str, type(None)), "trial": (int,), "strategy": (str,),
          "timestamp": (int, float), "extra": (dict,)}


def _is(value, kinds: tuple) -> bool:
    """Whether a parsed JSON value is of one of `kinds` exactly (`json` makes no subclasses; bool is not int here);
    a type lookup, not `isinstance`: it runs a dozen times per line of a 100,000-line file."""
    return type(value) in kinds


class Database:
    """Records in one JSON-lines file. Loading is lazy and tolerant; appends are durable per batch."""

    def __init__(self, path: str | os.PathLike, load: bool = True):
        """`load`: read the file now (False: `fastest` streams it instead)."""
        self.path = Path(path)
        self.records: list[Record] = []
        self._seen: set[tuple] = set()
        self._by_workload: dict[str, list[Record]] = {}  # what `query` of one workload (the tuner's, per round) scans
        self.skips: list[str] = []  # why each skipped line was skipped ("line 3: seconds: ...")
        self._read = 0  # bytes of the file loaded so far (`refresh` reads what other writers appended since)
        self._lines = 0
        if self.path.exists():
            regular_file(self.path, "records")
        else:  # created at the first append, after the work it records: its place is checked now
            creatable(self.path, "records")
        if load:
            self.refresh()

    @property
    def skipped(self) -> int:
        """How many lines of the file were skipped on load (torn, not JSON, or not a well-formed record)."""
        return len(self.skips)

    def skipped_summary(self, shown: int = 3) -> str:
        """One line naming the count and the first few reasons ("" when nothing was skipped)."""
        if not self.skips:
            return ""
        more = f"; {self.skipped - shown} more" if self.skipped > shown else ""
        return f"{self.path}: skipped {self.skipped} invalid record line(s) ({'; '.join(self.skips[:shown])}{more})"

    def refresh(self) -> None:
        """Load the lines appended since the last load (by this process or another tuner on the same file)."""
        for record in self._scan():
            self._add(record)

    def _scan(self):
        """The well-formed records of the lines appended since the last read, one at a time (skipped lines go to
        `skips`): `refresh` keeps them all, compile's `TunedConfigs.load` only the fastest per config."""
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            f.seek(self._read)
            raw = f.read()
        self._read += len(raw)
        lines = raw.split(b"\n")
        for number, line in enumerate(lines, self._lines + 1):
            if not line.strip():
                continue
            try:
                record = Record.from_json(json.loads(line))
            except (ValueError, UnicodeDecodeError, RecursionError) as err:  # JSONDecodeError is a ValueError
                reason = "nested too deeply" if isinstance(err, RecursionError) else str(err)[:80]
                where = "torn last line" if number >= self._lines + len(lines) - 1 else f"line {number}"
                self.skips.append(f"{where}: {reason}")
                continue
            yield record
        self._lines += len(lines) - 1

    @classmethod
    def fastest(cls, path: str | os.PathLike, precision: Precision) -> tuple[Database, list[tuple[Record, int]]]:
        """A database that keeps nothing, and each successful `precision` record that is the fastest of its
        (workload, device, config) in the file, with how many such records there were: what a compile reads, in
        one pass without holding a record per line (100,000 lines of a long tuning run)."""
        database = cls(path, load=False)
        best: dict[tuple, list] = {}
        for r in database._scan():
            if not r.ok or r.precision is not precision:
                continue
            identity = (r.workload, r.device, tuple(sorted(r.config.items())))
            seconds = r.median
            kept = best.get(identity)
            if kept is None:
                best[identity] = [r, seconds, 1]
            else:
                kept[2] += 1
                if seconds < kept[1]:
                    kept[0], kept[1] = r, seconds
        return database, [(r, count) for r, _, count in best.values()]

    @contextmanager
    def locked(self):
        """Exclusive use of the file among processes (`flock` on a sibling `.lock` file), with the records others
        appended loaded first: tuners sharing a file read, choose and append under it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self.refresh()
                yield self
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _add(self, record: Record) -> bool:
        identity = record.identity()
        if identity in self._seen:
            return False
        self._seen.add(identity)
        self.records.append(record)
        self._by_workload.setdefault(record.workload, []).append(record)
        return True

    def append(self, records: list[Record]) -> None:
        """Append a batch durably (one write, flush, fsync) under the lock. Records already present are not written
        again."""
        with self.locked():
            self._write([r for r in records if self._add(r)])

    def append_trials(self, records: list[Record]) -> list[Record]:
        """A tuner's batch, numbered and appended under the lock: records whose (workload, device, precision,
        config) another tuner on the file has measured meanwhile are dropped, the others get the next trial
        numbers of their workload. Returns the records written (the tuner's measurements of this batch)."""
        with self.locked():
            fresh = []
            for record in records:
                if self.measured(record):
                    continue
                record.trial = self.next_trial(record.workload, record.device)
                self._add(record)
                fresh.append(record)
            self._write(fresh)
        return fresh

    def measured(self, record: Record) -> bool:
        """Whether the file holds a measurement (not an infrastructure failure) of `record`'s config."""
        return any(r.config == record.config and not r.infrastructure
                   for r in self.query(record.workload, record.device, record.precision))

    def _write(self, fresh: list[Record]) -> None:
        if not fresh:
            return
        data = "".join(json.dumps(asdict(r), sort_keys=True) + "\n" for r in fresh).encode()
        existed = self.path.exists()
        with open(self.path, "ab", buffering=0) as f:  # unbuffered: a refused write is seen here, not at close
            start = f.tell()
            if start and not self._ends_with_newline():
                data = b"\n" + data  # a torn line from a killed writer: start ours on a fresh line
            try:
                view = memoryview(data)
                while view:
                    view = view[f.write(view):]
                os.fsync(f.fileno())
            except OSError as err:  # a full disk, a quota: the file goes back to what it was
                f.truncate(start)
                if not existed:
                    self.path.unlink(missing_ok=True)
                raise AdrenoError(f"cannot append to the records file {self.path}: {err.strerror or err}; it is as "
                                  "it was before this batch") from None
        self._read = self.path.stat().st_size  # ours: nobody else writes under the lock
        self._lines += data.count(b"\n")

    def _ends_with_newline(self) -> bool:
        with open(self.path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"

    def query(self, workload: str | None = None, device: str | None = None,
              precision: Precision | None = None) -> list[Record]:
        """Records of a workload, device and image precision (None: any)."""
        scanned = self.records if workload is None else self._by_workload.get(workload, [])
        return [r for r in scanned
                if (device is None or r.device == device) and (precision is None or r.precision is precision)]

    def best(self, workload: str, device: str | None = None, precision: Precision | None = None,
             accept=None) -> Record | None:
        """The fastest successful record of a workload (on one device, or any; of one precision, or any; among
        those `accept(record)` keeps, when given)."""
        ok = [r for r in self.query(workload, device, precision) if r.ok and (accept is None or accept(r))]
        return min(ok, key=lambda r: r.median) if ok else None

    def ranked_records(self, precision: Precision | None = None, accept=None) -> dict[str, list[Record]]:
        """workload key -> its successful records of one precision (None: any), one per (device, config), fastest
        first, among those `accept(record)` keeps when given: what `TunedConfigs.load` chooses from."""
        fastest: dict[str, dict[tuple, Record]] = {}
        for r in self.query(precision=precision):
            if not r.ok or (accept is not None and not accept(r)):
                continue
            configs = fastest.setdefault(r.workload, {})
            identity = (r.device, json.dumps(r.config, sort_keys=True))
            if identity not in configs or r.median < configs[identity].median:
                configs[identity] = r
        return {key: sorted(configs.values(), key=lambda r: r.median) for key, configs in fastest.items()}

    def best_configs(self, device: str | None = None, precision: Precision | None = None,
                     accept=None) -> dict[str, dict]:
        """workload key -> config of its best record (on one device, or any; see `ranked_records`)."""
        ranked = self.ranked_records(precision, accept)
        chosen = {key: [r for r in records if device is None or r.device == device] for key, records in ranked.items()}
        return {key: records[0].config for key, records in chosen.items() if records}

    def next_trial(self, workload: str, device: str) -> int:
        return 1 + max((r.trial for r in self.query(workload, device)), default=0)


# --- layout keys ---------------------------------------------------------------------------------------------------

LAYOUT_OPS = {memory: memory_op("conv2d_winograd", memory) for memory in Memory}  # memory -> op of its layout keys
DIRECT_OPS = {Memory.BUFFER: "conv2d_direct", Memory.TEXTURE: memory_op("conv2d", Memory.TEXTURE)}
ORCHESTRATE_OP = "orchestrate"  # the op of kernel orchestration's candidate costs (`adreno.orchestrate.costs`)


def layout_key(wl: ConvWorkload, memory: Memory = Memory.BUFFER) -> str:
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


def direct_key(wl: ConvWorkload, memory: Memory = Memory.BUFFER) -> str:
    """The key of the conv's direct kernel records in `memory` (`conv2d_direct` or the packed `conv2d_texture`)."""
    return (packed_workload(wl) if memory is Memory.TEXTURE else wl).key(DIRECT_OPS[memory])


def default_memory(keys) -> Memory:
    """The memory a compile gets when none is asked for: texture, except buffer for tuning records of which none
    is a texture workload (records tuned with `adreno tune --memory buffer`)."""
    keys = list(keys)
    textures = any(key_memory(k) is Memory.TEXTURE for k in keys)
    return Memory.BUFFER if keys and not textures else Memory.TEXTURE


def device_target(device: str) -> str:
    """The target a record's device fingerprint names: its first field, the RPC key (adreno-740, nvidia-h200, ...;
    `DeviceIdentity.fingerprint`, `<farm key>|rpc`), which is what `adreno compile --target` names."""
    return device.split("|", 1)[0]


class TunedConfigs(dict):
    """workload key -> best tuned config from a records file, among the records of the compile's image precision,
    with layout records expanded into the keys the schedules look up (`expand`: `conv2d_winograd.kernel_configs`).
    It remembers which keys the schedules looked up and applied, so the manifest can say how many kernels were
    tuned, and which records were not applied: malformed lines, records outside today's space (`in_space`), and
    tuned knobs a schedule's check refused (`refuse`; the defaults apply instead). It is the `KnobSource` of a
    compile (`adreno.schedules.context`)."""

    def __init__(self, configs: dict | None = None, skipped: int = 0, runners_up: dict | None = None,
                 elsewhere: dict | None = None, ranker=None):
        """`ranker` (`adreno.costmodel.ranked_defaults.RankedDefaults` under `--defaults model`, else None) is given
        here and never set later: what a compile's defaults are is decided with its options, before any schedule
        asks, so no schedule ever reads the rule where a later one would read the ranking."""
        super().__init__(configs or {})
        self._ranker = ranker
        self.used: set[str] = set()
        self.skipped = skipped  # record lines not applied: malformed (the database skips them) or outside the space
        self.refused: dict[str, str] = {}  # key -> why a schedule refused its tuned knobs
        # key -> the slower valid configs of its records, fastest first: what `refuse` falls back to
        self.runners_up: dict[str, list[dict]] = runners_up or {}
        self.elsewhere: dict[str, str] = elsewhere or {}  # key -> the device its record was measured on, not the target

    @property
    def ranker(self):
        """What ranks the knobs of kernels without records (None: the families' rule defaults); read-only."""
        return self._ranker

    @classmethod
    def load(cls, records: str | os.PathLike, precision: Precision, expand, in_space, target: str,
             ranker=None) -> TunedConfigs:
        """The best records of `precision` whose (workload, config) `in_space` accepts, expanded by `expand`; the
        slower ones of each plain (not layout) key are kept as runners-up for a schedule that refuses the best.
        A key's records measured on the compile's `target` (`device_target`) are used when it has any; otherwise
        those of other devices are, and `elsewhere` says so (`adreno compile` says it in one line). `ranker`: as
        the constructor takes it."""
        database, fastest = Database.fastest(records, precision)
        outside, ranked = 0, {}
        for record, count in fastest:
            if key_op(record.workload) == ORCHESTRATE_OP:  # a candidate's cost, no schedule's knobs
                continue
            if in_space(record.workload, record.config):
                ranked.setdefault(record.workload, []).append(record)
            else:
                outside += count
        chosen, elsewhere = {}, {}
        for key, records_ in ranked.items():
            records_.sort(key=lambda r: r.median)
            on_target = [r for r in records_ if device_target(r.device) == target]
            if not on_target:
                elsewhere[key] = records_[0].device
            chosen[key] = [r.config for r in on_target or records_]
        runners_up = {key: configs[1:] for key, configs in chosen.items() if layout_workload(key) is None}
        return cls(expand({key: configs[0] for key, configs in chosen.items()}), database.skipped + outside,
                   runners_up, elsewhere, ranker)

    def get(self, key, default=None):
        if key in self:
            self.used.add(key)
        return super().get(key, default)

    def tuned(self, key: str) -> dict | None:
        """The best record's knobs of workload `key` (the `KnobSource` of a compile: `adreno.schedules.context`)."""
        return self.get(key)

    def default(self, family, matched, rule: dict, ctx) -> dict:
        """The knobs of a kernel without tuned ones: the family's `rule` default, or the ranker's pick."""
        return rule if self.ranker is None else self.ranker(family, matched, rule, ctx)

    def refuse(self, key: str, reason: str) -> dict | None:
        """A schedule's check refused the tuned knobs of `key` (`Family.apply`): the refused record counts as
        skipped and the next-fastest config of the key is returned for the schedule to check (None when none is
        left: the key is dropped, so the defaults apply and nothing counts it as applied)."""
        self.skipped += 1
        self.refused[key] = reason
        runners_up = self.runners_up.get(key)
        if runners_up:
            self[key] = runners_up.pop(0)
            return self[key]
        self.pop(key, None)
        return None

    @property
    def applied(self) -> set[str]:
        """The keys whose tuned knobs a schedule applied."""
        return self.used & set(self)
