"""Building and running C programs against the app library (native/rt/adreno_rt.h, libadreno_rt.so)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np

from adreno.native.plugin import LIB_DIR

HEADER_DIR = Path(__file__).resolve().parents[2] / "native" / "rt"
JAVA_SOURCES = Path(__file__).resolve().parents[2] / "native" / "java"
HERE = Path(__file__).resolve().parent


def build_c(source: Path, program: Path, *flags: str) -> Path:
    """Compile and link `source` (C11) against the header and libadreno_rt.so; returns the program."""
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Werror", "-O1", f"-I{HEADER_DIR}", str(source), *flags,
                    f"-L{LIB_DIR}", "-ladreno_rt", f"-Wl,-rpath,{LIB_DIR}", "-pthread", "-o", str(program)],
                   check=True, capture_output=True, text=True)
    return program


def run_check(program: Path, artifact, inputs: list[np.ndarray], io_dir: Path, blob=None, threads: int = 0):
    """Run rt_check.c on `inputs` (in the model's order); returns (its JSON report, the outputs)."""
    io_dir.mkdir(parents=True, exist_ok=True)
    for i, array in enumerate(inputs):
        np.ascontiguousarray(array).tofile(io_dir / f"in{i}.bin")
    proc = subprocess.run([str(program), str(artifact), str(io_dir), str(blob or "-"), str(threads)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    outputs = [np.fromfile(io_dir / f"out{i}.bin", dtype=port["dtype"]).reshape(port["shape"])
               for i, port in enumerate(report["outputs"])]
    return report, outputs


def build_java(source: Path, classes: Path) -> None:
    """Compile `source` against the Java API's classes in `classes` (where its classes go too)."""
    subprocess.run(["javac", "-cp", str(classes), "-d", str(classes), str(source)], check=True, capture_output=True,
                   text=True)


def run_java(classes: Path, main: str, *args) -> subprocess.CompletedProcess:
    """Run class `main` on the desktop JVM with the JNI library's directory on java.library.path."""
    return subprocess.run(["java", f"-Djava.library.path={LIB_DIR}", "-cp", str(classes), main, *map(str, args)],
                          capture_output=True, text=True, timeout=600)
