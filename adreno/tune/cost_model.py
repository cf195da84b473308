"""Cost models: score candidates so that HIGHER means predicted FASTER. One interface, several models.

    model.predict(features) -> scores                   one score per feature row (see features.featurize)
    model.update(features, seconds, groups=None)        measured medians; inf/nan = failed (ranked worst);
                                                        groups = task id per row (use the workload key: it stays
                                                        the same across runs): times are only compared within a
                                                        task. Records add to those seen before; an exact repeat
                                                        (same task, features, seconds) is ignored, so passing all
                                                        records at every round is fine
    model.fit(features, seconds, groups=None)           train on exactly these records (forget earlier ones)
    model.save(path) / CostModel.load(path)             JSON, round-trips exactly (same predictions)

- RandomModel: a seeded hash of each feature row (deterministic per row, uninformative): the baseline.
- AnalyticalModel: Woodpecker's cost = prod(metric_i ^ w_i), i.e. log(seconds) = w . log(metrics) + c_task; the w
  are fitted by ridge least squares towards prior weights on measured records with per-task normalisation (log
  seconds and log metrics centred per task, which removes c_task), so with no data it ranks by the prior.
- LearnedModel: LightGBM lambdarank on all features; relevance = within-task rank of speed; retrained from scratch
  on all data at each update; ranks with its AnalyticalModel until it has `min_records` usable records.
  `make_model("learned")` is `anchored`: the boosting starts from the fitted AnalyticalModel's scores (LightGBM
  `init_score`, added back at predict), so the trees learn the analytical model's residual ranking errors.
- TransferModel: a LearnedModel whose boosting starts from a booster pre-trained on another device (LightGBM
  `init_model`): see the class doc for why continued boosting rather than a weighted union of old and new data.

`make_model(spec)` builds one from "random" | "analytical" | "learned" | "learned-regression" | "transfer:PATH";
`ranking_quality(scores, seconds, groups)` measures how well scores order measured times within each task.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import numpy as np

from adreno.tune import features as _features

# ---------------------------------------------------------------------------------------------------- helpers


def _as_2d(features) -> np.ndarray:
    x = np.asarray(features, dtype=np.float64)
    if x.ndim == 1:
        return x.reshape(0, 0) if x.size == 0 else x.reshape(1, -1)
    return x


def _group_labels(groups, n: int) -> list[str]:
    """Task ids as strings (JSON-safe, stable across updates); None = one task."""
    if groups is None:
        return ["0"] * n
    labels = [str(g) for g in np.asarray(groups, dtype=object).reshape(-1)]
    if len(labels) != n:
        raise ValueError(f"groups has {len(labels)} entries for {n} rows")
    return labels


def _seconds(seconds, n: int) -> np.ndarray:
    s = np.asarray(seconds, dtype=np.float64).reshape(-1)
    if len(s) != n:
        raise ValueError(f"seconds has {len(s)} entries for {n} rows")
    return np.where(np.isfinite(s) & (s > 0), s, np.inf)


def _codes(labels: list[str]) -> np.ndarray:
    _, codes = np.unique(np.asarray(labels, dtype=object).astype(str), return_inverse=True)
    return codes.reshape(-1)


def _worst_filled_log_time(seconds: np.ndarray, codes: np.ndarray) -> np.ndarray:
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
    speed = -_worst_filled_log_time(seconds, codes)
    out = np.zeros(len(speed))
    for g in np.unique(codes):
        idx = np.flatnonzero(codes == g)
        spread = speed[idx].std()
        out[idx] = (speed[idx] - speed[idx].mean()) / spread if spread > 0 else 0.0
    return out


def _rank_average(values: np.ndarray) -> np.ndarray:
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


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(), b - b.mean()
    denom = math.sqrt(float((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / denom) if denom > 0 else 0.0


class _Records:
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
        s = _seconds(seconds, len(x))
        labels = _group_labels(groups, len(x))
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
        return np.asarray(self.x, dtype=np.float64), np.asarray(self.s, dtype=np.float64), _codes(self.g)

    def state(self) -> dict:
        return {"x": self.x, "s": [_json_float(v) for v in self.s], "g": self.g}

    @classmethod
    def from_state(cls, state: dict) -> "_Records":
        records = cls()
        if state["s"]:
            records.add(np.asarray(state["x"], dtype=np.float64), [float(v) for v in state["s"]], state["g"])
        return records


def _json_float(v: float) -> float | str:
    return v if math.isfinite(v) else "inf"


# ------------------------------------------------------------------------------------------------- interface


class CostModel:
    """Scores candidates' feature rows; higher = predicted faster."""

    name = "base"

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
        tmp.write_text(json.dumps({"class": type(self).__name__, "state": self._state()}))
        os.replace(tmp, path)

    @classmethod
    def load(cls, path) -> "CostModel":
        data = json.loads(Path(path).read_text())
        klass = _CLASSES.get(data.get("class"))
        if klass is None:
            raise ValueError(f"{path}: not a saved cost model (class {data.get('class')!r})")
        if not issubclass(klass, cls):
            raise TypeError(f"{path} holds a {klass.__name__}, not a {cls.__name__}")
        return klass._from_state(data["state"])


class RandomModel(CostModel):
    """Uninformative baseline: each feature row's score is a hash of (seed, row bytes), uniform in [0, 1)."""

    name = "random"

    def __init__(self, seed: int = 0):
        self.seed = int(seed)

    def predict(self, features: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(_as_2d(features))
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
PRIOR_WEIGHTS: dict[str, float] = {"parallelism": -1.0, "occupancy": -0.5, "memory_efficiency": -0.5,
                                   "register_reuse": -0.5, "local_reuse": -0.2, "bank_conflict": -0.3,
                                   "branch_efficiency": -1.0, "local_fit": -1.0, "registers": 0.2,
                                   "work_reduction": -0.7}


class AnalyticalModel(CostModel):
    """log(seconds) = w . x + c_task over x = feature columns `columns` (the log metrics by default).

    update() fits w by ridge least squares towards `prior` on all successful records so far, after centring x and
    log(seconds) within each task (per-task normalisation: a task's overall speed is not the model's business).
    Failed records are left out of the fit (a failure is not a smooth function of the metrics). The ridge
    strength `ridge` is in units of records: with few records the prior dominates, with many the data."""

    name = "analytical"

    def __init__(self, columns: list[int] | None = None, prior: list[float] | None = None, ridge: float = 4.0):
        self.columns = list(_features.METRIC_COLUMNS if columns is None else columns)
        if prior is None:
            prior = ([PRIOR_WEIGHTS[m] for m in _features.METRIC_NAMES] if columns is None
                     else [0.0] * len(self.columns))
        if len(prior) != len(self.columns):
            raise ValueError(f"{len(prior)} prior weights for {len(self.columns)} columns")
        self.prior = np.asarray(prior, dtype=np.float64)
        self.weights = self.prior.copy()
        self.ridge = float(ridge)
        self.records = _Records()

    def reset(self) -> None:
        self.records = _Records()
        self.weights = self.prior.copy()

    def predict(self, features: np.ndarray) -> np.ndarray:
        x = _as_2d(features)
        if len(x) == 0:
            return np.zeros(0)
        return -(x[:, self.columns] @ self.weights)

    def update(self, features, seconds, groups=None) -> None:
        x = _as_2d(features)
        if len(x) == 0:
            return
        if self.records.add(x[:, self.columns], seconds, groups).any():
            self._fit()

    def _fit(self) -> None:
        x, s, codes = self.records.arrays()
        ok = np.isfinite(s)
        x, y, codes = x[ok], np.log(s[ok]), codes[ok]
        if len(y) == 0:
            self.weights = self.prior.copy()
            return
        for g in np.unique(codes):
            idx = codes == g
            x[idx] -= x[idx].mean(axis=0)
            y[idx] -= y[idx].mean()
        k = len(self.columns)
        a = x.T @ x + self.ridge * np.eye(k)
        b = x.T @ y + self.ridge * self.prior
        self.weights = np.linalg.solve(a, b)

    def _state(self) -> dict:
        return {"columns": self.columns, "prior": self.prior.tolist(), "ridge": self.ridge,
                "weights": self.weights.tolist(), "records": self.records.state()}

    @classmethod
    def _from_state(cls, state: dict) -> "AnalyticalModel":
        model = cls(state["columns"], state["prior"], state["ridge"])
        model.weights = np.asarray(state["weights"], dtype=np.float64)
        model.records = _Records.from_state(state["records"])
        return model


# LightGBM parameters: small models (tuning data is hundreds to a few thousand rows per device), deterministic.
LGB_PARAMS = {"objective": "lambdarank", "learning_rate": 0.1, "num_leaves": 15, "min_data_in_leaf": 5,
              "min_sum_hessian_in_leaf": 1e-3, "feature_fraction": 0.9, "bagging_fraction": 1.0, "lambda_l2": 1.0,
              "verbose": -1, "deterministic": True, "force_col_wise": True, "num_threads": 1, "seed": 0}
RELEVANCE_LEVELS = 16  # lambdarank labels 0..15, linear gains
MAX_QUERY = 1000  # rows per lambdarank query


def relevance(seconds: np.ndarray, codes: np.ndarray, levels: int = RELEVANCE_LEVELS) -> np.ndarray:
    """Within-task relevance from the rank of speed: the fastest gets levels-1, the slowest success ~0, failed 0."""
    rel = np.zeros(len(seconds), dtype=np.int64)
    for g in np.unique(codes):
        idx = np.flatnonzero(codes == g)
        s = seconds[idx]
        ok = np.isfinite(s)
        m = int(ok.sum())
        if m == 0:
            continue
        ranks = _rank_average(s[ok])  # 0 = fastest
        frac = 1.0 - ranks / max(m - 1, 1) if m > 1 else np.ones(1)
        rel[idx[ok]] = np.floor(frac * (levels - 1) + 1e-9).astype(np.int64)
    return rel


class LearnedModel(CostModel):
    """LightGBM lambdarank on the feature rows, one query per task; retrained on all records at every update.
    With `params={"objective": "regression"}` (`make_model("learned-regression")`) it regresses `speed_targets`
    instead: on one bench_search run's records (5 random 70/30 splits) Pearson 0.899 against 0.870 for lambdarank,
    top-5 recall 0.68 against 0.57, Spearman 0.90 against 0.89.

    Until there are `min_records` usable records (successful ones in tasks with at least two distinct times) it
    ranks with its `fallback` AnalyticalModel, which it keeps updated too. `anchored` (lambdarank only): the
    boosting starts from that fallback's scores, so the model goes from the analytical ranking to the learned one
    without a jump when the first booster is trained, and its trees correct the analytical model instead of
    replacing it. On the records of four bench_search runs (ResNet-18's 3 heaviest tasks, 5 random 70/30 splits
    each) held-out Pearson went 0.873/0.830/0.890/0.851 -> 0.899/0.864/0.908/0.872 (mean 0.861 -> 0.886)."""

    name = "learned"

    def __init__(self, num_boost_round: int = 60, min_records: int = 8, params: dict | None = None,
                 fallback: AnalyticalModel | None = None, anchored: bool = False):
        self.anchored = bool(anchored)
        self.num_boost_round = int(num_boost_round)
        self.min_records = int(min_records)
        self.params = {**LGB_PARAMS, **(params or {})}
        self.fallback = fallback if fallback is not None else AnalyticalModel()
        self.booster = None
        self.records = _Records()

    def reset(self) -> None:
        self.records = _Records()
        self.booster = None
        self.fallback.reset()

    # -- data
    def _dataset(self):
        """Rows sorted by query (lambdarank wants contiguous queries), their relevance labels and query sizes.
        Relevance is ranked over the whole task; a task of more than MAX_QUERY rows is cut into random queries of
        at most MAX_QUERY rows (LightGBM refuses queries over 10,000 rows, and pairs cost grows with the size)."""
        x, s, codes = self.records.arrays()
        labels = relevance(s, codes)
        query = codes * 0
        rng = np.random.default_rng(0)
        for g in np.unique(codes):
            idx = np.flatnonzero(codes == g)
            if len(idx) > MAX_QUERY:
                chunks = -(-len(idx) // MAX_QUERY)
                query[idx[rng.permutation(len(idx))]] = np.arange(len(idx)) % chunks
        order = np.lexsort((query, codes))  # by task, then query; stable within
        keys = codes[order].astype(np.int64) * (int(query.max()) + 1) + query[order]
        _, sizes = np.unique(keys, return_counts=True)
        return x[order], labels[order], sizes, s[order], codes[order]

    def usable_records(self) -> int:
        if not len(self.records):
            return 0
        _, s, codes = self.records.arrays()
        count = 0
        for g in np.unique(codes):
            ok = s[codes == g]
            ok = ok[np.isfinite(ok)]
            if len(np.unique(ok)) >= 2:
                count += len(ok)
        return count

    def _train(self, init_model=None, num_boost_round: int | None = None):
        import lightgbm as lgb

        dataset_params = {"verbose": -1, "min_data_in_bin": 1}
        if self.params["objective"] == "regression":
            x, s, codes = self.records.arrays()
            data = lgb.Dataset(x, label=speed_targets(s, codes), params=dataset_params, free_raw_data=True)
            params = dict(self.params)
        else:
            x, labels, sizes, _, _ = self._dataset()
            data = lgb.Dataset(x, label=labels, group=sizes, params=dataset_params, free_raw_data=True,
                               init_score=self._prior(x))
            params = {**self.params, "label_gain": list(range(RELEVANCE_LEVELS)),
                      "lambdarank_truncation_level": int(min(max(sizes.max(), 1), 256))}
        params["min_data_in_leaf"] = min(self.params["min_data_in_leaf"], max(1, len(x) // 4))
        return lgb.train(params, data, num_boost_round=num_boost_round or self.num_boost_round,
                         init_model=init_model, keep_training_booster=False)

    # -- interface
    def update(self, features, seconds, groups=None) -> None:
        x = _as_2d(features)
        if len(x) == 0:
            return
        fresh = self.records.add(x, seconds, groups)
        self.fallback.update(x, seconds, groups)
        if fresh.any() and self.usable_records() >= self.min_records:
            self.booster = self._train()

    def _prior(self, x: np.ndarray) -> np.ndarray | None:
        """The boosting's starting scores: the fitted analytical model's (`anchored` lambdarank), else None."""
        if not self.anchored or self.params["objective"] == "regression":
            return None
        return self.fallback.predict(x)

    def predict(self, features: np.ndarray) -> np.ndarray:
        x = _as_2d(features)
        if len(x) == 0:
            return np.zeros(0)
        if self.booster is None:
            return self.fallback.predict(x)
        if x.shape[1] != self.booster.num_feature():
            raise ValueError(f"feature rows have {x.shape[1]} columns, the model {self.booster.num_feature()}")
        scores = np.asarray(self.booster.predict(x), dtype=np.float64)
        prior = self._prior(x)
        return scores if prior is None else scores + prior

    def _state(self) -> dict:
        return {"num_boost_round": self.num_boost_round, "min_records": self.min_records, "params": self.params,
                "anchored": self.anchored, "fallback": self.fallback._state(), "records": self.records.state(),
                "booster": None if self.booster is None else self.booster.model_to_string()}

    @staticmethod
    def _booster(text: str | None):
        if text is None:
            return None
        import lightgbm as lgb

        return lgb.Booster(model_str=text)

    @classmethod
    def _from_state(cls, state: dict) -> "LearnedModel":
        model = cls(state["num_boost_round"], state["min_records"], state["params"],
                    AnalyticalModel._from_state(state["fallback"]), state.get("anchored", False))
        model.records = _Records.from_state(state["records"])
        model.booster = cls._booster(state["booster"])
        return model


class TransferModel(LearnedModel):
    """A LearnedModel that starts from another device's booster and keeps boosting on this device's records.

    Why continued boosting (LightGBM `init_model`) rather than a weighted union of old and new data: the source
    model's scores become the starting point of every retraining, so with no or few new records the ranking is the
    source device's (which is what makes transfer pay off early), and each new record only has to teach the
    *difference* between the devices, which a few small trees (`num_boost_round`, default 30) express; the source
    records need not be kept or re-read, so retraining costs the same as for a model of the new device alone,
    and a union's source weight (how much to trust the other device as new data arrives) would be one more knob
    to tune per device pair. The source trees are never modified: every update retrains the new trees from the
    source booster on all of this device's records."""

    name = "transfer"

    def __init__(self, source=None, num_boost_round: int = 30, min_records: int = 2, params: dict | None = None,
                 fallback: AnalyticalModel | None = None):
        super().__init__(num_boost_round, min_records, params, fallback)
        self.source = source  # lightgbm.Booster pre-trained on another device (None: behaves as LearnedModel)

    @classmethod
    def from_records(cls, features, seconds, groups=None, source_rounds: int = 100, **kwargs) -> "TransferModel":
        """Pre-train on another device's records, then return a model with no records of this device yet."""
        pre = LearnedModel(num_boost_round=source_rounds, min_records=1, params=kwargs.get("params"))
        pre.update(features, seconds, groups)
        if pre.booster is None:
            raise ValueError("the source records give nothing to rank (need tasks with two or more distinct times)")
        return cls(pre.booster, **kwargs)

    @classmethod
    def from_model(cls, model: "LearnedModel | str | os.PathLike", **kwargs) -> "TransferModel":
        """A fresh transfer model whose source is a trained (Learned or Transfer) model or its saved file."""
        if not isinstance(model, LearnedModel):
            model = LearnedModel.load(model)
        if model.booster is None:
            raise ValueError("the source model has no trained booster (too few records)")
        kwargs.setdefault("params", model.params)  # keep boosting with the source's objective
        return cls(model.booster, **kwargs)

    @classmethod
    def load(cls, path) -> "CostModel":
        """A saved TransferModel is restored as it was; a saved LearnedModel becomes the source of a fresh one."""
        data = json.loads(Path(path).read_text())
        if data.get("class") == "LearnedModel":
            return cls.from_model(LearnedModel._from_state(data["state"]))
        return super().load(path)

    def update(self, features, seconds, groups=None) -> None:
        if self.source is None:
            return super().update(features, seconds, groups)
        x = _as_2d(features)
        if len(x) == 0:
            return
        if x.shape[1] != self.source.num_feature():
            raise ValueError(f"feature rows have {x.shape[1]} columns, the source model {self.source.num_feature()}")
        fresh = self.records.add(x, seconds, groups)
        self.fallback.update(x, seconds, groups)
        if fresh.any() and self.usable_records() >= self.min_records:
            self.booster = self._train(init_model=self.source)

    def predict(self, features: np.ndarray) -> np.ndarray:
        if self.booster is None and self.source is not None:
            x = _as_2d(features)
            if len(x) == 0:
                return np.zeros(0)
            if x.shape[1] != self.source.num_feature():
                raise ValueError(f"feature rows have {x.shape[1]} columns, the source {self.source.num_feature()}")
            return np.asarray(self.source.predict(x), dtype=np.float64)
        return super().predict(features)

    def _state(self) -> dict:
        return {**super()._state(), "source": None if self.source is None else self.source.model_to_string()}

    @classmethod
    def _from_state(cls, state: dict) -> "TransferModel":
        model = cls(cls._booster(state["source"]), state["num_boost_round"], state["min_records"], state["params"],
                    AnalyticalModel._from_state(state["fallback"]))
        model.records = _Records.from_state(state["records"])
        model.booster = cls._booster(state["booster"])
        return model


_CLASSES = {c.__name__: c for c in (RandomModel, AnalyticalModel, LearnedModel, TransferModel)}
MODEL_NAMES = ["random", "analytical", "learned", "learned-regression", "transfer:PATH"]


def make_model(spec: str) -> CostModel:
    """"random" | "analytical" | "learned" | "learned-regression" | "transfer:PATH" (PATH: a saved LearnedModel or
    TransferModel; it keeps the objective it was trained with)."""
    if spec == "random":
        return RandomModel()
    if spec == "analytical":
        return AnalyticalModel()
    if spec == "learned":
        return LearnedModel(anchored=True)
    if spec == "learned-regression":
        return LearnedModel(params={"objective": "regression"})
    if spec.startswith("transfer:") and len(spec) > len("transfer:"):
        return TransferModel.from_model(spec[len("transfer:"):])
    raise ValueError(f"unknown cost model {spec!r}; known: {', '.join(MODEL_NAMES)}")


def ranking_quality(predicted_scores, seconds, groups=None) -> dict:
    """How well scores order measured times, within each task, averaged over tasks weighted by their size.

    pearson: of -log(seconds) vs score; spearman: of the ranks; top1/top5: |predicted top-k & true top-k| / k
    (top1 = the predicted best is the true best). Failed rows (inf/nan) count as the task's slowest (x2). Tasks
    with fewer than two rows are skipped; `groups` counts the tasks used."""
    scores = np.asarray(predicted_scores, dtype=np.float64).reshape(-1)
    s = _seconds(seconds, len(scores))
    codes = _codes(_group_labels(groups, len(scores)))
    speed = -_worst_filled_log_time(s, codes)
    totals = {"pearson": 0.0, "spearman": 0.0, "top1": 0.0, "top5": 0.0}
    weight, used = 0, 0
    for g in np.unique(codes):
        idx = np.flatnonzero(codes == g)
        if len(idx) < 2:
            continue
        p, t = scores[idx], speed[idx]
        m = len(idx)
        totals["pearson"] += m * _pearson(p, t)
        totals["spearman"] += m * _pearson(_rank_average(p), _rank_average(t))
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
