"""The run-time index checks of an artifact: which output holds the flags, which node each flag is, and the check.

A compile guards every gather or scatter whose indices are computed at run time (`adreno.frontend.index_guards`):
its kernels read a safe index in place of one outside the tensor and set the node's flag in one extra int32 output.
The manifest's `index_checks` names that output's plan tensor (the plan's last output) and the guarded nodes in flag
order. An executor returns the model's outputs without it, after `IndexChecks.checked`: a set flag is an
`IndexRangeError` (one line naming the node, exit status 2), never outputs computed from a replaced index. The native
harness reads the same manifest entry (native/harness/index_checks.cc).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import AdrenoError, ArtifactError

MANIFEST_KEY = "index_checks"


class IndexRangeError(AdrenoError):
    """A run's indices fell outside the tensor they index: ONNX makes that an error (onnxruntime refuses the input)."""


@dataclass(frozen=True)
class IndexChecks:
    """The flags' plan tensor (None: the artifact checks no index at run time) and the guarded nodes, in flag order
    (each {"node", "op", "sizes"})."""
    tensor: str | None = None
    nodes: tuple = ()

    @classmethod
    def of(cls, manifest: dict, plan_outputs: list[str]) -> IndexChecks:
        """The checks an artifact's manifest records, refused unless they name the plan's last output."""
        entry = manifest.get(MANIFEST_KEY)
        if entry is None:
            return cls()
        nodes = entry.get("nodes") if isinstance(entry, dict) else None
        if not isinstance(nodes, list) or not nodes or not plan_outputs or entry.get("tensor") != plan_outputs[-1] \
                or any(not isinstance(n, dict) or not isinstance(n.get("node"), str) for n in nodes):
            raise ArtifactError(f"the manifest's {MANIFEST_KEY} {str(entry)[:80]} do not name the plan's last output "
                                "and its nodes; recompile the model")
        return cls(entry["tensor"], tuple(nodes))

    def model_outputs(self, plan_outputs: list[str]) -> list[str]:
        """The plan's outputs that are the model's (all but the flags)."""
        return plan_outputs[:-1] if self.tensor else list(plan_outputs)

    def checked(self, outputs: list[np.ndarray]) -> list[np.ndarray]:
        """The model's outputs of a run whose outputs, flags last, are `outputs`; `IndexRangeError` if a flag is set."""
        if not self.tensor:
            return outputs
        flags = np.asarray(outputs[-1]).reshape(-1)
        bad = [node for node, flag in zip(self.nodes, flags) if flag]
        if bad:
            raise IndexRangeError(failure_line(bad[0], len(bad) - 1))
        return outputs[:-1]


def failure_line(node: dict, others: int) -> str:
    """The one line of a run whose indices went out of range (the harness writes the same words)."""
    sizes = node.get("sizes", [])
    ranges = ", ".join(f"{-s if node.get('wraps', True) else 0}..{s - 1}" for s in sizes)
    more = f" (and {others} more {'node' if others == 1 else 'nodes'})" if others else ""
    return (f"node {node['node']} ({node.get('op', '?')}): an index computed from this input is outside {ranges}, "
            f"which ONNX makes an error; no output is returned{more}")
