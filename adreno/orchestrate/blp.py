"""The optimal choice of kernels: a binary linear program over measured candidate costs.

Each candidate kernel k computes a set of primitives, reads `inputs` and writes `outputs` (the values of its
primitives that are consumed outside it or are model outputs). One binary variable x_k says whether k is chosen.

- every model output is written by at least one chosen kernel: sum_{k writes v} x_k >= 1;
- every value a chosen kernel reads is a graph input/weight or written by a chosen kernel:
  x_k - sum_{j writes v} x_j <= 0 for each input v of k that is not external;
- minimise sum_k cost_k x_k.

Before the solve, a kernel of several primitives that costs at least its primitives' single kernels together is
removed (they can replace it in any partition at no more cost), and so are candidates whose input has no producer
at all (they can never be chosen). The program
is solved exactly with HiGHS through `scipy.optimize.milp`; when a time limit stops it, the result carries HiGHS's
optimality gap rather than pretending to be optimal. Infeasible or empty sets are values (`Refusal`), never a
partition: a wrong partition would become a wrong artifact.
"""

from dataclasses import dataclass
from enum import Enum

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp


@dataclass(frozen=True)
class Kernel:
    """One candidate kernel: the primitives it computes, the values it reads and writes, its measured cost (s)."""

    name: str
    primitives: frozenset
    inputs: frozenset
    outputs: frozenset
    cost: float


class Refusal(Enum):
    """Why no partition came back."""

    EMPTY = "no candidate kernels"
    INFEASIBLE = "no set of candidate kernels computes every model output from the graph's inputs"
    NO_SOLUTION_IN_TIME = "the time limit stopped the solver before it found any feasible partition"


@dataclass(frozen=True)
class Choice:
    """The chosen kernels, their total predicted cost, and HiGHS's relative gap (0.0 when proven optimal)."""

    kernels: tuple
    cost: float
    gap: float
    optimal: bool
    solve_s: float


def solve(kernels, model_outputs, external, time_limit_s: float = 10.0):
    """Choose the cheapest set of `kernels` computing `model_outputs` from `external` values; a Choice or a Refusal."""
    import time

    if not kernels:
        return Refusal.EMPTY
    usable = _usable(_undominated(list(kernels)), set(external))
    writers = {}
    for i, k in enumerate(usable):
        for v in k.outputs:
            writers.setdefault(v, []).append(i)
    if not usable or any(v not in writers and v not in external for v in model_outputs):
        return Refusal.INFEASIBLE
    rows, lower, upper = [], [], []
    n = len(usable)
    for v in model_outputs:
        if v in external:
            continue
        row = np.zeros(n)
        row[writers[v]] = 1.0
        rows.append(row), lower.append(1.0), upper.append(np.inf)
    for i, k in enumerate(usable):
        for v in sorted(k.inputs - set(external)):
            row = np.zeros(n)
            row[writers[v]] -= 1.0
            row[i] += 1.0
            rows.append(row), lower.append(-np.inf), upper.append(0.0)
    costs = np.array([k.cost for k in usable])
    constraints = [LinearConstraint(np.array(rows), lower, upper)] if rows else []
    start = time.perf_counter()
    res = milp(costs, constraints=constraints, integrality=np.ones(n), bounds=Bounds(0, 1),
               options={"time_limit": time_limit_s})
    elapsed = time.perf_counter() - start
    if res.status == 2:
        return Refusal.INFEASIBLE
    if res.x is None:
        return Refusal.NO_SOLUTION_IN_TIME
    chosen = tuple(k for k, x in zip(usable, res.x) if x > 0.5)
    gap = float(getattr(res, "mip_gap", 0.0) or 0.0) if res.status != 0 else 0.0
    return Choice(chosen, float(sum(k.cost for k in chosen)), gap, res.status == 0, elapsed)


def _undominated(kernels):
    """Drop every kernel of several primitives that costs at least as much as its primitives' single kernels
    together. Those kernels compute the same primitives from the same external values and write every value it
    writes, so swapping them in keeps a partition feasible and costs no more: the optimum is unchanged, and the
    program is smaller and closes sooner (docs/orchestrate.md: mobilevit_xs's two transformer blocks)."""
    single = {next(iter(k.primitives)): k.cost for k in kernels if len(k.primitives) == 1}
    return [k for k in kernels if len(k.primitives) == 1 or not k.primitives <= single.keys()
            or sum(single[p] for p in k.primitives) > k.cost]


def _usable(kernels, external):
    """Drop, to a fixed point, kernels reading a value that no remaining kernel writes and that is not external."""
    while True:
        written = {v for k in kernels for v in k.outputs} | external
        kept = [k for k in kernels if k.inputs <= written]
        if len(kept) == len(kernels):
            return kept
        kernels = kept
