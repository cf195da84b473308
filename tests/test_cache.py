"""Tests of the OpenCL program-binary cache (adreno/cache/) on a real OpenCL device (PoCL), no mocks.

Tests that only exercise the store (keys, entry format, concurrency, eviction, crash guard, TVM blob)
use a synthetic device identity; those that build and run kernels use the suite's PoCL device.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import multiprocessing
import pathlib
import random
import struct
import time

import numpy as np
import pyopencl as cl
import pytest

import adreno
from adreno.cache import format as cache_format
from adreno.cache import (
    CACHE_FORMAT_VERSION,
    DeviceIdentity,
    ProgramCache,
    cache_key,
    default_cache_dir,
    read_tvm_precompiled_blob,
    tvm_precompiled_blob,
)
from adreno.errors import KernelBuildError

FAKE = DeviceIdentity("Test Platform", "OpenCL 3.0 test", "Test Device", "1.2.3", "OpenCL C 1.2")

VADD = """
__kernel void vadd(__global const float *a, __global const float *b, __global float *c) {
    int i = get_global_id(0);
    c[i] = a[i] + 2.0f * b[i];
}
"""
PREFIX_SIZE = 16  # magic, format version, header length
DIGEST_SIZE = 32


# -- helpers ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cl_context(pocl_device) -> cl.Context:
    """A context on the PoCL device the suite uses (conftest's `pocl_device`: one whose compiler works)."""
    return cl.Context([pocl_device])


def check_vadd(context: cl.Context, program: cl.Program) -> None:
    """Run the vadd kernel of ``program`` and compare with numpy."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal(1000).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    mf = cl.mem_flags
    buf_a = cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
    buf_b = cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b)
    buf_c = cl.Buffer(context, mf.WRITE_ONLY, a.nbytes)
    queue = cl.CommandQueue(context)
    cl.Kernel(program, "vadd")(queue, a.shape, None, buf_a, buf_b, buf_c)
    c = np.empty_like(a)
    cl.enqueue_copy(queue, c, buf_c)
    queue.finish()
    np.testing.assert_allclose(c, a + 2.0 * b, rtol=1e-6)


def entry_files(root: pathlib.Path) -> list[pathlib.Path]:
    return sorted(root.glob("*.clbin"))


def disk_use(root: pathlib.Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def header_len(entry: bytes) -> int:
    return struct.unpack_from("<I", entry, 12)[0]


def cache_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "adreno.cache" and r.levelno >= logging.WARNING]


# -- keys ------------------------------------------------------------------------------------------------


def test_key_changes_with_every_field_and_only_then(monkeypatch):
    base = cache_key(FAKE, VADD, "-cl-fast-relaxed-math")
    assert len(base) == 64 and int(base, 16) >= 0
    assert cache_key(DeviceIdentity(*dataclasses.astuple(FAKE)), VADD, "-cl-fast-relaxed-math") == base

    variants = [cache_key(dataclasses.replace(FAKE, **{name: "x"}), VADD, "-cl-fast-relaxed-math")
                for name in FAKE.cache_fields]
    # the vendor only names the device's RPC key: it is not part of the identity a binary is keyed on
    assert cache_key(dataclasses.replace(FAKE, vendor="x"), VADD, "-cl-fast-relaxed-math") == base
    variants.append(cache_key(FAKE, VADD + " ", "-cl-fast-relaxed-math"))
    variants.append(cache_key(FAKE, VADD, "-cl-mad-enable"))
    variants.append(cache_key(FAKE, VADD, ""))
    monkeypatch.setattr(adreno, "__version__", "99.0")
    variants.append(cache_key(FAKE, VADD, "-cl-fast-relaxed-math"))
    monkeypatch.undo()
    monkeypatch.setattr(cache_format, "tvm_version", lambda: "0.0.0-other")
    variants.append(cache_key(FAKE, VADD, "-cl-fast-relaxed-math"))
    monkeypatch.undo()
    monkeypatch.setattr(cache_format, "CACHE_FORMAT_VERSION", CACHE_FORMAT_VERSION + 1)
    variants.append(cache_key(FAKE, VADD, "-cl-fast-relaxed-math"))
    monkeypatch.undo()

    assert len(variants) == 11 and base not in variants and len(set(variants)) == len(variants)
    assert cache_key(FAKE, VADD, "-cl-fast-relaxed-math") == base


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("ADRENO_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert default_cache_dir() == tmp_path / "elsewhere"
    monkeypatch.delenv("ADRENO_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / ".cache" / "adreno" / "programs"


# -- store: put / get, entry format ----------------------------------------------------------------------


def test_put_get_round_trip_and_entry_layout(tmp_path):
    store = ProgramCache(tmp_path)
    assert store.get(FAKE, VADD, "") is None
    binary = bytes(range(256)) * 3
    store.put(FAKE, VADD, "", binary)
    assert store.get(FAKE, VADD, "") == binary
    assert store.get(FAKE, VADD, "-DX") is None
    assert store.stats == {"hits": 1, "misses": 2, "rejected": 0, "evictions": 0,
                           "bundled": 0, "bundle_rejected": 0, "disabled": 0}

    (path,) = entry_files(tmp_path)
    assert path.name == cache_key(FAKE, VADD, "") + ".clbin"
    data = path.read_bytes()
    magic, version, hlen = struct.unpack_from("<8sII", data)
    assert (magic, version) == (b"ADRCLBIN", CACHE_FORMAT_VERSION)
    header = data[PREFIX_SIZE:PREFIX_SIZE + hlen]
    assert hashlib.sha256(header).hexdigest() == cache_key(FAKE, VADD, "")
    assert b'"driver_version":"1.2.3"' in header and hashlib.sha256(VADD.encode()).hexdigest().encode() in header
    assert data[PREFIX_SIZE + hlen:PREFIX_SIZE + hlen + DIGEST_SIZE] == hashlib.sha256(binary).digest()
    assert data[PREFIX_SIZE + hlen + DIGEST_SIZE:] == binary


def test_disabled_cache_neither_reads_nor_writes(tmp_path, cl_context):
    store = ProgramCache(tmp_path / "c", enabled=False)
    store.put(FAKE, VADD, "", b"abc")
    assert store.get(FAKE, VADD, "") is None
    program, how = store.build(cl_context, VADD)
    assert how == "disabled"
    check_vadd(cl_context, program)
    assert not (tmp_path / "c").exists()


# -- build through the cache on a real device ------------------------------------------------------------


def test_miss_then_hit_runs_correctly(tmp_path, cl_context):
    program, how = ProgramCache(tmp_path).build(cl_context, VADD, "-cl-mad-enable")
    assert how == "miss"
    check_vadd(cl_context, program)
    again = ProgramCache(tmp_path)
    program, how = again.build(cl_context, VADD, "-cl-mad-enable")
    assert how == "hit"
    check_vadd(cl_context, program)
    assert again.stats == {"hits": 1, "misses": 0, "rejected": 0, "evictions": 0,
                           "bundled": 0, "bundle_rejected": 0, "disabled": 0}
    identity = DeviceIdentity.from_cl_device(cl_context.devices[0])
    assert again.get(identity, VADD, "-cl-mad-enable") == program.get_info(cl.program_info.BINARIES)[0]
    assert ProgramCache(tmp_path).build(cl_context, VADD, "")[1] == "miss"  # options are part of the key


def test_source_build_failure_raises_kernel_build_error(tmp_path, cl_context):
    store = ProgramCache(tmp_path)
    with pytest.raises(KernelBuildError) as info:
        store.build(cl_context, "__kernel void broken(__global float *a) { a[0] = undefined_name; }")
    assert "undefined_name" in str(info.value)  # the build log names the culprit
    assert entry_files(tmp_path) == []


def test_random_byte_flips_never_reach_the_driver(tmp_path, cl_context, caplog):
    store = ProgramCache(tmp_path)
    assert store.build(cl_context, VADD)[1] == "miss"
    (path,) = entry_files(tmp_path)
    good = path.read_bytes()
    header_end = PREFIX_SIZE + header_len(good) + DIGEST_SIZE
    rng = random.Random(20240601)
    caplog.set_level(logging.WARNING, logger="adreno.cache")
    for trial in range(50):
        corrupt = bytearray(good)
        region = range(header_end) if trial % 2 else range(len(good))  # half the trials hit magic/header/digest
        for pos in rng.sample(region, rng.randint(1, 16)):
            corrupt[pos] ^= rng.randint(1, 255)
        path.write_bytes(corrupt)
        before = dict(store.stats)
        caplog.clear()

        program, how = store.build(cl_context, VADD)

        assert how == "miss", f"trial {trial}: a corrupted entry was served"
        assert store.stats["rejected"] == before["rejected"] + 1
        assert store.stats["hits"] == before["hits"]
        (line,) = cache_warnings(caplog)
        assert "bad entry" in line  # rejected by header or checksum, not by the driver
        check_vadd(cl_context, program)
        assert store.verify()["bad"] == 0  # the entry was replaced by a good one
    assert store.build(cl_context, VADD)[1] == "hit"


def _truncated(entry: bytes) -> bytes:
    return entry[: len(entry) // 2]


def _wrong_magic(entry: bytes) -> bytes:
    return b"NOTCLBIN" + entry[8:]


def _wrong_version(entry: bytes) -> bytes:
    return entry[:8] + struct.pack("<I", CACHE_FORMAT_VERSION + 1) + entry[12:]


@pytest.mark.parametrize("damage", [_truncated, lambda e: b"", _wrong_magic, _wrong_version],
                         ids=["truncated", "empty", "wrong-magic", "wrong-version"])
def test_damaged_entry_is_a_miss_that_gets_rebuilt(tmp_path, cl_context, caplog, damage):
    assert ProgramCache(tmp_path).build(cl_context, VADD)[1] == "miss"
    (path,) = entry_files(tmp_path)
    path.write_bytes(damage(path.read_bytes()))
    store = ProgramCache(tmp_path)
    caplog.set_level(logging.WARNING, logger="adreno.cache")

    program, how = store.build(cl_context, VADD)

    assert how == "miss" and store.stats["rejected"] == 1
    assert len(cache_warnings(caplog)) == 1
    check_vadd(cl_context, program)
    assert store.build(cl_context, VADD)[1] == "hit"


def test_entry_of_another_program_under_this_key_is_a_miss(tmp_path, cl_context):
    other = VADD.replace("2.0f", "3.0f")
    store = ProgramCache(tmp_path)
    store.build(cl_context, other)
    (other_path,) = entry_files(tmp_path)
    identity = DeviceIdentity.from_cl_device(cl_context.devices[0])
    (tmp_path / (cache_key(identity, VADD, "") + ".clbin")).write_bytes(other_path.read_bytes())

    program, how = store.build(cl_context, VADD)

    assert how == "miss" and store.stats["rejected"] == 1
    check_vadd(cl_context, program)  # would fail with the other program's 3.0f


def test_binary_the_driver_rejects_is_rebuilt_and_replaced(tmp_path, cl_context, caplog):
    identity = DeviceIdentity.from_cl_device(cl_context.devices[0])
    store = ProgramCache(tmp_path)
    store.put(identity, VADD, "", b"this is not a program binary" * 4)  # valid entry, useless binary
    caplog.set_level(logging.WARNING, logger="adreno.cache")

    program, how = store.build(cl_context, VADD)

    assert how == "miss"
    assert store.stats == {"hits": 0, "misses": 1, "rejected": 1, "evictions": 0,
                           "bundled": 0, "bundle_rejected": 0, "disabled": 0}
    (line,) = cache_warnings(caplog)
    assert "driver rejected" in line
    check_vadd(cl_context, program)
    assert store.get(identity, VADD, "") == program.get_info(cl.program_info.BINARIES)[0]
    assert store.build(cl_context, VADD)[1] == "hit"


# -- concurrency -----------------------------------------------------------------------------------------

KEYS = 5


def _payload(key: int, writer: int, serial: int) -> bytes:
    """A binary that describes itself, so a reader can tell a whole one from a torn or foreign one."""
    tag = f"{key}:{writer}:{serial}:".encode()
    size = 1500 + (writer * 977 + serial * 131) % 5000
    body = (hashlib.sha256(tag).digest() * (size // 32 + 1))[:size]
    return tag + body


def _payload_matches(key: int, binary: bytes) -> bool:
    parts = binary.split(b":", 3)
    if len(parts) != 4 or parts[0] != str(key).encode():
        return False
    return binary == _payload(key, int(parts[1]), int(parts[2]))


def _hammer(args: tuple[str, int, int, int]) -> tuple[int, int, int, int]:
    """Worker: random puts and gets on a few shared keys; returns (reads, served, wrong, rejected)."""
    root, writer, rounds, cap = args
    store = ProgramCache(pathlib.Path(root), max_bytes=cap)
    rng = random.Random(writer)
    reads = served = wrong = 0
    for serial in range(rounds):
        key = rng.randrange(KEYS)
        source = f"__kernel void k{key}() {{}}"
        if rng.random() < 0.5:
            store.put(FAKE, source, "", _payload(key, writer, serial))
            continue
        got = store.get(FAKE, source, "")
        reads += 1
        if got is not None:
            served += 1
            wrong += not _payload_matches(key, got)
    return reads, served, wrong, store.stats["rejected"]


def test_eight_processes_never_see_a_torn_entry(tmp_path):
    cap = 20_000  # about three of the five keys fit: eviction runs concurrently with reads and writes
    with multiprocessing.get_context("spawn").Pool(8) as pool:
        results = pool.map(_hammer, [(str(tmp_path), writer, 150, cap) for writer in range(8)])
    reads = sum(r[0] for r in results)
    served = sum(r[1] for r in results)
    assert sum(r[2] for r in results) == 0, "a reader got a torn or foreign binary"
    assert sum(r[3] for r in results) == 0, "a reader saw a torn entry (caught by its checksum)"
    assert reads > 300 and served > 50
    assert disk_use(tmp_path) <= cap
    report = ProgramCache(tmp_path).verify()
    assert report["bad"] == 0 and report["ok"] >= 1
    assert list(tmp_path.glob(".*.tmp")) == []


# -- eviction --------------------------------------------------------------------------------------------


def test_lru_eviction_keeps_disk_under_cap_and_recently_read_entries(tmp_path):
    def source(i: int) -> str:
        return f"__kernel void k{i:03d}() {{}}"

    probe = ProgramCache(tmp_path / "probe")
    probe.put(FAKE, source(0), "", b"\x5a" * 4000)
    entry_size = disk_use(tmp_path / "probe")
    cap = 10 * entry_size + entry_size // 2  # room for ten entries

    store = ProgramCache(tmp_path / "lru", max_bytes=cap)
    for i in range(20):  # twice the cap
        store.put(FAKE, source(i), "", bytes([i]) * 4000)
        assert disk_use(tmp_path / "lru") <= cap
        assert store.get(FAKE, source(0), "") == bytes([0]) * 4000  # keep entry 0 recently used

    survivors = {p.name for p in entry_files(tmp_path / "lru")}
    expected = {cache_key(FAKE, source(i), "") + ".clbin" for i in [0, *range(11, 20)]}
    assert survivors == expected  # 1..10 went, oldest first; the entry read after every put stayed
    assert store.stats["evictions"] == 10


def test_entry_larger_than_cap_is_not_stored(tmp_path, caplog):
    store = ProgramCache(tmp_path, max_bytes=1000)
    caplog.set_level(logging.WARNING, logger="adreno.cache")
    store.put(FAKE, VADD, "", b"x" * 2000)
    assert entry_files(tmp_path) == [] and len(cache_warnings(caplog)) == 1


# -- crash guard -----------------------------------------------------------------------------------------


def _die_while_loading(root: str, identity: DeviceIdentity, key: str, loading) -> None:
    """Child: enter the binary-load crash guard for entry ``key`` and hang there until killed (a driver crash)."""
    with ProgramCache(pathlib.Path(root)).guard.loading(identity, key):
        loading.set()
        time.sleep(120)


def _crash_during_load(root: pathlib.Path, identity: DeviceIdentity, source: str, while_loading=None) -> int:
    """Run a child that dies (SIGKILL) inside a guarded load of ``source``'s entry; call ``while_loading()`` while
    it hangs there."""
    ctx = multiprocessing.get_context("spawn")
    loading = ctx.Event()
    child = ctx.Process(target=_die_while_loading, args=(str(root), identity, cache_key(identity, source, ""),
                                                         loading))
    child.start()
    try:
        assert loading.wait(60), "child never reached the binary load"
        if while_loading is not None:
            while_loading()
    finally:
        child.kill()
        child.join(30)
    assert child.exitcode is not None and child.exitcode < 0
    return child.pid


def test_crash_during_load_quarantines_that_entry_only(tmp_path, caplog):
    other_driver = dataclasses.replace(FAKE, driver_version="1.2.4")
    store = ProgramCache(tmp_path)
    store.put(FAKE, VADD, "", b"binary for this driver")
    store.put(other_driver, VADD, "", b"binary for the other driver")

    store.put(FAKE, "__kernel void other() {}", "", b"another program")

    def live_loader_does_not_quarantine():
        assert store.get(FAKE, VADD, "") == b"binary for this driver"
        assert store.info()["quarantined"] == []

    pid = _crash_during_load(tmp_path, FAKE, VADD, live_loader_does_not_quarantine)
    caplog.set_level(logging.WARNING, logger="adreno.cache")

    assert store.get(FAKE, VADD, "") is None, "the entry the crashed load touched is removed"
    store.put(FAKE, VADD, "", b"rebuilt")
    assert store.get(FAKE, VADD, "") == b"rebuilt", "after one crash, a rebuilt binary is cached again"
    _crash_during_load(tmp_path, FAKE, VADD)
    assert store.get(FAKE, VADD, "") is None
    store.put(FAKE, VADD, "", b"rebuilt again")
    assert store.get(FAKE, VADD, "") is None, "after a second crash the key is never stored or loaded again"
    assert store.get(FAKE, "__kernel void other() {}", "") == b"another program", "the rest stays in use"
    store.put(FAKE, "__kernel void more() {}", "", b"new")
    assert store.get(FAKE, "__kernel void more() {}", "") == b"new"
    assert store.get(other_driver, VADD, "") == b"binary for the other driver"  # per device + driver
    (quarantined,) = store.info()["quarantined"]
    assert quarantined["pid"] != pid and quarantined["driver_version"] == "1.2.3" and quarantined["crashes"] == 2
    assert quarantined["entry"] == cache_key(FAKE, VADD, "")
    assert len(cache_warnings(caplog)) == 2  # one per crashed load, not on every lookup

    assert ProgramCache(tmp_path).clear() == 3
    assert store.info()["quarantined"] == []
    store.put(FAKE, VADD, "", b"after clear")
    assert store.get(FAKE, VADD, "") == b"after clear"


def test_build_of_a_quarantined_entry_is_from_source_until_clear(tmp_path, cl_context):
    identity = DeviceIdentity.from_cl_device(cl_context.devices[0])
    store = ProgramCache(tmp_path)
    other = VADD.replace("vadd", "vadd2")
    assert store.build(cl_context, VADD)[1] == "miss" and store.build(cl_context, other)[1] == "miss"
    _crash_during_load(tmp_path, identity, VADD)
    assert store.build(cl_context, VADD)[1] == "miss", "one crash: rebuilt from source and cached again"
    _crash_during_load(tmp_path, identity, VADD)

    program, how = store.build(cl_context, VADD)
    assert how == "disabled"
    check_vadd(cl_context, program)
    assert store.build(cl_context, other)[1] == "hit", "the cache stays enabled for every other entry"

    store.clear()
    assert store.build(cl_context, VADD)[1] == "miss"
    program, how = store.build(cl_context, VADD)
    assert how == "hit"
    check_vadd(cl_context, program)


def _build_in_child(root: str, platform_index: int, device_index: int, outcome) -> None:
    """Child: build VADD through the cache on the given device and report how."""
    device = cl.get_platforms()[platform_index].get_devices()[device_index]
    outcome.put(ProgramCache(pathlib.Path(root)).build(cl.Context([device]), VADD)[1])


def test_real_driver_crash_on_a_bad_binary_quarantines_it(tmp_path, cl_context):
    device = cl_context.devices[0]
    platforms = cl.get_platforms()
    platform_index = next(i for i, p in enumerate(platforms) if p.int_ptr == device.platform.int_ptr)
    devices = platforms[platform_index].get_devices()
    device_index = next(i for i, d in enumerate(devices) if d.int_ptr == device.int_ptr)
    identity = DeviceIdentity.from_cl_device(device)
    store = ProgramCache(tmp_path)
    program, _ = store.build(cl_context, VADD)
    binary = program.get_info(cl.program_info.BINARIES)[0]
    store.put(identity, VADD, "", binary[: len(binary) // 2])  # checksum fine: only the driver can judge it

    ctx = multiprocessing.get_context("spawn")
    outcome = ctx.Queue()
    child = ctx.Process(target=_build_in_child, args=(str(tmp_path), platform_index, device_index, outcome))
    child.start()
    child.join(120)

    if child.exitcode == 0:  # this driver refuses the truncated binary cleanly: rebuilt and replaced
        assert outcome.get(timeout=10) == "miss"
        assert store.build(cl_context, VADD)[1] == "hit"
    else:  # the driver crashed the child inside the guarded load (PoCL 3.1 aborts on an assertion)
        assert child.exitcode is not None and child.exitcode < 0
        (quarantined,) = store.info()["quarantined"]
        assert quarantined["pid"] == child.pid and quarantined["crashes"] == 1
        program, how = store.build(cl_context, VADD)
        assert how == "miss", "the bad binary is gone: rebuilt from source and cached again"
        check_vadd(cl_context, program)
        assert store.build(cl_context, VADD)[1] == "hit"


# -- info / verify / clear -------------------------------------------------------------------------------


def test_info_verify_clear(tmp_path, monkeypatch):
    store = ProgramCache(tmp_path, max_bytes=1 << 20)
    for name in "abc":
        store.put(FAKE, f"__kernel void {name}() {{}}", "", name.encode() * 100)
    monkeypatch.setattr(adreno, "__version__", "0.0.1-old")
    store.put(FAKE, "__kernel void old() {}", "", b"old" * 100)
    monkeypatch.undo()
    path_c = tmp_path / (cache_key(FAKE, "__kernel void c() {}", "") + ".clbin")
    data = bytearray(path_c.read_bytes())
    data[-1] ^= 0x01
    path_c.write_bytes(data)
    path_a = tmp_path / (cache_key(FAKE, "__kernel void a() {}", "") + ".clbin")
    (tmp_path / ("0" * 64 + ".clbin")).write_bytes(path_a.read_bytes())

    info = store.info()
    assert info["entries"] == 5 and info["max_bytes"] == 1 << 20 and info["enabled"] is True
    assert info["bytes"] == sum(p.stat().st_size for p in entry_files(tmp_path))
    assert info["stats"]["hits"] == 0 and info["quarantined"] == []

    report = store.verify()
    assert (report["ok"], report["bad"]) == (2, 3)
    reasons = {name: entry["reason"] for name, entry in report["entries"].items()}
    assert reasons[path_c.name] == "checksum mismatch"
    assert reasons["0" * 64 + ".clbin"] == "key mismatch"
    assert sorted(r for r in reasons.values() if r) == ["checksum mismatch", "key mismatch", "stale"]

    assert store.clear() == 5
    assert store.info()["entries"] == 0 and entry_files(tmp_path) == []
    assert store.verify() == {"ok": 0, "bad": 0, "entries": {}}


# -- TVM's precompiled-program blob ----------------------------------------------------------------------


def test_tvm_blob_matches_documented_layout_byte_for_byte():
    programs = {"add": b"\xde\xad", "mul_kernel": b"BIN!x"}
    expected = bytes.fromhex(
        "0200000000000000"                                  # u64 program count
        "0300000000000000" "616464"                         # u64 name length, "add"
        "0200000000000000" "dead"                           # u64 binary length, binary
        "0a00000000000000" "6d756c5f6b65726e656c"           # "mul_kernel"
        "0500000000000000" "42494e2178"                     # b"BIN!x"
    )
    blob = tvm_precompiled_blob(programs)
    assert blob == expected
    parsed = read_tvm_precompiled_blob(expected)
    assert parsed == programs and list(parsed) == ["add", "mul_kernel"]
    assert tvm_precompiled_blob({}) == bytes(8) and read_tvm_precompiled_blob(bytes(8)) == {}


def test_tvm_blob_round_trips_and_rejects_malformed():
    rng = random.Random(3)
    programs = {f"default_function_kernel_{i}": rng.randbytes(rng.randint(1, 5000)) for i in range(6)}
    blob = tvm_precompiled_blob(programs)
    assert read_tvm_precompiled_blob(blob) == programs
    for cut in (1, 7, 9, len(blob) // 2, len(blob) - 1):
        with pytest.raises(ValueError, match="truncated"):
            read_tvm_precompiled_blob(blob[:cut])
    with pytest.raises(ValueError, match="trailing"):
        read_tvm_precompiled_blob(blob + b"\0")
    dup = tvm_precompiled_blob({"k": b"1"})[8:]
    with pytest.raises(ValueError, match="duplicate"):
        read_tvm_precompiled_blob(struct.pack("<Q", 2) + dup + dup)
    with pytest.raises(ValueError):
        tvm_precompiled_blob({"k": b""})


def test_tvm_blob_carries_real_binaries(cl_context):
    program = cl.Program(cl_context, VADD).build(cache_dir=False)
    binary = program.get_info(cl.program_info.BINARIES)[0]
    (name, loaded), = read_tvm_precompiled_blob(tvm_precompiled_blob({"vadd": binary})).items()
    assert name == "vadd"
    device = cl_context.devices[0]
    check_vadd(cl_context, cl.Program(cl_context, [device], [loaded]).build(cache_dir=False))
