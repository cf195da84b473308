"""The README is the front door (issue 50): at most 200 lines, every link resolves, and its five commands from an
.onnx file to a shipped artifact run as printed. Three things stand in for what cannot exist here, each labelled:
the model is one PyTorch exported for ONNX's own test data (`model.onnx`), the phones behind the tracker are one
PoCL agent registered under the README's key (`adreno.farm.local.LocalFarm`, the processes `adreno farm tracker`
and `adreno farm agent` start), and the NDK's clang is the AArch64 cross compiler. The only edits to the commands:
the tracker's port (a free one) and `--trials 200` cut to 4."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import onnx

from adreno.farm.local import LocalFarm

from .phonebox.conftest import CROSS_CC

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# a Conv2d with padding as PyTorch exports it, from ONNX's own test data: a model we did not write
MODEL = Path(onnx.__file__).parent / "backend/test/data/pytorch-converted/test_Conv2d_padding/model.onnx"
ELF_MACHINE_AARCH64 = 183


def five_commands() -> list[str]:
    """The command lines of the README's first code block under "Your own model", comments removed."""
    text = README.read_text()
    section = text[text.index("## Your own model"):]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def test_the_front_door_is_short_and_its_links_resolve():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert len(links) >= 20, links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, missing


def test_the_five_commands_run_as_printed(tmp_path):
    commands = five_commands()
    assert [c.split()[1] for c in commands] == ["compile", "run", "tune", "compile", "run"], commands
    shutil.copy(MODEL, tmp_path / "model.onnx")
    farm = LocalFarm(agents=1, key="adreno-740", log_dir=str(tmp_path / "farm-logs"))
    try:
        farm.wait_registered(1)
        env = {**farm.env, "TVM_NDK_CC": CROSS_CC, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
               "ADRENO_CACHE_DIR": str(tmp_path / "cache")}
        for command in commands:
            line = command.replace("127.0.0.1:9190", farm.tracker).replace("--trials 200", "--trials 4")
            proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=900)
            assert proc.returncode == 0, (line, proc.stdout[-2000:], proc.stderr[-2000:])
    finally:
        farm.close()
    records = [json.loads(line) for line in (tmp_path / "model.jsonl").read_text().splitlines()]
    assert records and {r["device"].split("|")[0] for r in records} == {"adreno-740"}, records[:2]  # measured there
    shipped = tmp_path / "ship/model"
    manifest = json.loads((shipped / "manifest.json").read_text())
    assert manifest["host_library"] == "lib.so" and manifest["tuned_kernels"], manifest.get("tuned_kernels")
    header = (shipped / "lib.so").read_bytes()[:20]
    assert header[:4] == b"\x7fELF" and int.from_bytes(header[18:20], "little") == ELF_MACHINE_AARCH64
