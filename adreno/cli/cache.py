"""`adreno cache info|clear|verify|export`: look after the OpenCL program-binary cache and bundle binaries.

Registered by `adreno.cli.main` through `register(sub, command)`. The cache lives in `$ADRENO_CACHE_DIR` (default
``~/.cache/adreno/programs``) unless `--cache-dir` is given; see `adreno.cache` for what it holds and what
invalidates an entry.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..artifact.format import Artifact
from ..errors import AdrenoError
from .common import add_artifact_argument, add_device_argument, emit


def register(sub, command) -> None:  # noqa: ARG001 - the register(sub, command) interface of adreno.cli.main
    """Add `cache` with its subcommands to the `adreno` parser (``sub``: its subparsers; ``command``: the
    helper of `adreno.cli.main` that adds a command with --json and its function)."""
    cache = command("cache", None, "inspect, clear, verify the OpenCL program-binary cache; bundle binaries",
                    "The program-binary cache keeps every OpenCL program built from source, so the next start of "
                    "the same kernels on the same device and driver loads a binary instead of compiling. "
                    "`export` writes an artifact's binaries for one device into the artifact itself.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print machine-readable JSON on stdout")
    common.add_argument("--cache-dir", type=Path, default=argparse.SUPPRESS,
                        help="the cache directory (default: $ADRENO_CACHE_DIR, else ~/.cache/adreno/programs)")
    nested = cache.add_subparsers(dest="cache_command", metavar="SUBCOMMAND", required=True)

    def subcommand(name: str, func, help_text: str, description: str | None = None) -> argparse.ArgumentParser:
        p = nested.add_parser(name, help=help_text, description=description or help_text, parents=[common])
        p.set_defaults(func=func)
        return p

    subcommand("info", cmd_info, "where the cache is, how many entries and bytes, entries quarantined after "
               "a crashed load")
    subcommand("clear", cmd_clear, "remove every entry, crash marker and quarantine note")
    p = subcommand("verify", cmd_verify, "check every entry (and an artifact's bundled binaries) without a driver",
                   "Check the magic, version, checksum, key and toolchain of every cache entry; with --artifact also "
                   "the binaries bundled in that artifact. Exit status 1 when anything is bad.")
    p.add_argument("--artifact", help="also verify the binaries bundled in this artifact directory")
    p = subcommand("export", cmd_export, "write an artifact's program binaries for one device into the artifact",
                   "Build every OpenCL program of ARTIFACT for one device (through the cache) and write "
                   "ARTIFACT/binaries/<device>/: one verified entry per program, index.json, and "
                   "tvm_precompiled.bin, the blob TVM's OpenCL runtime takes through opencl.SetPreCompiledPrograms. "
                   "Executors given a cache load these binaries first on that device and driver.")
    add_artifact_argument(p)
    add_device_argument(p)
    p.add_argument("--build-options", default="", help="OpenCL build options (default none, as `adreno run`)")
    p.add_argument("--no-cache", action="store_true", help="build from source, neither reading nor filling the cache")
    p = subcommand("warm", cmd_warm, "build an artifact's programs on a farm device and bring the binaries back",
                   "Upload ARTIFACT to one device of --key through the farm's tracker, build its programs there "
                   "(`adreno farm agent`), and write the binaries into ARTIFACT/binaries/<device>/ as `export` "
                   "does locally, so an app shipped to that device and driver starts without compiling.")
    add_artifact_argument(p)
    p.add_argument("--tracker", required=True, metavar="HOST:PORT", help="the farm's tracker")
    p.add_argument("--key", required=True, help="device key to build on (e.g. adreno-740, pocl-cpu)")


def _cache(args, enabled: bool = True):
    from ..cache import ProgramCache  # inside: loads pyopencl at import

    return ProgramCache(getattr(args, "cache_dir", None), enabled=enabled)


def _size(nbytes: int) -> str:
    if nbytes < 1024:
        return f"{nbytes} B"
    if nbytes < 1 << 20:
        return f"{nbytes / 1024:.1f} KiB"
    return f"{nbytes / (1 << 20):.1f} MiB"


def cmd_info(args) -> int:
    info = _cache(args).info()
    info.pop("stats", None)  # this process did nothing yet
    lines = [f"program cache {info['root']}",
             f"  {info['entries']} entries, {_size(info['bytes'])} of {_size(info['max_bytes'])}"]
    for note in info["quarantined"]:
        lines.append(f"  quarantined {note['marker'][:16]}: process {note.get('pid', '?')} on {note.get('host', '?')} "
                     f"died loading it on {note.get('device_name', '?')} (driver {note.get('driver_version', '?')}); "
                     "built from source until `adreno cache clear`")
    emit(args, info, "\n".join(lines))
    return 0


def cmd_clear(args) -> int:
    cache = _cache(args)
    try:
        removed = cache.clear()
    except OSError as err:
        raise AdrenoError(f"cannot clear the program cache {cache.root}: {err}") from None
    emit(args, {"root": str(cache.root), "removed": removed}, f"removed {removed} entries from {cache.root}")
    return 0


def cmd_verify(args) -> int:
    cache = _cache(args)
    report = {"root": str(cache.root), **cache.verify()}
    lines = [f"program cache {cache.root}: {report['ok']} entries ok, {report['bad']} bad"]
    lines += [f"  {name}: {entry['reason']}" for name, entry in sorted(report["entries"].items()) if not entry["ok"]]
    bad = report["bad"]
    if args.artifact:
        from ..cache import verify_bundles  # inside: loads pyopencl at import

        artifact = Artifact.load(args.artifact)
        bundles = verify_bundles(artifact)
        report["artifact"] = {"path": str(artifact.path), **bundles}
        bad += bundles["bad"]
        if bundles["bundles"]:
            lines.append(f"binaries bundled in {artifact.path}: {bundles['ok']} device(s) ok, {bundles['bad']} bad")
        else:
            lines.append(f"{artifact.path} bundles no binaries (`adreno cache export` adds them)")
        for name, bundle in bundles["bundles"].items():
            device = bundle["device"] or {}
            lines.append(f"  {name}: {device.get('device_name', '?')} driver {device.get('driver_version', '?')}, "
                         f"{bundle['programs']} programs: {'ok' if bundle['ok'] else 'BAD'}")
            lines += [f"    {problem}" for problem in bundle["problems"]]
    emit(args, report, "\n".join(lines))
    return 1 if bad else 0


def cmd_warm(args) -> int:
    from ..runners.rpc import warm_artifact  # inside: adreno --help does not need it

    artifact = single_set(Artifact.load(args.artifact), "warm")
    summary = warm_artifact(str(artifact.path), args.tracker, args.key)
    device = summary["device"]
    emit(args, summary, f"built {summary['programs']} programs on {summary['remote']} ({device['device_name']}, "
                         f"driver {device['driver_version']}) -> {summary['path']}, {_size(summary['bytes'])}")
    return 0


def cmd_export(args) -> int:
    import pyopencl as cl

    from ..cache import export_bundle  # inside: loads pyopencl at import
    from ..opencl.device import select_device  # inside: adreno --help does not need it

    artifact = single_set(Artifact.load(args.artifact), "export")
    device = select_device(args.device)
    cache = None if args.no_cache else _cache(args)
    try:
        summary = export_bundle(artifact, cl.Context([device]), cache, args.build_options)
    except OSError as err:
        raise AdrenoError(f"cannot write binaries into {artifact.path}: {err}") from None
    how = ", ".join(f"{n} {'from the cache' if k == 'hit' else 'built from source' if k in ('miss', 'disabled') else k}"
                    for k, n in sorted(summary["outcomes"].items()))
    device = summary["device"]
    text = (f"exported {summary['programs']} programs ({summary['kernels']} kernels; {how}) for "
            f"{device['device_name']} (driver {device['driver_version']}) -> {summary['path']}, "
            f"{_size(summary['bytes'])}\n"
            f"  TVM runtime blob (opencl.SetPreCompiledPrograms): {summary['tvm_precompiled']}")
    emit(args, summary, text)
    return 0


def single_set(artifact, command: str):
    """`artifact` when it has one shape set: a bundle of binaries holds one set's programs (each set's are in the
    program cache after its first run)."""
    if artifact.shape_sets:
        raise AdrenoError(f"`adreno cache {command}` takes an artifact of one shape set; {artifact.path} has "
                          f"{len(artifact.shape_sets)} (each set's programs enter the program cache at its first run)")
    return artifact
