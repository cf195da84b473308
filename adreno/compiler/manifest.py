"""The manifest's accounts of a compiled plan that any compile writes the same way: the bytes an app ships, how the
weights are stored, and the model's inputs and outputs under the names the user's files use. `adreno.compile`'s
`manifest` stage puts them next to what only the pipeline knows (the model's source, the records, the refusals)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ..artifact.format import KERNEL_DIR, PARAMS_NAME, Plan
from ..artifact.weights import QuantizedWeights


def artifact_sizes(directory: Path, library: str | None) -> dict:
    """Bytes of what an app ships: the weight file, the kernel sources, the host library (before the manifest)."""
    kernels = directory / KERNEL_DIR
    return {"weights": (directory / PARAMS_NAME).stat().st_size,
            "kernels": sum(p.stat().st_size for p in kernels.iterdir()) if kernels.is_dir() else 0,
            "host_library": (directory / library).stat().st_size if library else 0}


def weight_storage(plan: Plan, quantized: QuantizedWeights | None = None) -> dict:
    """How params.npz stores the params (`adreno.artifact.weights`): the count per stored dtype and per transform, how
    many are integer weights dequantized at load, how many of the model's quantized weights were not recognised
    among the params and are stored wide (`QuantizedWeights.stored_wide`), and the bytes of the params as the kernels
    read them next to the bytes stored."""
    params = [t for t in plan.tensors.values() if t.kind == "param"]
    forms = [t.stored_weight for t in params]
    return {"dtypes": dict(Counter(f.dtype for f in forms)),
            "transforms": dict(Counter(f.transform.value for f in forms)),
            "quantized": sum(f.quantization is not None for f in forms),
            "quantized_stored_wide": quantized.stored_wide() if quantized is not None else 0,
            "param_bytes": sum(t.nbytes for t in params), "stored_bytes": sum(f.nbytes for f in forms)}


def io_entries(plan: Plan, tensors: list[str], onnx_names: list[str], ranges: dict | None = None) -> dict:
    """The model's inputs or outputs under their ONNX names (what the user's .npz files use), each with the plan
    tensor that holds it: names that are not C identifiers are renamed before import (`adreno.support.identifiers`:
    `0` -> `input_0`, `gpu_0/data_0` -> `gpu_0_data_0`) and outputs are bindings (`gv`). An integer input has the
    range a random run draws it from (`values`, `adreno.frontend.input_values`)."""
    names = onnx_names if len(onnx_names) == len(tensors) else tensors
    ranges = ranges or {}
    return {name: {"tensor": t, "shape": plan.tensors[t].shape, "dtype": plan.tensors[t].dtype,
                   **({"values": list(ranges[name])} if name in ranges else {})}
            for name, t in zip(names, tensors)}
