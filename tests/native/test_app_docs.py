"""docs/app.md's examples as they are printed: its first ```c block (built against adreno_rt.h) and its first ```java
block (class Example, built against the Java API) each run an artifact once on zeros and print the first output's
shape."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from .rt_programs import build_c, build_java, run_java

DOC = Path(__file__).resolve().parents[2] / "docs" / "app.md"


def first_block(language: str) -> str:
    found = re.search(rf"^```{language}\n(.*?)^```$", DOC.read_text(), re.S | re.M)
    assert found, f"docs/app.md has no ```{language} block"
    return found.group(1)


def test_the_c_example_runs_as_printed(native_tiny, tmp_path):
    source = tmp_path / "example.c"
    source.write_text(first_block("c"))
    program = build_c(source, tmp_path / "example")
    proc = subprocess.run([str(program), str(native_tiny["texture"]), str(tmp_path / "programs.bin")],
                          capture_output=True, text=True, timeout=300)
    assert (proc.returncode, proc.stdout) == (0, "probs: [1, 10]\n"), proc.stderr
    assert (tmp_path / "programs.bin").stat().st_size > 0
    missing = subprocess.run([str(program), str(tmp_path / "nowhere")], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and missing.stderr.startswith("error 2: ") and "cannot open" in missing.stderr


def test_the_java_example_runs_as_printed(native_tiny, java_api, tmp_path):
    source = tmp_path / "Example.java"
    source.write_text(first_block("java"))
    build_java(source, java_api)
    proc = run_java(java_api, "Example", native_tiny["buffer"])
    assert (proc.returncode, proc.stdout) == (0, "probs: [1, 10]\n"), proc.stderr
