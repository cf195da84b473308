"""`adreno models` and `adreno devices`: what there is to compile and where it can run."""

from __future__ import annotations

from .common import emit


def register(sub, command) -> None:  # noqa: ARG001 - the register(sub, command) interface of adreno.cli.main
    command("models", cmd_models, "list the bundled example models (built in code, nothing downloaded)")

    p = command("devices", cmd_devices, "list OpenCL devices on this machine, or the device farm's queue")
    p.add_argument("--local", action="store_true", help="the OpenCL platforms/devices pyopencl sees here (default)")
    p.add_argument("--tracker", metavar="HOST:PORT", help="also show the RPC tracker's queue and device health")


def cmd_models(args) -> int:
    from ..frontend import zoo  # inside: loads onnx at import

    models = zoo.list_models()
    rows = [{"name": m.name, "input": [m.input_name, list(m.input_shape)], "description": m.description}
            for m in models]
    width = max(len(m.name) for m in models)
    text = "\n".join(f"{m.name:<{width}} {'x'.join(map(str, m.input_shape)):<14} {m.description}" for m in models)
    emit(args, rows, text)
    return 0



def cmd_devices(args) -> int:
    from dataclasses import asdict

    data: dict = {}
    lines: list[str] = []
    if args.local or not args.tracker:
        from ..opencl.device import list_devices  # inside: adreno --help does not need it

        devices = list_devices()
        data["local"] = [asdict(d) for d in devices]
        lines.append("local OpenCL devices:" if devices else "no local OpenCL devices (install PoCL: "
                     "`pip install pocl-binary-distribution`, or a GPU vendor's OpenCL driver)")
        for d in devices:
            lines.append(f"  [{d.index}] {d.name} ({d.kind}) on {d.platform} {d.platform_version}; "
                         f"{d.compute_units} CUs, max workgroup {d.max_workgroup_size}, local mem "
                         f"{d.local_memory_bytes // 1024} KiB, images {'yes' if d.image_support else 'no'}, "
                         f"fp16 {'yes' if d.fp16 else 'no'}, compiler {'ok' if d.compiler_ok else 'BROKEN'}")
    if args.tracker:
        from ..farm.tracker import farm_status, format_status  # inside: adreno --help does not need it

        status = farm_status(args.tracker)
        data["tracker"] = asdict(status)
        lines.append(format_status(status))
    emit(args, data, "\n".join(lines))
    return 0
