"""Claims on configs among tuners that share one records file, so that no two measure the same config.

The records file alone keeps no duplicate (`Database.append_trials` drops a config another tuner recorded
meanwhile), but both tuners have then built and measured it. So before a round a tuner claims its proposals in the
sibling `<records>.claims` (a JSON list, rewritten whole under the records file's lock, `Database.locked`): a
config is granted only if no record measured it and no other live tuner claims it. Each tuner excludes the others'
claims from what it proposes and measures only what it was granted.

A claim names its owner (`host:pid`). On this host a claim lives while its process runs, so a killed tuner's
claims lapse at once; a claim of another host (a records file on a shared file system) lapses after `TTL_S`. A
tuner's new claim replaces its earlier ones (their measurements are in the records by then), and `release` drops
them when it closes (the file is removed once no claim is left)."""

from __future__ import annotations

import json
import os
import socket
import time

from ..options import Precision
from ..support.processes import process_alive
from ..records import Database, Record

TTL_S = 3600.0  # a claim of another host counts this long (a round of farm measurements takes minutes)


def _identity(workload: str, device: str, precision: Precision, config: dict) -> tuple:
    return workload, device, precision, json.dumps(config, sort_keys=True)


class Claims:
    """The claims file of `database`'s records, as one tuner (`owner`) sees and writes it."""

    def __init__(self, database: Database, owner: str | None = None):
        self.database = database
        self.path = database.path.with_name(database.path.name + ".claims")
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}"

    def others(self, workload: str, device: str, precision: Precision) -> list[dict]:
        """The configs of this workload that other live tuners claim (read without the lock: the file is replaced
        whole, and `claim` checks again under it)."""
        return [c["config"] for c in self._live() if c["owner"] != self.owner
                and (c["workload"], c["device"], c["precision"]) == (workload, device, precision)]

    def claim(self, workload: str, device: str, precision: Precision, configs: list[dict]) -> list[dict]:
        """The configs granted to this tuner, in order: those no record measured and no other live tuner claims.
        They replace this tuner's earlier claims."""
        with self.database.locked():
            kept = [c for c in self._live() if c["owner"] != self.owner]
            taken = {_identity(c["workload"], c["device"], c["precision"], c["config"]) for c in kept}
            granted = []
            for config in configs:
                identity = _identity(workload, device, precision, config)
                extra = {"precision": precision} if precision is not Precision.FP32 else {}
                if identity in taken or self.database.measured(Record(workload, device, config, extra=extra)):
                    continue
                taken.add(identity)
                granted.append(config)
            now = time.time()
            self._write(kept + [{"owner": self.owner, "time": now, "workload": workload, "device": device,
                                 "precision": precision, "config": c} for c in granted])
        return granted

    def release(self) -> None:
        """Drop this tuner's claims (it stops measuring)."""
        if not self.path.exists():
            return
        with self.database.locked():
            self._write([c for c in self._live() if c["owner"] != self.owner])

    def _live(self) -> list[dict]:
        """The claims whose owner still measures; a damaged claims file claims nothing (it only saves time)."""
        try:
            claims = json.loads(self.path.read_text())
        except (OSError, ValueError, RecursionError):
            return []
        if not isinstance(claims, list):
            return []
        host, now = socket.gethostname(), time.time()
        return [c for c in claims if _well_formed(c) and _alive(c, host, now)]

    def _write(self, claims: list[dict]) -> None:
        """Replace the claims file whole; with no claims left, remove it (nothing is left beside the records)."""
        if not claims:
            self.path.unlink(missing_ok=True)
            return
        staged = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            staged.write_text(json.dumps(claims))
            os.replace(staged, self.path)
        except OSError:  # a full disk: no half-written file beside the records (the caller reports it)
            staged.unlink(missing_ok=True)
            raise


def _well_formed(claim) -> bool:
    return isinstance(claim, dict) and all(isinstance(claim.get(k), str) for k in
                                           ("owner", "workload", "device", "precision")) \
        and isinstance(claim.get("config"), dict) and isinstance(claim.get("time"), (int, float))


def _alive(claim: dict, host: str, now: float) -> bool:
    owner_host, _, pid = claim["owner"].rpartition(":")
    if owner_host == host:
        return pid.isdigit() and process_alive(int(pid))
    return now - claim["time"] < TTL_S

