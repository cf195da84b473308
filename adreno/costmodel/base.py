"""The cost-model interface and what every model shares: record bookkeeping, per-task targets, the random
baseline, and `ranking_quality` (see the package docstring)."""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import numpy as np

from ..errors import AdrenoError


def as_2d(features) -> np.ndarray:
    x = np.asarray(features, dtype=np.float64)
    if x.ndim == 1:
        return x.reshape(0, 0) if x.size == 0 else x.reshape(1, -1)
    return x


def group_labels(groups, n: int) -> list[str]:
    """Task ids as strings (JSON-safe, stable across updates); None = one task."""
    if groups is None:
        return ["0"] * n
    labels = [str(g) for g in np.asarray(groups, dtype=object).reshape(-1)]
    if len(labels) != n:
        raise ValueError(f"groups has {len(labels)} entries for {n} rows")
    return labels


def as_seconds(seconds, n: int) -> np.ndarray:
    s = np.asarray(seconds, dtype=np.float64).reshape(-1)
    if len(s) != n:
        raise ValueError(f"seconds has {len(s)} entries for {n} rows")
    return np.where(np.isfinite(s) & (s > 0), s, np.inf)


def task_codes(labels: list[str]) -> np.ndarray:
    _, codes = np.unique(np.asarray(labels, dtype=object).astype(str), return_inverse=True)
    return codes.reshape(-1)


def worst_filled_log_time(seconds: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """log(seconds), failed rows set to their task's slowest successful time + log 2 (or 0 if none succeeded)."""
    out = np.empty(len(seconds))
    for g in np.unique(codes):
        idx = np.flatnonzero(codes == g)
        s = seconds[idx]
        ok = np.isfinite(s)
        logs = np.log(np.where(ok, s, 1.0))
        worst = logs[ok].max() + math.log(2.0) if ok.any() else 0.0
        out[idx] = np.where(ok, logs, worst)
    return out


def speed_targets(seconds: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Regression labels: -log(seconds) standardised within each task (failed rows: the task's slowest + log 2)."""
    speed = -worst_filled_log_time(seconds, codes)
    out = np.zeros(len(speed))
    for g in np.unique(codes):
        idx = np.flatnonzero(codes == g)
        spread = speed[idx].std()
        out[idx] = (speed[idx] - speed[idx].mean()) / spread if spread > 0 else 0.0
    return out


def rank_average(values: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1 (ties get their average rank)."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    sorted_v = values[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_v[j + 1] == sorted_v[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0
        i = j + 1
    return ranks


def pearson(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(), b - b.mean()
    denom = math.sqrt(float((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / denom) if denom > 0 else 0.0


class Records:
    """The records a model has seen: feature rows, seconds (inf = failed) and task labels. An exact repeat of a
    record already held (same task, same features, same seconds) is ignored, so passing all records again at every
    update does not weigh them twice."""

    def __init__(self):
        self.x: list[list[float]] = []
        self.s: list[float] = []
        self.g: list[str] = []
        self._keys: set = set()

    def add(self, x: np.ndarray, seconds, groups) -> np.ndarray:
        """Add rows; returns the mask of the rows that were new."""
        s = as_seconds(seconds, len(x))
        labels = group_labels(groups, len(x))
        if self.x and len(self.x[0]) != x.shape[1]:
            raise ValueError(f"feature rows have {x.shape[1]} columns, earlier ones {len(self.x[0])}")
        fresh = np.zeros(len(x), dtype=bool)
        for i, (row, sec, label) in enumerate(zip(x.tolist(), s.tolist(), labels)):
            key = (label, tuple(row), sec)
            if key in self._keys:
                continue
            self._keys.add(key)
            self.x.append(row)
            self.s.append(sec)
            self.g.append(label)
            fresh[i] = True
        return fresh

    def __len__(self) -> int:
        return len(self.s)

    def arrays(self):
        return np.asarray(self.x, dtype=np.float64), np.asarray(self.s, dtype=np.float64), task_codes(self.g)

    def state(self) -> dict:
        return {"x": self.x, "s": [json_float(v) for v in self.s], "g": self.g}

    @classmethod
    def from_state(cls, state: dict) -> "Records":
        records = cls()
        if state["s"]:
            records.add(np.asarray(state["x"], dtype=np.float64), [float(v) for v in state["s"]], state["g"])
        return records


def json_float(v: float) -> float | str:
    return v if math.isfinite(v) else "inf"


class CostModel:
    """Scores candidates' feature rows; higher = predicted faster."""

    name = "base"
    registry: dict[str, type] = {}  # class name -> class, for `load`

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        CostModel.registry[cls.__name__] = cls

    def predict(self, features: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def update(self, features: np.ndarray, seconds: np.ndarray, groups: np.ndarray | None = None) -> None:
        """Learn from measured records, added to those seen before (exact repeats are ignored)."""

    def reset(self) -> None:
        """Forget the records seen (a TransferModel keeps its source model)."""

    def fit(self, features: np.ndarray, seconds: np.ndarray, groups: np.ndarray | None = None) -> None:
        """Train on exactly these records (reset, then update)."""
        self.reset()
        self.update(features, seconds, groups)

    # persistence: {"class": ..., "state": ...} as JSON
    def _state(self) -> dict:
        return {}

    @classmethod
    def _from_state(cls, state: dict) -> "CostModel":
        return cls()

    def save(self, path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        try:
            tmp.write_text(json.dumps({"class": type(self).__name__, "state": self._state()}))
            os.replace(tmp, path)
        finally:  # replaced: gone already; a failed write or replace leaves no stray .tmp beside `path`
            tmp.unlink(missing_ok=True)

    @classmethod
    def load(cls, path) -> "CostModel":
        data = read_saved(path)
        klass = CostModel.registry.get(data["class"])
        if klass is None:
            raise SavedModelError(f"{path}: not a saved cost model (class {data['class']!r})")
        if not issubclass(klass, cls):
            raise SavedModelError(f"{path} holds a {klass.__name__}, not a {cls.__name__}")
        return restored(klass, path, data["state"])


class SavedModelError(AdrenoError, ValueError):
    """A saved cost-model file (`--model transfer:FILE`) that cannot be read back: one line naming the file and
    what is wrong with it, not the traceback of whichever lookup met it first (a ValueError, as before)."""


def read_saved(path) -> dict:
    """The {"class": name, "state": object} a `save` wrote to `path`, checked for that shape: a model file can be
    any file a user names."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SavedModelError(f"{path}: not a saved cost model (not JSON text: {err})") from None
    if not (isinstance(data, dict) and isinstance(data.get("class"), str) and isinstance(data.get("state"), dict)):
        raise SavedModelError(f"{path}: not a saved cost model (a JSON object with a \"class\" name and a "
                              "\"state\" object)")
    return data


def restored(klass: type, path, state: dict) -> "CostModel":
    """`klass` rebuilt from a saved state; a state missing a field or holding one of the wrong type (an edited or
    foreign file) is a SavedModelError."""
    try:
        return klass._from_state(state)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
        raise SavedModelError(f"{path}: a malformed saved {klass.__name__} ({type(err).__name__}: {err})") from None


class RandomModel(CostModel):
    """Uninformative baseline: each feature row's score is a hash of (seed, row bytes), uniform in [0, 1)."""

    name = "random"

    def __init__(self, seed: int = 0):
        self.seed = int(seed)

    def predict(self, features: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(as_2d(features))
        if len(x) == 0:
            return np.zeros(0)
        key = self.seed.to_bytes(8, "little", signed=True)
        return np.array([int.from_bytes(hashlib.blake2b(row.tobytes(), digest_size=8, key=key).digest(), "little")
                         / 2.0 ** 64 for row in x])

    def _state(self) -> dict:
        return {"seed": self.seed}

    @classmethod
    def _from_state(cls, state: dict) -> "RandomModel":
        return cls(state["seed"])


# Prior exponents of cost = prod(metric ^ w) (log seconds per unit log metric), in features.METRIC_NAMES order:
# time ~ 1/parallelism and ~ 1/branch efficiency when under-filled / ragged; memory efficiency and reuse matter
# less than proportionally (caches, latency hiding); register pressure costs mildly until it spills; Winograd's
# fewer MACs pay off less than proportionally (its transforms cost time too).


def quality_per_task(predicted_scores, seconds, groups) -> dict[str, dict]:
    """`ranking_quality` of each task (group label -> its pearson, spearman, top1, top5 and `rows`), for tasks of at
    least two rows."""
    scores = np.asarray(predicted_scores, dtype=np.float64).reshape(-1)
    s = as_seconds(seconds, len(scores))
    labels = np.asarray(group_labels(groups, len(scores)), dtype=object)
    out = {}
    for label in dict.fromkeys(labels.tolist()):
        idx = np.flatnonzero(labels == label)
        if len(idx) >= 2:
            quality = ranking_quality(scores[idx], s[idx])
            out[label] = {k: round(quality[k], 4) for k in ("pearson", "spearman", "top1", "top5")} | {"rows": len(idx)}
    return out


def ranking_quality(predicted_scores, seconds, groups=None) -> dict:
    """How well scores order measured times, within each task, averaged over tasks weighted by their size.

    pearson: of -log(seconds) vs score; spearman: of the ranks; top1/top5: |predicted top-k & true top-k| / k
    (top1 = the predicted best is the true best). Failed rows (inf/nan) count as the task's slowest (x2). Tasks
    with fewer than two rows are skipped; `groups` counts the tasks used."""
    scores = np.asarray(predicted_scores, dtype=np.float64).reshape(-1)
    s = as_seconds(seconds, len(scores))
    codes = task_codes(group_labels(groups, len(scores)))
    speed = -worst_filled_log_time(s, codes)
    totals = {"pearson": 0.0, "spearman": 0.0, "top1": 0.0, "top5": 0.0}
    weight, used = 0, 0
    for g in np.unique(codes):
        idx = np.flatnonzero(codes == g)
        if len(idx) < 2:
            continue
        p, t = scores[idx], speed[idx]
        m = len(idx)
        totals["pearson"] += m * pearson(p, t)
        totals["spearman"] += m * pearson(rank_average(p), rank_average(t))
        for k, key in ((1, "top1"), (5, "top5")):
            k_eff = min(k, m)
            pred_top = set(np.argsort(-p, kind="mergesort")[:k_eff].tolist())
            true_top = set(np.argsort(-t, kind="mergesort")[:k_eff].tolist())
            totals[key] += m * len(pred_top & true_top) / k_eff
        weight += m
        used += 1
    result = {key: (value / weight if weight else float("nan")) for key, value in totals.items()}
    result["groups"] = used
    return result
