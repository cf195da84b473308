"""What every schedule family is handed: one frozen `ScheduleContext` per compile or tuning build.

A family needs four things besides the function: the device's facts (occupancy, local memory, the device class the
staging policy looks at), the TVM target (its work-group limit, what dlight's rules take), the `--staging` policy,
and where tuned knobs come from. They arrive here as explicit values, never looked up by name from a target, so a
compile for a device measured a moment ago, or capped at `--image-max`, schedules with exactly that device.

The knob source is an interface with two implementations:
- compile's `adreno.records.TunedConfigs` (the best records of each workload key; a refused record moves on to
  the next-fastest one; defaults may be ranked by the analytical model under `--defaults model`);
- the tuner's `Candidate` below (the one config being measured; a config the family refuses is an error).
Both are also dicts of workload key -> knobs, which is how the Winograd rewrite and the texture planner read the
tuned layout records.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol

from ..options import Host, Staging


class KnobSource(Protocol):
    """Where a family's knobs come from (see the module docstring)."""

    def tuned(self, key: str) -> dict | None:
        """The tuned knobs of workload `key` (None: none; the family's defaults apply)."""

    def refuse(self, key: str, reason: str) -> dict | None:
        """The family's check refused the knobs `tuned` gave for `key`: the next knobs to try, None to fall back to
        the defaults, or raise ValueError(reason) when a refusal is an error."""

    def default(self, family, matched, rule: dict, ctx: ScheduleContext) -> dict:
        """The knobs of a kernel without tuned ones, given the family's `rule` default."""


class Candidate(dict):
    """The tuner's knob source: workload key -> the one config being built. Its knobs are checked like any, and a
    refusal is the candidate's error (ValueError), not a reason to try other knobs."""

    def tuned(self, key: str) -> dict | None:
        return self.get(key)

    def refuse(self, key: str, reason: str) -> dict | None:
        raise ValueError(reason)

    def default(self, family, matched, rule: dict, ctx: ScheduleContext) -> dict:  # noqa: ARG002 - the interface
        return rule


@dataclass(frozen=True)
class ScheduleContext:
    """The device (`adreno.targets.devices.AdrenoDevice`), its TVM target, the staging policy and the knob source."""

    device: object
    target: object
    staging: Staging = Staging.AUTO
    knobs: KnobSource = field(default_factory=Candidate)

    @classmethod
    def for_device(cls, device, host: Host = Host.ANDROID, staging: Staging = Staging.AUTO,
                   knobs: KnobSource | None = None) -> ScheduleContext:
        """The context of a compile for `device`, its target built by `adreno.targets.target.tvm_target`."""
        from ..targets.target import tvm_target  # inside: loads TVM at import

        return cls(device, tvm_target(device, host=host), staging, Candidate() if knobs is None else knobs)

    def candidate(self, config: dict) -> ScheduleContext:
        """This context with the tuner's knob source for `config` (workload key -> knobs)."""
        return replace(self, knobs=Candidate(config))

    @property
    def max_threads(self) -> int:
        """Work-items per work-group the target allows schedules (TVM's max_num_threads; 256 when it says none)."""
        attrs = getattr(self.target, "attrs", None)
        for attr in ("max_num_threads", "max_threads_per_block"):
            value = attrs.get(attr) if attrs is not None else None
            if value is not None:
                return int(value)
        return 256
