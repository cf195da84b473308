"""Uploads are confined: hostile tarballs (special files, setuid bits, links, path escapes, compression bombs, too
many files) create no special file and nothing outside the destination, and the ceilings hold while streaming."""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile

import pytest

from adreno.farm.common import FarmError
from adreno.farm.uploads import UploadLimits, safe_extract

SMALL = UploadLimits(max_bytes=1 << 20, max_files=50)


def member(name: str, kind=tarfile.REGTYPE, data: bytes = b"", **fields) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mode = kind, len(data), fields.pop("mode", 0o644)
    for key, value in fields.items():
        setattr(info, key, value)
    return info, data


def tarball(*members, compress: bool = False, fmt=tarfile.GNU_FORMAT) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=fmt) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return gzip.compress(raw.getvalue(), 9) if compress else raw.getvalue()


def zeros_bomb(nbytes: int) -> bytes:
    """A gzipped tar of one file of `nbytes` zeros, built by streaming (never held uncompressed)."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        info = tarfile.TarInfo("params.npz")
        info.size = nbytes

        class Zeros:
            left = nbytes

            def read(self, size):
                n = min(size, self.left)
                self.left -= n
                return bytes(n)

        tar.addfile(info, Zeros())
    return out.getvalue()


OK = member("ok.txt", data=b"fine")
HOSTILE = {  # name -> tarball bytes; each must be refused
    **{f"fifo {n}": tarball(OK, member(n, tarfile.FIFOTYPE)) for n in ("pipe", "kernels/x.cl", "plan.json")},
    **{f"char device {n}": tarball(member(n, tarfile.CHRTYPE, devmajor=1, devminor=3)) for n in ("null", "d/zero")},
    **{f"block device {n}": tarball(member(n, tarfile.BLKTYPE, devmajor=8, devminor=0)) for n in ("sda", "d/sdb")},
    "char device tty": tarball(member("tty", tarfile.CHRTYPE, devmajor=4, devminor=1)),
    **{f"symlink to {t}": tarball(member("link", tarfile.SYMTYPE, linkname=t))
       for t in ("/etc/passwd", "../outside", "/", "ok.txt", ".")},
    "symlink then write through it": tarball(member("d", tarfile.SYMTYPE, linkname="/tmp"), member("d/evil")),
    **{f"hardlink to {t}": tarball(OK, member("hard", tarfile.LNKTYPE, linkname=t))
       for t in ("/etc/passwd", "ok.txt", "../x")},
    **{f"path {n}": tarball(member(n, data=b"x"))
       for n in ("../evil", "a/../../evil", "/tmp/evil", "./../evil", "a/b/../../../evil", "..", "/", "a/..\\..\\x",
                 "/etc/cron.d/evil", "a/./../../evil")},
    **{f"pax path {n}": tarball(member("benign", data=b"x", pax_headers={"path": n}), fmt=tarfile.PAX_FORMAT)
       for n in ("../pax-evil", "/abs-pax")},
    "gnu long name escaping": tarball(member("a/" * 60 + "../" * 70 + "evil", data=b"x")),
    "directory with data": tarball(member("dir", tarfile.DIRTYPE, size=10 ** 9)),
    "duplicate name": tarball(OK, member("ok.txt", data=b"second")),
    "file over a directory": tarball(member("d", tarfile.DIRTYPE, mode=0o755), member("d", data=b"x")),
    "too many files (default ceiling)": tarball(*[member(f"f{i}") for i in range(10_001)]),
    "gzip bomb 64 MB of zeros": zeros_bomb(64 << 20),
    **{f"gzip: {n}": tarball(OK, m, compress=True) for n, m in (
        ("fifo", member("p", tarfile.FIFOTYPE)), ("symlink out", member("l", tarfile.SYMTYPE, linkname="/etc")),
        ("../evil", member("../evil", data=b"x")), ("char device", member("c", tarfile.CHRTYPE, devmajor=1)),
        ("hardlink", member("h", tarfile.LNKTYPE, linkname="/etc/shadow")))},
    "fifo after 30 good files": tarball(*[member(f"k/f{i}", data=b"x" * 100) for i in range(30)],
                                        member("k/pipe", tarfile.FIFOTYPE)),
    "garbage": b"\x00\xff" * 2000,
    "truncated tar": tarball(member("big", data=b"x" * 5000))[:3000],
    "truncated gzip": tarball(member("big", data=os.urandom(5000)), compress=True)[:1000],
    "not gzip behind a gzip magic": b"\x1f\x8b\x08\x00" + os.urandom(500),
    "unknown member type": tarball(member("weird", b"Z")),
}
HOSTILE_SMALL = {  # refused under SMALL's ceilings (1 MiB, 50 members)
    "total bytes over the ceiling": tarball(member("a", data=b"\x01" * (600 << 10)),
                                            member("b", data=b"\x02" * (600 << 10))),
    "one file over the ceiling": tarball(member("a", data=os.urandom(2 << 20))),
    "51 members": tarball(*[member(f"f{i}") for i in range(51)]),
    "gzip bomb 8 MB": zeros_bomb(8 << 20),
}
SANITISED = {  # accepted, with every special bit dropped
    "setuid file": tarball(member("suid", data=b"#!/bin/sh\n", mode=0o4755)),
    "setgid file": tarball(member("sgid", data=b"x", mode=0o2755)),
    "sticky world-writable dir": tarball(member("d", tarfile.DIRTYPE, mode=0o1777), member("d/f", data=b"x")),
    "owner root": tarball(member("rootfile", data=b"x", uid=0, gid=0, uname="root", gname="root", mode=0o6777)),
    "contiguous file": tarball(member("cont", tarfile.CONTTYPE, data=b"regular data")),
}


def _created(tmp_path) -> list[tuple[str, int]]:
    """(path, st_mode) of everything under tmp_path, links not followed."""
    found = []
    for root, dirs, files in os.walk(tmp_path):
        for name in dirs + files:
            path = os.path.join(root, name)
            found.append((os.path.relpath(path, tmp_path), os.lstat(path).st_mode))
    return found


def _extract(data: bytes, tmp_path, limits=UploadLimits()):
    dest = tmp_path / "dest"
    safe_extract(io.BytesIO(data), len(data), str(dest), limits)
    return dest


def _assert_confined(tmp_path, limit: int):
    created = _created(tmp_path)
    special = [(p, m) for p, m in created if not (stat.S_ISREG(m) or stat.S_ISDIR(m))]
    assert special == [], "only regular files and directories"
    assert all(not m & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX) for _, m in created), "no setuid/setgid/sticky"
    assert all(p == "dest" or p.startswith("dest" + os.sep) for p, _ in created), "nothing outside the destination"
    size = sum(os.path.getsize(tmp_path / p) for p, m in created if stat.S_ISREG(m))
    assert size <= limit


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_tarball_is_refused(name, tmp_path):
    with pytest.raises(FarmError, match="refusing"):
        _extract(HOSTILE[name], tmp_path)
    _assert_confined(tmp_path, UploadLimits().max_bytes)


@pytest.mark.parametrize("name", sorted(HOSTILE_SMALL))
def test_ceilings_hold_while_streaming(name, tmp_path):
    with pytest.raises(FarmError, match="refusing upload"):
        _extract(HOSTILE_SMALL[name], tmp_path, SMALL)
    _assert_confined(tmp_path, SMALL.max_bytes)


@pytest.mark.parametrize("name", sorted(SANITISED))
def test_special_bits_are_dropped(name, tmp_path):
    dest = _extract(SANITISED[name], tmp_path)
    _assert_confined(tmp_path, UploadLimits().max_bytes)
    assert any(stat.S_ISREG(m) for _, m in _created(dest))


def test_fuzz_counts():
    assert len(HOSTILE) + len(HOSTILE_SMALL) + len(SANITISED) >= 50


def test_an_artifact_upload_round_trips(tiny_artifact, tmp_path):
    from adreno.farm.uploads import artifact_tarball

    _, data = artifact_tarball(str(tiny_artifact))
    dest = _extract(data, tmp_path)
    assert sorted(p for p, m in _created(dest) if stat.S_ISREG(m)) == sorted(
        p for p, m in _created(tiny_artifact) if stat.S_ISREG(m))


def test_agent_beyond_loopback_needs_expose():
    import subprocess
    import sys

    cli = [sys.executable, "-m", "adreno.cli", "farm", "agent"]
    refused = subprocess.run([*cli, "--host", "0.0.0.0", "--tracker", "127.0.0.1:1"], capture_output=True, text=True,
                             timeout=60)
    assert refused.returncode == 2 and "no authentication" in refused.stderr and "--expose" in refused.stderr
    assert "Traceback" not in refused.stderr
    help_text = " ".join(subprocess.run([*cli, "--help"], capture_output=True, text=True, timeout=60).stdout.split())
    assert "--expose allow --host beyond loopback. TVM RPC has no authentication" in help_text
