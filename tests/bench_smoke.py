"""Running a tools/ benchmark's `--smoke` mode and checking its JSON (tests/test_bench_smoke_*.py).

A smoke run is the tiny model for one round: it proves the tool still runs end to end on this machine (PoCL, a
LocalFarm on loopback) and still writes the fields the docs quote its figures from. Tools are leaves: they run as
subprocesses, never imported. The fields are paths into the JSON: `a.b` a key, `*` every item of a list or every
value of a dict (at least one), so `models.*.cold.program_load_s` is that key in every model's row."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def smoke(tool: str, tmp_path: Path, timeout: float = 600) -> tuple[subprocess.CompletedProcess, object]:
    """Run `tools/<tool> --smoke --json <tmp>/<tool>.json` in `tmp_path`; the process and the JSON it wrote (None
    when it wrote none)."""
    out = tmp_path / f"{Path(tool).stem}.json"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / tool), "--smoke", "--json", str(out)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=timeout)
    return proc, json.loads(out.read_text()) if out.exists() else None


def missing(document, paths: list[str]) -> list[str]:
    """The paths of `paths` that `document` lacks (an empty list or dict under `*` counts as lacking)."""
    return [path for path in paths if not _has(document, path.split("."))]


def _has(value, parts: list[str]) -> bool:
    if not parts:
        return True
    head, rest = parts[0], parts[1:]
    if head == "*":
        items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
        items = list(items)
        return bool(items) and all(_has(item, rest) for item in items)
    return isinstance(value, dict) and head in value and _has(value[head], rest)


def check(tool: str, tmp_path: Path, fields: list[str]) -> object:
    """Smoke `tool`, assert it succeeded and its JSON has `fields`; the JSON."""
    proc, document = smoke(tool, tmp_path)
    output = f"{tool}: status {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert document is not None, f"no JSON written; {output}"
    assert not missing(document, fields), (missing(document, fields), output)
    assert proc.returncode == 0, output
    return document
