"""The native readers fuzzed in every test run (issue 46): params.npz, an input .npy, the program-binary blob,
manifest.json and plan.json through the harness's own readers (native/fuzz/readers_fuzz.cc), built once per session
with AddressSanitizer and UBSan (libFuzzer with Debian's clang-15, else g++ and a seeded mutation loop). Each kind
starts from its corpus in fuzz_corpus/: seeds from a compiled artifact and the files that crashed the harness before
(`crash-*`: a zip offset near 2^32, negative and 2^62 extents, a zero-size member, numpy-refused headers, blobs whose
damaged payload carries a recomputed checksum, a 20,000-deep manifest, a param's scope switched, ...), each run as it
is first, then mutated for 20,000 cases or 8 s. Any sanitizer report, escaping exception, crash or timeout fails."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

NATIVE = Path(__file__).resolve().parents[2] / "native"
CORPUS = Path(__file__).resolve().parent / "fuzz_corpus"
KINDS = ("npz", "npy", "blob", "manifest", "plan")
# each kind stops at whichever comes first: 40 s of fuzzing at most in CI (a quiet 2-core machine runs the 20,000 of the
# fast kinds in 1-6 s; the blob's in some 12 s)
RUNS_PER_KIND, SECONDS_PER_KIND = 20_000, 8


@pytest.fixture(scope="session")
def fuzzer(tmp_path_factory) -> Path:
    import tvm_ffi

    out = tmp_path_factory.mktemp("fuzz-build")
    site = Path(tvm_ffi.__file__).resolve().parent.parent
    proc = subprocess.run(["make", "-C", str(NATIVE), "-j2", "fuzz", f"SITE={site}", f"OUT={out}"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out / "fuzz" / "adreno-fuzz-readers"


@pytest.mark.parametrize("kind", KINDS)
def test_the_readers_survive_a_bounded_fuzz_run(fuzzer, kind, tmp_path):
    work = tmp_path / "found"  # new inputs go here, never into the corpus of the tests
    work.mkdir()
    env = {**os.environ, "ADRENO_FUZZ_KIND": kind, "ADRENO_FUZZ_CORPUS": str(CORPUS), "TMPDIR": str(tmp_path),
           "ASAN_OPTIONS": "detect_leaks=0", "UBSAN_OPTIONS": "print_stacktrace=1"}
    proc = subprocess.run([str(fuzzer), "-seed=1", f"-runs={RUNS_PER_KIND}", f"-max_total_time={SECONDS_PER_KIND}",
                           "-timeout=10", "-rss_limit_mb=2048", f"-artifact_prefix={tmp_path}/", str(work),
                           str(CORPUS / kind)], capture_output=True, text=True, timeout=120, env=env)
    report = proc.stderr[-4000:]
    assert proc.returncode == 0, report
    for finding in ("AddressSanitizer", "runtime error:", "UndefinedBehaviorSanitizer", "deadly signal", "timeout"):
        assert finding not in proc.stderr, report
    assert "Done " in proc.stdout + proc.stderr, report
    assert not list(tmp_path.glob("crash-*")) and not list(tmp_path.glob("oom-*")), report



@pytest.mark.parametrize("binary", ["sha256-check", "sha256-check-portable"])
def test_sha256_is_hashlib_s(fuzzer, binary, tmp_path):
    """The digest the harness proves files with, both block functions (x86 SHA extensions, portable), on every
    length across the 64-byte block and padding boundaries and on a large file, equals Python's."""
    import hashlib
    import random

    rng = random.Random(7)
    files = []
    for length in [*range(0, 300), 1 << 20 | 17]:
        path = tmp_path / f"{length}.bin"
        path.write_bytes(rng.randbytes(length))
        files.append(path)
    proc = subprocess.run([str(fuzzer.parent / binary), *map(str, files)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [hashlib.sha256(p.read_bytes()).hexdigest() for p in files]
