"""LightGBM cost models: the learned ranking model and its transfer variant (see the package docstring)."""

from __future__ import annotations

import os

import numpy as np

from .analytical import AnalyticalModel
from .base import CostModel, Records, SavedModelError, as_2d, rank_average, read_saved, restored, speed_targets

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
        ranks = rank_average(s[ok])  # 0 = fastest
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
        self.records = Records()

    def reset(self) -> None:
        self.records = Records()
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
        x = as_2d(features)
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
        x = as_2d(features)
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

        try:
            return lgb.Booster(model_str=text)
        except lgb.basic.LightGBMError as err:  # a saved file's booster text that LightGBM cannot parse
            raise ValueError(f"its booster: {err}") from None

    @classmethod
    def _from_state(cls, state: dict) -> "LearnedModel":
        model = cls(state["num_boost_round"], state["min_records"], state["params"],
                    AnalyticalModel._from_state(state["fallback"]), state.get("anchored", False))
        model.records = Records.from_state(state["records"])
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
        where = "" if isinstance(model, LearnedModel) else f"{model}: "
        if not isinstance(model, LearnedModel):
            model = LearnedModel.load(model)
        if model.booster is None:
            raise SavedModelError(f"{where}the source model has no trained booster (too few records)")
        kwargs.setdefault("params", model.params)  # keep boosting with the source's objective
        return cls(model.booster, **kwargs)

    @classmethod
    def load(cls, path) -> "CostModel":
        """A saved TransferModel is restored as it was; a saved LearnedModel becomes the source of a fresh one."""
        data = read_saved(path)
        if data["class"] == "LearnedModel":
            return cls.from_model(restored(LearnedModel, path, data["state"]))
        return super().load(path)

    def update(self, features, seconds, groups=None) -> None:
        if self.source is None:
            return super().update(features, seconds, groups)
        x = as_2d(features)
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
            x = as_2d(features)
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
        model.records = Records.from_state(state["records"])
        model.booster = cls._booster(state["booster"])
        return model
