"""The tuning records database: append-only JSON lines keyed by (workload key, device fingerprint).

Every measurement, failed or not, is one line. Lines are written, flushed and fsynced per batch, so a killed
tuner loses at most the batch in flight; a torn last line (the process died mid-write) is skipped on load, and
the next append starts on a fresh line. Duplicates (same workload, device, config and trial id) are ignored on
load, so a resumed run that re-writes a batch does not double-count it.

Every line is validated on load (`Record.from_json`): a line that is not JSON, nests deeper than the parser's
recursion limit, or holds a record of the wrong shape (a config that is not a flat dict of scalars, a time that
is not a list of finite positive numbers, ...) is skipped. Nothing malformed reaches the tuner or
`adreno compile --records`, where a negative or NaN time would otherwise win as the "best" record. The count of
skipped lines is a value (`Database.skipped`, `Database.skipped_summary()`) that the commands show as one
warning."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from ..runner import INFRASTRUCTURE_STAGES



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
    def infrastructure(self) -> bool:
        """The farm failed it before it ran (stage "request", written by versions that recorded such failures):
        not a measurement; the tuner measures the candidate again."""
        return self.stage in INFRASTRUCTURE_STAGES

    @property
    def precision(self) -> str:
        """The image storage it was measured with: "fp16" (half-float images, `extra["precision"]`) or "fp32"."""
        return self.extra.get("precision", "fp32")

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
        return cls(**data)


_FIELDS = {f.name for f in fields(Record)}
# field -> accepted JSON types (bool is refused where a number is meant: JSON true is not a time or a trial)
_TYPES = {"workload": (str,), "device": (str,), "config": (dict,), "seconds": (list, type(None)),
          "error": (str, type(None)), "stage": (str, type(None)), "trial": (int,), "strategy": (str,),
          "timestamp": (int, float), "extra": (dict,)}


def _is(value, kinds: tuple) -> bool:
    return isinstance(value, kinds) and not isinstance(value, bool)


class Database:
    """Records in one JSON-lines file. Loading is lazy and tolerant; appends are durable per batch."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.records: list[Record] = []
        self._seen: set[tuple] = set()
        self.skips: list[str] = []  # why each skipped line was skipped ("line 3: seconds: ...")
        if self.path.exists():
            self._load()

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

    def _load(self) -> None:
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = Record.from_json(json.loads(line))
            except (ValueError, UnicodeDecodeError, RecursionError) as err:  # JSONDecodeError is a ValueError
                reason = "nested too deeply" if isinstance(err, RecursionError) else str(err)[:80]
                where = "torn last line" if number >= len(lines) - 1 else f"line {number}"
                self.skips.append(f"{where}: {reason}")
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

    def best(self, workload: str, device: str | None = None, precision: str | None = None,
             accept=None) -> Record | None:
        """The fastest successful record of a workload (on one device, or any; of one precision, or any; among
        those `accept(record)` keeps, when given)."""
        ok = [r for r in self.query(workload, device, precision) if r.ok and (accept is None or accept(r))]
        return min(ok, key=lambda r: r.median) if ok else None

    def best_configs(self, device: str | None = None, precision: str | None = None, accept=None) -> dict[str, dict]:
        """workload key -> config of its best record: what `adreno compile --records` applies (`precision`: the
        compile's, so that knobs measured on half-float images do not decide an fp32 build, nor the reverse;
        `accept`: compile's check that the knobs are in today's space, so the best valid record wins)."""
        best = {}
        for workload in {r.workload for r in self.records}:
            record = self.best(workload, device, precision, accept)
            if record is not None:
                best[workload] = record.config
        return best

    def next_trial(self, workload: str, device: str) -> int:
        return 1 + max((r.trial for r in self.query(workload, device)), default=0)
