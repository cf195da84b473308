"""The tuning loop: a task scheduler hands rounds to the task with the largest expected end-to-end gain; per
round the strategy proposes candidates (guided by the cost model), the builder builds them in processes, the
runner measures them (output checked first), every result is appended durably to the records database, and
the cost model is retrained. A run resumes from the database: measured candidates are never measured again.
A candidate the farm could not run (`RunResult.infrastructure`: tracker or device unreachable past the runner's
outage deadline) is not recorded: it stays pending, to be proposed and measured again (records of such failures
written by older versions are ignored on resume); a round that measured nothing for that reason ends the run.
A task's seed configs (its default; a layout task: every layout's defaults) are measured first, and a layout
task's batches are split among the layouts by how fast each has proved (the task's `choose`)."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..costmodel.features import device_limits
from ..targets.devices import from_opencl, get_device
from ..errors import AdrenoError
from ..options import Precision
from ..records import Database, Record
from ..runners.interface import RunInput, Runner
from .claims import Claims
from ..costmodel import CostModel, make_model
from .builder import Builder
from .space import SearchSpace
from .strategies import get_strategy
from .task import Task


@dataclass
class TaskState:
    """Where tuning of one task stands."""

    task: Task
    space: SearchSpace
    strategy: object
    default: dict
    seeds: list = field(default_factory=list)  # candidates measured before the strategy's (the default first)
    measured: set = field(default_factory=set)
    best_seconds: float = math.inf
    default_seconds: float = math.inf
    history: list[tuple[int, float]] = field(default_factory=list)  # (trials so far, best so far)
    rounds: int = 0
    inputs: list | None = None
    reference: list | None = None
    done: bool = False  # the strategy has nothing left to propose
    # the task's records, read incrementally: the fastest per config (`Tuner._records`), with its feature row
    observed: dict = field(default_factory=dict)  # config (JSON) -> record
    features: dict = field(default_factory=dict)  # config (JSON) -> the cost model's feature row
    consumed: int = 0  # how many of the database's records of the task were read into `observed`

    @property
    def trials(self) -> int:
        return len(self.measured)

    def exhausted(self, cap: int) -> bool:
        return self.done or self.trials >= cap


@dataclass
class TuneReport:
    tasks: list[dict]
    trials: int
    seconds: dict
    records: str
    plot: str | None = None
    pending: int = 0  # candidates the infrastructure failed (not recorded; measured again when the run resumes)
    dropped: int = 0  # measurements another tuner on the records file had recorded first (time spent twice)


def target_limits(target_name: str, device=None) -> dict:
    """Limits the analytical features use: the measuring device's facts where known (`from_opencl`), else the target
    table's; `fill_work_items` is what the occupancy rule asks of a launch."""
    return device_limits(get_device(target_name) if device is None else from_opencl(device))


class Tuner:
    """Tunes the tasks of a model on one runner, writing every measurement to `database`."""

    def __init__(self, tasks: list[Task], runner: Runner, database: Database, device_fingerprint: str, *,
                 strategy: str = "genetic", model: str | CostModel = "learned", batch: int = 8, builder=None,
                 limits: dict | None = None, seed: int = 0, repeat: int = 5, progress: Callable | None = None):

        self.tasks, self.runner, self.database = tasks, runner, database
        self.device = device_fingerprint
        self.model = make_model(model) if isinstance(model, str) else model
        self.batch, self.repeat, self.seed = batch, repeat, seed
        self.builder = builder or Builder()
        self.closing = [] if builder else [self.builder.close]  # what close() closes: what this tuner opened
        self.claims = Claims(database)  # what other tuners on the records file are measuring
        self.closing.append(self.claims.release)
        self.limits = limits or target_limits(tasks[0].target_name)
        self.progress = progress or (lambda spent, total, text: None)
        self.timing = {"reference": 0.0, "build": 0.0, "run": 0.0, "model": 0.0}
        self.pending = self.dropped = 0
        self.strategy_name = strategy
        self.states = []
        for index, task in enumerate(tasks):
            space = task.space()
            state = TaskState(task, space, get_strategy(strategy)(space, seed=seed + index),
                              task.default_config(), [space.candidate(c) for c in task.seed_configs()])
            self._resume(state)
            self.states.append(state)
        self._retrain()

    def _records(self, state: TaskState) -> list[Record]:
        """The task's measurements on this device and precision, the fastest record per config: records in its
        space that are not infrastructure failures. Read incrementally (only what was appended since the last
        call), and one per config, so that a records file of 100,000 lines costs the cost model and each round
        what its distinct configs cost, not every line again."""
        fresh = self.database.query(state.task.key, self.device, state.task.precision)[state.consumed:]
        state.consumed += len(fresh)
        for record in fresh:
            if record.infrastructure or not _in_space(state.space, record):
                continue
            config = json.dumps(record.config, sort_keys=True)
            kept = state.observed.get(config)
            if kept is None or record.median < kept.median:
                state.observed[config] = record
        return list(state.observed.values())

    def _feature_rows(self, state: TaskState, records: list[Record]) -> np.ndarray:
        """The feature rows of `records` (one per config), computed once per config."""
        keys = [json.dumps(r.config, sort_keys=True) for r in records]
        new = [(k, r.config) for k, r in zip(keys, records) if k not in state.features]
        if new:
            rows = state.task.featurize([config for _, config in new], self.limits)
            state.features.update(zip([k for k, _ in new], rows))
        return np.vstack([state.features[k] for k in keys])

    def _resume(self, state: TaskState) -> None:
        """Take in the task's records not yet in `state.measured`: on start, and before each round those another
        tuner on the same file appended (so no config is measured twice)."""
        candidates, seconds = [], []
        for record in self._records(state):
            candidate = state.space.candidate(record.config)
            if candidate in state.measured:
                continue
            state.measured.add(candidate)
            candidates.append(candidate)
            seconds.append(record.median)
            if record.config == state.default and record.ok:
                state.default_seconds = min(state.default_seconds, record.median)
            state.best_seconds = min(state.best_seconds, record.median)
            state.history.append((len(state.measured), state.best_seconds))
        if candidates:
            state.strategy.observe(candidates, seconds)

    def _features(self, state: TaskState, candidates) -> np.ndarray:
        return state.task.featurize([state.space.config(c) for c in candidates], self.limits)

    def _retrain(self) -> None:
        started = time.perf_counter()
        features, seconds, groups = [], [], []
        for state in self.states:
            records = self._records(state)
            if records:
                features.append(self._feature_rows(state, records))
                seconds.extend(r.median for r in records)
                groups.extend([state.task.key] * len(records))
        if features:
            self.model.fit(np.vstack(features), np.array(seconds), np.array(groups, dtype=object))
        self.timing["model"] += time.perf_counter() - started

    def pick_task(self, caps: list[int]) -> TaskState | None:
        """Ansor-style: first one round each; then the task whose next round promises the largest end-to-end
        gain, estimated as calls x best time x recent relative improvement (with a floor, so no task starves).
        `caps`: per task, the trial count at which it stops."""
        open_states = [s for s, cap in zip(self.states, caps) if not s.exhausted(cap)]
        if not open_states:
            return None
        fresh = [s for s in open_states if s.rounds == 0]
        if fresh:
            return fresh[0]

        def gain(state: TaskState) -> float:
            best = state.best_seconds if math.isfinite(state.best_seconds) else 1.0
            recent = [b for _, b in state.history[-2 * self.batch:]]
            improvement = (recent[0] - recent[-1]) / recent[0] if recent and math.isfinite(recent[0]) else 1.0
            return state.task.weight * best * max(improvement, 0.05)

        return max(open_states, key=gain)

    def _propose(self, state: TaskState, n: int, taken: set) -> list:
        """The next n candidates: the strategy's (model-ranked) proposals, as the task chooses among them."""
        if n <= 0:
            return []
        proposals = state.strategy.propose(state.task.proposals(n), self.model, lambda cs: self._features(state, cs),
                                           taken)
        rng = np.random.default_rng(self.seed + state.trials)
        return state.task.choose(proposals, n, state.space, self._records(state), taken, rng)

    def _claimed_by_others(self, state: TaskState) -> set:
        """The candidates other tuners on the records file are measuring now (`Claims`)."""
        claimed = set()
        for config in self.claims.others(state.task.key, self.device, state.task.precision):
            try:
                claimed.add(state.space.candidate(config))
            except (KeyError, ValueError):  # another tuner's older knob table
                continue
        return claimed

    def run_round(self, state: TaskState) -> list[Record]:
        """Propose, build, measure and record one batch for one task."""
        task = state.task
        if state.reference is None:
            started = time.perf_counter()
            state.inputs = task.inputs(self.seed)
            state.reference = task.reference(state.inputs)
            self.timing["reference"] += time.perf_counter() - started
        self.database.refresh()
        self._resume(state)
        started = time.perf_counter()
        taken = state.measured | self._claimed_by_others(state)
        proposed = [c for c in state.seeds if c not in taken and state.space.is_valid(c)][:self.batch]
        proposed += self._propose(state, self.batch - len(proposed), taken | set(proposed))
        self.timing["model"] += time.perf_counter() - started
        configs = self.claims.claim(task.key, self.device, task.precision, [state.space.config(c) for c in proposed])
        started = time.perf_counter()
        builds = self.builder.build(task, configs)
        self.timing["build"] += time.perf_counter() - started
        started = time.perf_counter()
        futures_ = [self.runner.submit(RunInput(b.artifact, state.inputs, state.reference, repeat=self.repeat,
                                                tag=str(i))) if b.artifact else None for i, b in enumerate(builds)]
        records = []
        precision = {"precision": task.precision} if task.precision is not Precision.FP32 else {}
        for config, build, future in zip(configs, builds, futures_):
            if future is None:
                record = Record(task.key, self.device, config, error=build.error, stage="build", extra=precision)
            else:
                result = future.result()
                if result.infrastructure:  # never ran: not the candidate's result, it stays pending
                    self.pending += 1
                    continue
                record = Record(task.key, self.device, config, result.seconds, result.error, result.stage,
                                extra={"max_error": result.max_error, "build_seconds": round(build.seconds, 3),
                                       **precision})
            record.strategy, record.timestamp = self.strategy_name, time.time()
            records.append(record)
        self.timing["run"] += time.perf_counter() - started
        measured_count = len(records)
        records = self.database.append_trials(records)  # numbered; minus what another tuner measured meanwhile
        self.dropped += measured_count - len(records)
        measured = [state.space.candidate(r.config) for r in records]
        state.strategy.observe(measured, [r.median for r in records])
        for candidate, record in zip(measured, records):
            state.measured.add(candidate)
            if record.ok and record.config == state.default:
                state.default_seconds = record.median
            state.best_seconds = min(state.best_seconds, record.median)
            state.history.append((state.trials, state.best_seconds))
        state.rounds += 1
        self._retrain()
        return records

    def _status(self, state: TaskState) -> str:
        best = f"{state.best_seconds * 1e3:.3f} ms" if math.isfinite(state.best_seconds) else "none yet"
        speedup = (f", {state.default_seconds / state.best_seconds:.2f}x vs default"
                   if math.isfinite(state.default_seconds) and math.isfinite(state.best_seconds) else "")
        layout = state.task.layouts(self._records(state)).get("layout")
        return (f"{state.task.func_name} [{state.task.family}] trials {state.trials}: best {best}"
                f"{f' ({layout})' if layout else ''}{speedup}")

    def tune(self, trials: int) -> TuneReport:
        """Spend `trials` new measurements in all (split by the task scheduler; resumed records do not count)."""
        caps = [s.trials + trials for s in self.states]
        spent = 0
        while spent < trials:
            state = self.pick_task(caps)
            if state is None:
                break
            before, pending = state.trials, self.pending
            ours = self.run_round(state)  # not what another tuner on the file measured meanwhile
            if not ours and self.pending > pending:
                break  # the farm is down past the runner's outage deadline: stop, leaving the candidates pending
            if state.trials == before:
                state.done = True
            spent += len(ours)
            self.progress(spent, trials, self._status(state))
        return self.report(spent)

    def report(self, spent: int) -> TuneReport:
        rows = []
        for s in self.states:
            rows.append({"task": s.task.func_name, "key": s.task.key, "family": s.task.family,
                         "weight": s.task.weight, "trials": s.trials, "best_ms": _ms(s.best_seconds),
                         "default_ms": _ms(s.default_seconds),
                         "speedup_vs_default": (s.default_seconds / s.best_seconds)
                         if math.isfinite(s.default_seconds) and math.isfinite(s.best_seconds) else None,
                         "history": s.history, **s.task.layouts(self._records(s))})
        return TuneReport(rows, spent, dict(self.timing), str(self.database.path), pending=self.pending,
                          dropped=self.dropped)

    def close(self) -> None:
        for close in self.closing:
            close()


def _in_space(space: SearchSpace, record: Record) -> bool:
    """Whether a record's config is expressible in the space (records of an older knob table are not)."""
    try:
        space.candidate(record.config)
    except (KeyError, ValueError):
        return False
    return True


def _ms(seconds: float) -> float | None:
    return round(seconds * 1e3, 4) if math.isfinite(seconds) else None


def plot_file(path: str | Path) -> Path:
    """The file `plot_history` writes for `path`: matplotlib adds ".png" to a name without an extension."""
    path = Path(path)
    return path if path.suffix[1:] else path.with_name(path.name.rstrip(".") + ".png")


def plot_formats() -> list[str]:
    """The extensions `plot_history` can write: matplotlib's formats, less pgf, which needs a LaTeX installation only
    found missing when the file is saved."""
    from matplotlib.backend_bases import FigureCanvasBase

    return sorted(set(FigureCanvasBase.get_supported_filetypes()) - {"pgf"})


def plottable(path: str | Path) -> Path:
    """The file `plot_history` writes for `path`, or an AdrenoError naming the formats it can write: checked before
    tuning, since the plot is written after it (matplotlib refuses an extension it lacks only then)."""
    path = plot_file(path)
    formats = plot_formats()
    if path.suffix[1:].lower() not in formats:
        raise AdrenoError(f"--plot {path}: cannot write a {path.suffix} plot; give a file ending in one of "
                          f"{', '.join('.' + f for f in formats)}")
    return path


def plot_history(report: TuneReport, path: str | Path) -> str:
    """Best latency against trials, one line per task, in the format of the file's extension (a `plottable` one);
    returns the file written (`plot_file`)."""
    import matplotlib

    path = plot_file(path)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for row in report.tasks:
        points = [(t, b * 1e3) for t, b in row["history"] if math.isfinite(b)]
        if points:
            layout = f" {row['layout']}" if row.get("layout") else ""
            ax.step(*zip(*points), where="post", marker=".", label=f"{row['task'][:40]} (x{row['weight']}){layout}")
    ax.set_xlabel("trials")
    ax.set_ylabel("best kernel time (ms)")
    ax.set_yscale("log")
    ax.set_title("adreno tune: best latency against trials")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def save_report(report: TuneReport, path: str | Path) -> None:
    Path(path).write_text(json.dumps(report.__dict__, indent=1, default=float))
