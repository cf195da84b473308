"""Woodpecker's analytical cost model (see the package docstring)."""

from __future__ import annotations

import numpy as np

from . import features as _features
from .base import CostModel, Records, as_2d

PRIOR_WEIGHTS: dict[str, float] = {"parallelism": -1.0, "occupancy": -0.5, "memory_efficiency": -0.5,
                                   "register_reuse": -0.5, "local_reuse": -0.2, "bank_conflict": -0.3,
                                   "branch_efficiency": -1.0, "local_fit": -1.0, "registers": 0.2,
                                   "work_reduction": -0.7, "sync_efficiency": -0.5}


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
        self.records = Records()

    def reset(self) -> None:
        self.records = Records()
        self.weights = self.prior.copy()

    def predict(self, features: np.ndarray) -> np.ndarray:
        x = as_2d(features)
        if len(x) == 0:
            return np.zeros(0)
        return -(x[:, self.columns] @ self.weights)

    def update(self, features, seconds, groups=None) -> None:
        x = as_2d(features)
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
        model.records = Records.from_state(state["records"])
        return model


# LightGBM parameters: small models (tuning data is hundreds to a few thousand rows per device), deterministic.
