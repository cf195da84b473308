"""Compile defaults ranked by the analytical cost model (`adreno compile --defaults model`).

Without tuning records a kernel gets its family's rule default (`Family.default_config`: the occupancy rule's
biggest register tile that fills the device). With `--defaults model` the compile asks the analytical model
(Woodpecker's metrics with the prior weights, `adreno.costmodel.analytical`; nothing measured, nothing
trained) which config of the kernel's space it predicts fastest on the target's device facts, and uses that:

- the space is sampled: the rule default, every config one knob away from it, and `SAMPLES` configs drawn
  uniformly per knob (seeded by the workload key, so a compile is reproducible); the knobs are those the kernel
  applies (a Winograd stage's own);
- a candidate is kept only when its family's `check_config` accepts it and it meets the occupancy rule as the rule
  default does: it fills the device (`occupancy.fills`), or launches at least the rule default's work-items where
  the workload is too small to fill it, and its registers leave at least the waves in flight the rule default's do
  (up to the device's `latency_waves`);
- nor may it waste more of its work than the rule default does (its `branch_efficiency`, the useful share of the
  outputs and reduction steps it computes, at least the rule default's): a work-group wider than the outputs it
  covers is where TVM 0.27 drops a store guard (EfficientNet-SE's 1x1 conv on a 1x1 map with 32 work-items per
  pixel wrote past its output: `tests/test_zoo.py` caught it);
- the best score wins; a tie keeps the rule default. Families the model does not describe (pools, softmax, the
  Winograd transforms: no feature view or no launch) keep the rule.

Tuning records (`--records`) still win: a kernel with tuned knobs is never ranked (`Family.apply`).
Ranking is pure Python over a few thousand configs: tens to hundreds of milliseconds per kernel
(`Ranking.seconds`, in the manifest).
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass

import numpy as np

from ..schedules import staging
from ..schedules.occupancy import fills
from .analytical import AnalyticalModel
from .features import FEATURE_NAMES, device_limits, featurize

SAMPLES = 1500  # random configs per kernel on top of the rule default and its one-knob neighbours


@dataclass(frozen=True)
class Ranking:
    """What the model chose for one kernel: the config, its score (higher: predicted faster), the rule default and
    its score, how many legal candidates were scored and how long ranking took."""

    key: str
    family: str
    config: dict
    score: float
    rule: dict
    rule_score: float
    candidates: int
    seconds: float

    @property
    def changed(self) -> bool:
        return self.config != self.rule

    def to_json(self) -> dict:
        return {"family": self.family, "config": self.config, "score": round(self.score, 4), "rule": self.rule,
                "rule_score": round(self.rule_score, 4), "candidates": self.candidates,
                "seconds": round(self.seconds, 4)}


class RankedDefaults:
    """Ranks each kernel's space once (cached by workload key) for the device of the compile's `ScheduleContext`.
    Called by `TunedConfigs.default` as `ranker(family, matched, rule_config, ctx) -> config`."""

    def __init__(self, samples: int = SAMPLES):
        self.samples = samples
        self.rankings: dict[str, Ranking] = {}

    def __call__(self, family, matched, rule: dict, ctx) -> dict:
        if matched.key not in self.rankings:
            ranking = rank(family, matched, rule, ctx, self.samples)
            if ranking is None:
                return rule
            self.rankings[matched.key] = ranking
        return dict(self.rankings[matched.key].config)

    def summary(self) -> dict:
        """The manifest's account: how many kernels were ranked, how many differ from the rule, the slowest ranking
        and every ranked kernel's choice."""
        rankings = self.rankings.values()
        return {"ranked": len(self.rankings), "changed": sum(r.changed for r in rankings),
                "max_seconds": round(max((r.seconds for r in rankings), default=0.0), 4),
                "kernels": {key: r.to_json() for key, r in sorted(self.rankings.items())}}


def rank(family, matched, rule: dict, ctx, samples: int = SAMPLES) -> Ranking | None:
    """The model's pick for the kernel `matched` of `family` (None: the model does not describe it), among the
    configs the context's staging policy (`--staging`) allows, on the context's device facts."""
    started = time.perf_counter()
    workload = matched.workload
    rule_launch = family.launch(workload, rule)
    if family.features is None or rule_launch is None or family.features(workload, rule) is None:
        return None
    knobs = {k: v for k, v in staging.space(family.knobs, ctx.staging).items()
             if matched.knobs is None or k in matched.knobs}
    legal = [c for c in _candidates(rule, knobs, samples, matched.key)
             if _legal(family, workload, c, ctx, rule_launch)]
    features = featurize(workload, legal, device_limits(ctx.device), family.features)
    scores = AnalyticalModel().predict(features)
    branch = features[:, FEATURE_NAMES.index("log_branch_efficiency")]
    scores[branch < branch[0] - 1e-9] = -np.inf  # more wasted work than the rule default (see the module doc)
    best = int(np.argmax(scores))  # the rule default is first: a tie keeps it
    return Ranking(matched.key, family.name, legal[best], float(scores[best]), rule, float(scores[0]), len(legal),
                   time.perf_counter() - started)


def _candidates(rule: dict, knobs: dict, samples: int, key: str) -> list[dict]:
    """The rule default, its one-knob neighbours, then `samples` random configs (seeded by `key`), distinct."""
    found = {_frozen(rule): rule}
    for knob, choices in knobs.items():
        for value in choices:
            config = {**rule, knob: value}
            found.setdefault(_frozen(config), config)
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    names = list(knobs)
    draws = [rng.integers(len(knobs[k]), size=samples) for k in names]
    for row in zip(*draws):
        config = {**rule, **{k: knobs[k][int(i)] for k, i in zip(names, row)}}
        found.setdefault(_frozen(config), config)
    return list(found.values())


def _frozen(config: dict) -> tuple:
    return tuple(sorted(config.items()))


def _legal(family, workload, config: dict, ctx, rule_launch) -> bool:
    """In the family's space, and within the occupancy rule as the rule default is (see the module doc)."""
    try:
        family.check_config(workload, config, ctx)
    except ValueError:
        return False
    device = ctx.device
    launch = family.launch(workload, config)
    filled = fills(device, launch) or (not fills(device, rule_launch)
                                       and launch.work_items >= rule_launch.work_items)
    waves = min(device.latency_waves, device.resident_waves(rule_launch.registers))
    return filled and device.resident_waves(launch.registers) >= waves
