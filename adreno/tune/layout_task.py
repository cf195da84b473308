"""A layout task: a Winograd-eligible conv whose weight layout (direct OIHW/OIHW4o, or Winograd-transformed) is a
knob searched together with the knobs of the chosen layout (AL-Ansor). Its batches are split among the layouts by how
fast each has proved (`layout_quota`)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from functools import cached_property


from ..options import Memory
from ..records import layout_workload, packed_workload
from ..schedules import conv2d_direct, conv2d_texture, conv2d_winograd, staging
from ..compiler.winograd import select_tile
from . import builder
from .space import SearchSpace
from .task import Task

LAYOUT = "conv2d_layout"  # the family of layout tasks (not a schedule module: a layout task spans two)
TILES = (0, 2, 4)  # 0: direct conv, OIHW weight; m: Winograd F(m x m, 3 x 3), weight transformed to (m+2)^2 x O x C


def layout_features(texture: bool):
    """The feature view of a layout task's candidates (texture memory: through `conv2d_texture`'s view at `tile` 0),
    its row carrying `tile` and every knob of the config."""
    direct = (conv2d_texture if texture else conv2d_direct).FAMILY.features

    def view(workload, config: dict):
        if int(config.get("tile", 0)) == 0:
            seen = direct(workload, {k: v for k, v in config.items() if k != "tile"})
            return replace(seen, row={**config, **seen.row})
        return conv2d_winograd.layout_features(workload, config)

    return view


@dataclass
class LayoutTask(Task):
    """A Winograd-eligible conv (3x3, stride 1, groups 1, constant weight) whose weight layout is a knob: `tile` 0
    keeps the direct conv (the knobs of `conv2d_direct`, or of `conv2d_texture` in texture memory, apply), 2 or 4
    rewrites it into Winograd stages (the `conv2d_winograd` stage knobs apply; packed stages in texture memory). Its
    key is the one `adreno.compiler.winograd.choose_tile` reads (`adreno.records.layout_key`); a candidate is measured
    as the conv's
    whole pipeline, built from a one-conv module (`builder.build_layout`; in texture memory with the packing of
    its NCHW input and the unpacking of its output, the same for every layout)."""

    memory: Memory = Memory.BUFFER

    @cached_property
    def workload(self):
        return layout_workload(self.key)

    @property
    def features(self):
        """The cost model's view of a candidate: that of the direct (or texture) family at `tile` 0, else the
        Winograd GEMM's (`layout_features`)."""
        return layout_features(self.memory is Memory.TEXTURE)

    @property
    def _direct(self):
        """(direct family module, the workload it sees)."""

        if self.memory is Memory.TEXTURE:
            return conv2d_texture.FAMILY, packed_workload(self.workload)
        return conv2d_direct.FAMILY, self.workload

    def space(self) -> SearchSpace:
        """`tile` joined with the knobs of the direct schedule (active at tile 0) and of the Winograd stages
        (active at tile 2 and 4; a knob of both, buffers' `cooperative`, at every tile), minus what the schedules'
        validators refuse."""

        direct, direct_wl = self._direct
        packed, ctx = self.memory is Memory.TEXTURE, self.context()
        stage_knobs = {k: v for k, v in conv2d_winograd.KNOBS.items() if k != "tile"}

        def valid(config: dict) -> bool:
            m = config["tile"]
            try:
                if m == 0:
                    direct.check_config(direct_wl, {k: config[k] for k in direct.knobs}, ctx)
                for stage in conv2d_winograd.stage_workloads(self.workload, m, packed) if m else ():
                    knobs = conv2d_winograd.STAGE_KNOBS[conv2d_winograd.base_stage(stage[0])]
                    conv2d_winograd.check_config(stage, {k: config[k] for k in knobs}, ctx)
            except ValueError:
                return False
            return True

        shared = set(direct.knobs) & set(stage_knobs)  # `cooperative` of buffers: one knob for both layouts
        conditions = {**{k: ("tile", (0,)) for k in direct.knobs if k not in shared},
                      **{k: ("tile", TILES[1:]) for k in stage_knobs if k not in shared}}
        knobs = staging.space({"tile": list(TILES), **direct.knobs, **stage_knobs}, self.staging)
        return SearchSpace(knobs, valid, conditions)

    def layout_default(self, tile: int) -> dict:
        """The default knobs of one layout."""

        if tile == 0:
            direct, direct_wl = self._direct
            return {"tile": 0, **direct.default_config(direct_wl, self.context())}
        return conv2d_winograd.layout_default(self.workload, tile, self.context(), packed=self.memory is Memory.TEXTURE)

    def default_config(self) -> dict:
        """The layout the fixed rule of `--winograd auto` picks, with its default knobs."""
        return self.layout_default(select_tile(self.workload))

    def seed_configs(self) -> list[dict]:
        """Every layout's defaults, the rule's first: the search starts from all three layouts."""
        default = self.default_config()
        return [default] + [self.layout_default(t) for t in TILES if t != default["tile"]]

    # the conv's input, its float64 numpy reference, the conv's whole pipeline under the candidate's layout
    input_specs, reference, build = builder.layout_input_specs, builder.layout_reference, builder.build_layout

    def proposals(self, n: int) -> int:
        return 3 * n

    def choose(self, proposals: list, n: int, space: SearchSpace, records: list, taken: set, rng) -> list:
        """The batch split among the layouts by `layout_quota` (trials go to the layouts that win), each layout's
        share filled in the strategy's (model-ranked) order from the proposals, topped up with random candidates of
        that layout."""
        stats = layout_stats(records)
        quota = layout_quota({t: (v["best_ms"] or math.inf) if v["trials"] else None for t, v in stats.items()}, n)
        axis = space.names.index("tile")
        chosen = []
        for candidate in itertools.chain(proposals, (space.random(rng) for _ in range(100 * n))):
            if not any(quota.values()):
                break
            if candidate is None or candidate in taken or candidate in chosen:
                continue
            tile = TILES[candidate[axis]]
            if quota[tile] > 0:
                quota[tile] -= 1
                chosen.append(candidate)
        return chosen

    def layouts(self, records: list) -> dict:
        """The chosen layout (that of the best record; None before any success), and per layout its trials and
        best time."""
        per = layout_stats(records)
        ok = {t: v["best_ms"] for t, v in per.items() if v["best_ms"] is not None}
        return {"layout": layout_name(min(ok, key=ok.get)) if ok else None,
                "layouts": {layout_name(t): v for t, v in per.items()}}


def layout_stats(records: list) -> dict:
    """tile -> {"trials", "best_ms" (None before a success)} over a layout task's records."""
    per = {t: {"trials": 0, "best_ms": None} for t in TILES}
    for record in records:
        entry = per[record.config["tile"]]
        entry["trials"] += 1
        if record.ok:
            entry["best_ms"] = min(entry["best_ms"] or math.inf, round(record.median * 1e3, 4))
    return per


def layout_quota(best_ms: dict, n: int, sharpness: float = 4.0) -> dict:
    """How many of n candidates each layout gets: shares proportional to (best / layout's best) ** sharpness over the
    layouts measured so far (a layout 1.25x slower than the best gets 0.41 of the winner's share, 2x slower 0.06;
    a layout with only failures gets none; one not measured yet counts as the best), rounded by largest remainder.
    `best_ms`: layout -> its best time (None: not measured, inf: only failures)."""
    known = [v for v in best_ms.values() if v is not None and math.isfinite(v)]
    top = min(known, default=1.0)
    weights = {t: 1.0 if v is None else (top / v) ** sharpness if math.isfinite(v) else 0.0
               for t, v in best_ms.items()}
    total = sum(weights.values()) or 1.0
    shares = {t: n * w / total for t, w in weights.items()}
    quota = {t: int(share) for t, share in shares.items()}
    for t in sorted(shares, key=lambda t: quota[t] - shares[t])[:n - sum(quota.values())]:
        quota[t] += 1
    return quota


def layout_name(tile: int | None) -> str | None:
    """How reports name a layout: "direct" (tile 0), "winograd-f2", "winograd-f4"."""
    return None if tile is None else "direct" if tile == 0 else f"winograd-f{tile}"
