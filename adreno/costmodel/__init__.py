"""The cost model: features of a candidate, models that score them, and the compile defaults they rank.

It sits below both compile and tune: `features.py` (Woodpecker's metrics of a candidate seen through its family's
feature view, `Family.features`, and the feature rows), the models below, and `ranked_defaults.py` (`adreno compile
--defaults model`). It may import the schedules, the device table and the workloads; never compile, tune or the
CLI (`tests/test_architecture.py` checks it).

Models score candidates so that HIGHER means predicted FASTER. One interface, several models.

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

from ..errors import AdrenoError
from ..support.paths import regular_file
from .analytical import AnalyticalModel
from .base import CostModel, RandomModel, ranking_quality
from .learned import LearnedModel, TransferModel

__all__ = ["AnalyticalModel", "CostModel", "LearnedModel", "MODEL_NAMES", "RandomModel", "TransferModel",
           "make_model", "ranking_quality"]

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
        return TransferModel.from_model(regular_file(spec[len("transfer:"):], "--model transfer:"))
    raise AdrenoError(f"unknown cost model {spec!r}; known: {', '.join(MODEL_NAMES)}")
