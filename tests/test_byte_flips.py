"""Random byte flips over records files and program-cache entries: never a crash or a traceback, every valid
record on an untouched line is kept, and every flipped cache entry is refused (then rebuilt by `build`)."""

from __future__ import annotations

import json
import random

from adreno.cache import DeviceIdentity, ProgramCache, cache_key
from adreno.records import Database, Record

FLIPS = 1000


def _records_file(path, n: int = 40) -> list[bytes]:
    records = [Record(f"op|n{i % 5}", "dev", {"tile": i % 4, "threads": 2 ** (i % 6)},
                      [1e-3 * (1 + i % 7)] if i % 9 else None, None if i % 9 else "build failed",
                      None if i % 9 else "build", trial=i + 1) for i in range(n)]
    Database(path).append(records)
    return path.read_bytes().split(b"\n")


def test_byte_flips_in_a_records_file_keep_every_untouched_record(tmp_path):
    original = tmp_path / "r.jsonl"
    lines = _records_file(original)
    data = original.read_bytes()
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    rng = random.Random(14)
    for _ in range(FLIPS):
        flipped = bytearray(data)
        offset = rng.randrange(len(data))
        flipped[offset] ^= 1 << rng.randrange(8)
        path = tmp_path / "flipped.jsonl"
        path.write_bytes(bytes(flipped))
        db = Database(path)  # never raises
        hit = max(i for i, s in enumerate(starts) if s <= offset)
        touched = {hit, hit + 1} if data[offset:offset + 1] == b"\n" else {hit}
        kept = {json.dumps(r.__dict__, sort_keys=True) for r in db.records}
        for index, line in enumerate(lines):
            if line and index not in touched:
                assert json.dumps(Record.from_json(json.loads(line)).__dict__, sort_keys=True) in kept
        assert all(r.ok == (r.error is None) and (r.seconds is None or min(r.seconds) > 0) for r in db.records)
        assert len(db.records) + db.skipped >= len([x for x in lines if x]) - 1


def test_byte_flips_in_cache_entries_are_always_refused(tmp_path, tiny_artifact, pocl_device):
    import pyopencl as cl

    from adreno.artifact.format import Artifact

    artifact = Artifact.load(tiny_artifact)
    sources = [artifact.kernel_source(p) for p in artifact.plan.programs]
    context = cl.Context([pocl_device])
    store = ProgramCache(tmp_path / "cache")
    for source in sources:
        store.build(context, source)
    identity = DeviceIdentity.from_cl_device(pocl_device)
    entries = {s: tmp_path / "cache" / f"{cache_key(identity, s, '')}.clbin" for s in sources}
    originals = {s: p.read_bytes() for s, p in entries.items()}
    rng = random.Random(15)
    for _ in range(FLIPS // 2):
        source = rng.choice(sources)
        flipped = bytearray(originals[source])
        flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        entries[source].write_bytes(bytes(flipped))
        assert store.get(identity, source, "") is None, "a flipped entry is never served"
        entries[source].write_bytes(originals[source])
    assert store.stats["rejected"] == FLIPS // 2
    victim = sources[0]  # and a real build after a flip rebuilds the entry, then serves it again
    flipped = bytearray(originals[victim])
    flipped[-10] ^= 0xFF
    entries[victim].write_bytes(bytes(flipped))
    assert store.build(context, victim)[1] == "miss" and store.build(context, victim)[1] == "hit"
