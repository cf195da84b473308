"""The CI subset of `tools/conformance.py`: ONNX's node cases, pytorch-converted and pytorch-operator cases and
8-channel cases behind a conv, each compiled with textures and with buffers and run on PoCL. The tool runs as a user
runs it (a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_subset_passes_or_refuses_in_one_line(tmp_path):
    report = tmp_path / "conformance.json"
    proc = subprocess.run([sys.executable, str(ROOT / "tools/conformance.py"), "--subset", "ci", "-j", "2",
                           "--json", str(report)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(report.read_text())
    results = data["cases"]
    assert {r["memory"] for r in results} == {"texture", "buffer"}
    assert {r["suite"] for r in results} == {"node", "pytorch", "operator", "wide"}
    bad = [r for r in results if r["status"] not in ("pass", "error")]
    assert not bad, "\n".join(f"{r['case']} [{r['memory']}] {r['status']}: {r.get('detail')}" for r in bad)
    errors = [r for r in results if r["status"] == "error"]
    for r in errors:
        assert "\n" not in r["detail"] and r["detail"].startswith("node "), r  # one line naming the node
    # parameters shipped as graph inputs (a Reshape's shape, a Resize's scales, ...) are bound with --bind and run
    # with the case's full input file, their twins with initializers pass too
    bound = {r["case"]: r["bound"] for r in results if r.get("bound")}
    assert {"node/test_reshape_negative_dim": ["shape"], "node/test_resize_upsample_scales_nearest": ["scales"],
            "node/test_constant_pad": ["pads", "value"]}.items() <= bound.items(), bound
    for r in results:
        if r["case"] in bound:
            twin = next(t for t in results if t["case"] == r["case"] + "+init" and t["memory"] == r["memory"])
            assert r["status"] == twin["status"] == "pass", (r, twin)
    assert "passes used --bind" in proc.stdout
    once_refused = ("antialias", "half_pixel_symmetric", "training_mode", "argmax", "maxpool_indices",
                    "start_out_of_bounds", "zero_size")
    computed = [r for r in results if any(form in r["case"] for form in once_refused)]
    assert len(computed) >= 2 * 9 and all(r["status"] == "pass" for r in computed), computed
    assert sum(r["status"] == "pass" for r in results) >= 0.9 * len(results)
    assert proc.stdout.startswith("suite") and "texture" in proc.stdout, "the table on stdout"
