"""`adreno orchestrate MODEL --report`: FuseOps' partition next to the BLP's choice on costs measured on a device.

Candidates the records lack are measured on the local OpenCL device (PoCL by default), or on the farm's agents of a
key (`--tracker`, `--key`), through the Runner, with progress on stderr; `--records` keeps them, so a second run
measures nothing. Exit status: 0 with a choice for every block, 1 when a block has none (its line says why), 2 for
bad input or an unreachable farm (one line).
"""

from __future__ import annotations

import json
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..support.command_line import require_positive
from ..targets.devices import get_device
from ..errors import AdrenoError
from ..farm.common import FarmError, parse_addr
from ..options import Memory, Precision, Winograd, enum_argument
from ..support.paths import output_file, regular_file
from ..runners.batch_dir import read_manifest


def register(sub, command) -> None:  # noqa: ARG001 - the register(sub, command) interface of adreno.cli.main
    """Add `orchestrate` to the `adreno` parser (its own --json names a file, so not through `command`)."""
    p = sub.add_parser("orchestrate", help="choose kernels by a BLP on measured costs and report them next to "
                       "TVM FuseOps' partition (`adreno compile --orchestrate` emits the choice)",
                       description="Split MODEL into primitives, enumerate candidate kernels per block (FuseOps' "
                       "groups among them), measure what --records lacks on a local OpenCL device, solve each "
                       "block's binary linear program, and print per block FuseOps' kernels next to the chosen ones.")
    p.add_argument("model", help="bundled model name (see `adreno models`) or path to an .onnx file")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--report", action="store_true", help="print the report (measuring what --records lacks)")
    mode.add_argument("--export-batch", metavar="DIR", help="measure nothing: compile every candidate into an "
                      "offline batch for `python -m adreno.runners.offline DIR` on a device nothing here reaches; "
                      "then --report --batch DIR (docs/orchestrate.md)")
    p.add_argument("--records", help="records file the costs are read from and appended to (default: a temporary "
                   "one, removed afterwards)")
    p.add_argument("--json", metavar="OUT", help="also write the report as JSON to this file")
    p.add_argument("--winograd", **enum_argument(Winograd), default=Winograd.AUTO,
                   help="Winograd for 3x3 stride-1 convs, applied before fission as `adreno compile --orchestrate "
                   "--winograd` applies it (its three stages become primitives; default auto; with --report, tuned "
                   "layout records in --records decide for their convs, as in the compile)")
    p.add_argument("--memory", **enum_argument(Memory), default=Memory.BUFFER,
                   help="the memory the candidates are compiled and measured in (default buffer; texture: the "
                   "packed layouts of `adreno compile`'s default, planned before fission, inputs in images)")
    p.add_argument("--target", default="adreno-740", help="the target the candidates are compiled for "
                   "(default adreno-740)")
    add_measure_arguments(p)
    add_max_size_argument(p)
    p.add_argument("--repeat", type=int, default=5, help="timed runs per candidate (default 5)")
    p.add_argument("--time-limit", type=float, default=10.0, metavar="SECONDS",
                   help="solver time limit per block (default 10)")
    p.set_defaults(func=cmd_orchestrate)


def add_measure_arguments(p, prefix: str = "", when: str = "") -> None:
    """Where the candidates are measured, for `orchestrate` (`--device`, `--tracker`, `--key`) and for
    `compile --orchestrate` (`prefix` "measure-": `--measure-device`, ...); `when` prefixes the help."""
    p.add_argument(f"--{prefix}device", default="pocl", help=f"{when}the local OpenCL device that measures the "
                   "candidates (default pocl)")
    p.add_argument(f"--{prefix}tracker", metavar="HOST:PORT", help=f"{when}measure on the device farm's agents of "
                   f"--{prefix}key instead (`adreno farm ...`; a phone through `adreno farm android`), every free "
                   "device of the key at once; TVM RPC has no authentication, see docs/farm.md")
    p.add_argument(f"--{prefix}key", default="pocl-cpu", help=f"{when}the farm's device key to measure on (with "
                   f"--{prefix}tracker; e.g. adreno-740; default pocl-cpu)")
    p.add_argument(f"--{prefix}batch", metavar="DIR", action="append", help=f"{when}take the costs from an offline "
                   "batch measured elsewhere (`adreno orchestrate MODEL --export-batch DIR`, then `python -m "
                   "adreno.runners.offline DIR` there); they are added to --records. Repeatable: one batch per "
                   "memory, measured on the same device")


def add_max_size_argument(p, when: str = "") -> None:
    """`--max-size`, the candidates' bound, for `orchestrate` and for `compile --orchestrate` (`when` prefixes it)."""
    p.add_argument("--max-size", type=int, default=3, help=f"{when}most primitives per candidate kernel (default 3; "
                   "FuseOps' groups are candidates whatever their size)")


def cmd_orchestrate(args) -> int:
    from adreno.compile import tuned_configs  # inside: adreno --help does not need it
    from adreno.orchestrate.report import orchestrate_model, report_text  # inside: loads TVM and scipy at import

    require_positive(args, "max_size", "repeat", "time_limit")
    get_device(args.target)  # an unknown target: one line before anything runs
    out = output_file(args.json, "--json") if args.json else None
    if args.export_batch:
        from adreno.orchestrate.batch import export_batch  # inside: loads TVM at import

        manifest = export_batch(args.model, Path(args.export_batch), args.target, args.max_size,
                                lambda line: print(f"  {line}", file=sys.stderr, flush=True), args.winograd,
                                args.memory)
        built = sum(1 for c in manifest["candidates"] if not c.get("error"))
        print(f"{args.export_batch}: {len(manifest['candidates'])} candidate kernels ({built} built, the launch "
              f"cost's two among them) of {manifest['model']}; measure it with `python -m adreno.runners.offline "
              f"{args.export_batch} --device ...`, then `adreno orchestrate {args.model} --report --batch "
              f"{args.export_batch}` or `adreno compile {args.model} --orchestrate --measure-batch "
              f"{args.export_batch}`")
        return 0

    def say(line: str) -> None:
        print(f"  {line}", file=sys.stderr, flush=True)

    # the tuned layout records decide for their convs, as in `adreno compile --orchestrate --records`
    layouts = tuned_configs(args.records, Precision.FP32, args.target) if args.records and \
        Path(args.records).exists() else None
    site = MeasureSite.from_args(args)
    site.memories(args.memory)  # a batch of another memory: one line now
    with cost_table(args.records, site, args.target, args.repeat, say, args.memory) as table:
        report = orchestrate_model(args.model, args.target, table, args.max_size, args.time_limit, say,
                                   args.winograd, layouts)
    print(report_text(report))
    if out is not None:
        out.write_text(json.dumps(report, indent=1) + "\n")
    return 0 if report["complete"] else 1


@dataclass(frozen=True)
class MeasureSite:
    """Where candidates are measured: the local OpenCL `device`, or the farm's agents of `key` behind `tracker`."""

    device: str = "pocl"
    tracker: str | None = None
    key: str = "pocl-cpu"
    batches: tuple = ()  # offline batches measured elsewhere, one per memory: their costs, nothing measured

    @classmethod
    def from_args(cls, args, prefix: str = "") -> MeasureSite:
        """The site `add_measure_arguments(p, prefix)` parsed; a malformed tracker address is a `FarmError` now."""
        option = prefix.replace("-", "_")
        tracker, batches = getattr(args, f"{option}tracker"), tuple(getattr(args, f"{option}batch") or ())
        if tracker and batches:
            raise AdrenoError(f"--{prefix}tracker measures, --{prefix}batch reads costs measured elsewhere: give one")
        if tracker:
            parse_addr(tracker)
        for batch in batches:
            if not Path(batch).is_dir():
                raise AdrenoError(f"--{prefix}batch {batch}: no such directory")
        return cls(getattr(args, f"{option}device"), tracker, getattr(args, f"{option}key"), batches)

    def memories(self, asked: Memory | None) -> tuple:
        """The memories `compile --orchestrate` measures in: the one `asked`, else both, texture (the compile's
        default) first; with offline batches, among those they hold costs of (one batch per memory)."""
        wanted = (asked,) if asked else (Memory.TEXTURE, Memory.BUFFER)
        if not self.batches:
            return wanted

        held = [Memory(read_manifest(Path(b)).get("memory", Memory.BUFFER)) for b in self.batches]
        if len(set(held)) < len(held):
            raise AdrenoError(f"the batches hold costs of {', '.join(held)} memory: give one batch per memory")
        found = tuple(m for m in wanted if m in held)
        if not found:
            raise AdrenoError(f"--memory {asked}: the batches hold costs of {' and '.join(held)} memory only")
        return found

    def open(self, database):
        """(a Runner, the device fingerprint its records are kept under); the caller closes the runner. Offline
        batches' costs are appended to `database` first."""
        if self.batches:
            from adreno.orchestrate.batch import BatchRunner, import_costs  # inside: loads TVM at import

            devices = {import_costs(Path(batch), database)[0] for batch in self.batches}
            if len(devices) > 1:
                raise AdrenoError(f"the batches were measured on {len(devices)} devices ({', '.join(sorted(devices))})"
                                  ": orchestration compares costs of one")
            return BatchRunner(", ".join(self.batches)), devices.pop()
        if self.tracker:
            # inside: they load TVM at import
            from adreno.farm.tracker import TrackerClient, count_servers
            from adreno.runners.rpc import RPCRunner, farm_fingerprint

            with TrackerClient(self.tracker, timeout=5.0) as client:  # before any candidate compiles
                if not count_servers(client.summary(), self.key):
                    raise FarmError(f"the tracker {self.tracker} has no device of key {self.key}; `adreno devices "
                                    f"--tracker {self.tracker}` lists its keys")
            return RPCRunner(self.tracker, self.key), farm_fingerprint(self.key)
        # inside: adreno --help does not need them
        from adreno.opencl.device import DeviceIdentity, select_device
        from adreno.runners.local import LocalRunner

        fingerprint = DeviceIdentity.from_cl_device(select_device(self.device)).fingerprint
        return LocalRunner(self.device), fingerprint


@contextmanager
def cost_table(records: str | None, site: MeasureSite, target: str, repeat: int, say, memory: Memory):
    """A `costs.CostTable` measuring in `memory` at `site`, kept in `records` (a temporary file, removed afterwards,
    when None); the runner is closed on the way out."""
    from adreno.orchestrate.costs import CostTable  # inside: loads TVM and scipy at import
    # inside: adreno --help does not need it
    from adreno.records import Database

    if records and Path(records).exists():
        regular_file(records, "--records")
    with tempfile.TemporaryDirectory(prefix="adreno-orchestrate-records-") as scratch:
        database = Database(records or Path(scratch) / "records.jsonl")
        runner, device = site.open(database)
        try:
            yield CostTable(database, runner, device, target, memory, repeat=repeat, progress=say)
        finally:
            runner.close()
