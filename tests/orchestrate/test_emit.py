"""Emission: the BLP's kernels compiled into the artifact (`adreno compile --orchestrate`).

Whatever the costs, the emitted partition must compute the model: seeded random costs (an input, not a device) make
the BLP choose odd partitions, with recomputation among them, and each artifact is checked against onnxruntime.
The CLI test measures on PoCL for real: the artifact passes `run --check`, its plan launches the functions the
manifest names for the chosen kernels, and a second compile measures nothing.
"""

import json
import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from adreno.cli.compile import orchestration_line
from adreno.cli.main import main
from adreno.compile import compile_model
from adreno.errors import AdrenoError
from adreno.frontend import zoo
from adreno.frontend.importer import load_model
from adreno.options import CompileOptions, Host, Memory, Winograd
from adreno.orchestrate.emit import topological
from adreno.orchestrate.launch import LaunchCost
from adreno.orchestrate.orchestrator import Orchestrator
from adreno.records import Database


class SeededCosts:
    """A cost source of seeded uniform costs (the `costs.CostTable` interface), so the choice is arbitrary."""

    target_name, device, measured = "adreno-740", "seeded", 0

    def __init__(self, seed: int, memory: Memory = Memory.BUFFER):
        self.rng, self.launches, self.launch = np.random.default_rng(seed), {}, LaunchCost(1e-6, 0.0)
        self.memory = memory

    def costs(self, graph, kernels):
        return {k.primitives: float(self.rng.uniform(1e-6, 1e-4)) for k in kernels}


class FailedCosts(SeededCosts):
    """A cost source whose every measurement failed: every block falls back to FuseOps' partition."""

    def costs(self, graph, kernels):
        return {k.primitives: None for k in kernels}


def test_a_compile_without_costs_emits_todays_partition(tmp_path, pocl_device):
    """Every block falls back to FuseOps' partition of the unsplit model, which is what the default compile
    launches: MobileViT's LayerNorms and softmaxes are one kernel each again, not the kernels of their primitives."""
    orchestrator = Orchestrator([FailedCosts(0)], max_size=2)
    options = CompileOptions(host=Host.NATIVE, memory=Memory.BUFFER, winograd=Winograd.OFF)
    orchestrated = compile_model("mobilevit_xs", tmp_path / "o", options, orchestrator=orchestrator)
    default = compile_model("mobilevit_xs", tmp_path / "d", options)
    assert len(orchestrator.partition.fallbacks) == len(orchestrator.orchestration.chosen)
    assert {c.call.op.name for c in orchestrator.partition.composites} == {"relax.nn.layer_norm", "relax.nn.softmax"}

    def ops(path):
        return sorted(s["op"] for s in json.loads((path / "plan.json").read_text())["steps"])

    assert ops(orchestrated) == ops(default)
    assert sum(op in ("layer", "softmax") for op in ops(orchestrated)) == 8  # 6 LayerNorms, 2 softmaxes

    from adreno.opencl.executor import Executor

    onnx_model, _ = load_model("mobilevit_xs")
    feed = {i.name: np.random.default_rng(0).standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim])
            .astype(np.float32) for i in onnx_model.graph.input}
    want = ort.InferenceSession(onnx_model.SerializeToString()).run(None, feed)
    np.testing.assert_allclose(Executor(str(orchestrated), pocl_device).run(list(feed.values()))[0], want[0],
                               rtol=1e-3, atol=1e-4)


def test_the_memory_predicted_fastest_is_chosen():
    from types import SimpleNamespace

    from adreno.options import CompileOptions as Options
    from adreno.orchestrate.orchestrator import MemoryChoice

    def choice(memory, kernels_s):
        return MemoryChoice(memory, SimpleNamespace(report={"launch": {"per_run_s": 1e-4}}),
                            SimpleNamespace(predicted_s=kernels_s))

    texture, buffer, unknown = choice(Memory.TEXTURE, 3e-3), choice(Memory.BUFFER, 2e-3), choice(Memory.BUFFER, None)
    assert MemoryChoice.best([texture, buffer]) is buffer and buffer.predicted_s == pytest.approx(2.1e-3)
    assert MemoryChoice.best([unknown, texture]) is texture  # a prediction beats none
    assert MemoryChoice.best([choice(Memory.TEXTURE, None), unknown]).memory is Memory.TEXTURE  # the first
    assert str(unknown) == "buffer unknown" and str(texture) == "texture 3.100 ms"
    summary = {"predicted_run_s": 2.1e-3, "memory": "buffer", "memories": {"texture": None, "buffer": 2.1e-3},
               "kernels": [{}], "candidates": 4, "measured_now": 2, "fallbacks": []}
    assert orchestration_line(summary) == ("orchestrated: 1 chosen kernels of 4 candidates (2 measured now), "
                                           "a run predicted 2.100 ms (in texture unknown)")
    with pytest.raises(AdrenoError, match="measured in buffer memory"):  # --memory texture, costs of buffer
        Orchestrator([SeededCosts(0, Memory.BUFFER)]).check(Options(memory=Memory.TEXTURE))
    Orchestrator([SeededCosts(0, Memory.TEXTURE), SeededCosts(0, Memory.BUFFER)]).check(Options())


def test_topological_order_and_cycle():
    assert topological([set(), {"a"}, {"b"}], [["a"], ["b"], ["c"]]) == [0, 1, 2]
    assert topological([{"b"}, set()], [["a"], ["b"]]) == [1, 0]
    assert topological([{"b"}, {"a"}], [["a"], ["b"]]) is None  # each reads what the other writes
    assert topological([{"x"}], [["a"]]) == [0]  # nobody writes x: external


@pytest.mark.parametrize("model, seed, winograd, memory", [
    ("tiny", 0, Winograd.OFF, Memory.BUFFER), ("tiny", 1, Winograd.OFF, Memory.BUFFER),
    ("efficientnet_se", 2, Winograd.OFF, Memory.BUFFER), ("mobilenetv3_small", 3, Winograd.OFF, Memory.BUFFER),
    # Winograd's stages among the primitives: forced F(2x2) on tiny's first conv, the rule's F(4x4) on a ResNet block
    ("tiny", 4, Winograd.F2, Memory.BUFFER), ("resnet18_block", 5, Winograd.AUTO, Memory.BUFFER),
    # texture memory: the packed convs, packs and unpacks are primitives, the candidates read images
    ("tiny", 6, Winograd.OFF, Memory.TEXTURE), ("resnet18_block", 7, Winograd.AUTO, Memory.TEXTURE),
    ("mobilevit_xs", 8, Winograd.OFF, Memory.TEXTURE)])
def test_any_choice_computes_the_model(tmp_path, model, seed, winograd, memory, pocl_device):
    orchestrator = Orchestrator([SeededCosts(seed, memory)], max_size=3)
    options = CompileOptions(host=Host.NATIVE, memory=memory, winograd=winograd)
    path = compile_model(model, tmp_path / "a", options, orchestrator=orchestrator)
    manifest = json.loads((path / "manifest.json").read_text())
    summary = manifest["orchestration"]
    assert summary["kernels"] and all(k["functions"] or k["dead"] for k in summary["kernels"])
    assert len(orchestrator.partition.kernels) == len(summary["kernels"])
    plan_funcs = {step["func"] for step in json.loads((path / "plan.json").read_text())["steps"]}
    assert {f for k in summary["kernels"] for f in k["functions"]} <= plan_funcs
    stages = {"input_transform", "batch_gemm"} if winograd is not Winograd.OFF else set()
    assert {s for s in ("input_transform", "batch_gemm") if any(s in f for f in plan_funcs)} == stages
    if stages:  # the transformed weights are computed at load, never stored: the 3x3 source is
        assert manifest["weight_storage"]["transforms"].get(f"winograd{2 if winograd is Winograd.F2 else 4}")
    if memory is Memory.TEXTURE:  # the packed convs read and write images, as in the default compile
        assert manifest["textures"]["image_tensors"] > 0 and any("nchw4c" in f for f in plan_funcs), plan_funcs

    from adreno.opencl.executor import Executor

    onnx_model, _ = load_model(model)
    feed = {i.name: np.random.default_rng(0).standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim])
            .astype(np.float32) for i in onnx_model.graph.input}
    want = ort.InferenceSession(onnx_model.SerializeToString()).run(None, feed)
    got = Executor(str(path), pocl_device).run(list(feed.values()))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4)


def test_compile_orchestrate_measures_once_and_passes_check(tmp_path, capsys):
    """Without --memory both memories are measured, and the one predicted faster is compiled. The records file's
    folder does not exist yet: the compile makes it, as the tuner does."""
    records, out = tmp_path / "new" / "r.jsonl", tmp_path / "a"
    # forced F(2x2): the Winograd stages of tiny's first conv are measured and chosen like any primitive
    args = ["compile", "tiny", "-o", str(out), "--orchestrate", "--max-size", "2", "--records", str(records),
            "--host", "native", "--winograd", "f2"]
    assert main(args) == 0
    err = capsys.readouterr().err
    # the launch cost is the device's: read once for both memories
    assert "measured 1/" in err and len(re.findall(r"launch cost [\d.]+ us", err)) == 1, err
    manifest = json.loads((out / "manifest.json").read_text())
    summary = manifest["orchestration"]
    predicted = summary["memories"]
    assert set(predicted) == {"texture", "buffer"} and all(p > 0 for p in predicted.values()), predicted
    assert manifest["memory"] == summary["memory"] == min(predicted, key=predicted.get)
    assert summary["predicted_run_s"] == predicted[manifest["memory"]] and manifest["winograd"] == "f2"
    assert f"compiling {manifest['memory']} memory" in err
    keys = {r.workload.split("|")[1] for r in Database(records).records if "|launch|" not in r.workload}
    assert keys == {"texture", "buffer"}, keys
    assert any("batch_gemm" in k["ops"] for k in summary["kernels"]), summary["kernels"]
    assert summary["measured_now"] > 0 and summary["predicted_run_s"] > 0 and not summary["fallbacks"]
    plan_funcs = {step["func"] for step in json.loads((out / "plan.json").read_text())["steps"]}
    for kernel in summary["kernels"]:  # the plan launches what each chosen kernel became
        assert kernel["cost_s"] > 0 and set(kernel["functions"]) <= plan_funcs, kernel
    assert main(["run", str(out), "--check", "--repeat", "2"]) == 0
    lines = len(records.read_text().splitlines())
    assert main(args) == 0
    assert "measured 1/" not in capsys.readouterr().err and len(records.read_text().splitlines()) == lines
    assert json.loads((out / "manifest.json").read_text())["orchestration"]["measured_now"] == 0


def test_compile_orchestrate_in_texture_memory_passes_check(tmp_path, capsys):
    """`--memory texture`: the candidates are the packed layouts' primitives, measured on PoCL reading images; the
    artifact keeps its packed tensors in images and passes `run --check`. The same model retrained (other weights)
    measures nothing: the keys hold the weights' shapes, not their values."""
    out = tmp_path / "a"
    assert main(["compile", "tiny", "-o", str(out), "--orchestrate", "--memory", "texture", "--max-size", "1",
                 "--records", str(tmp_path / "r.jsonl"), "--host", "native"]) == 0
    assert "measured 1/" in capsys.readouterr().err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["memory"] == "texture" and manifest["textures"]["image_tensors"] > 0
    summary = manifest["orchestration"]
    assert any("conv2d_nchw4c" in f for k in summary["kernels"] for f in k["functions"]), summary["kernels"]
    assert summary["measured_now"] > 0 and not summary["fallbacks"]
    assert main(["run", str(out), "--check", "--repeat", "2"]) == 0
    retrained = tmp_path / "tiny_seed1.onnx"
    onnx.save(zoo.get_model("tiny", seed=1), retrained)
    again = tmp_path / "b"
    assert main(["compile", str(retrained), "-o", str(again), "--orchestrate", "--memory", "texture", "--max-size",
                 "1", "--records", str(tmp_path / "r.jsonl"), "--host", "native"]) == 0
    assert "measured 1/" not in capsys.readouterr().err
    assert json.loads((again / "manifest.json").read_text())["orchestration"]["measured_now"] == 0
    assert main(["run", str(again), "--check", "--repeat", "2"]) == 0


@pytest.mark.parametrize("extra, message", [
    (["--memory", "texture", "--precision", "fp16"], "--precision fp16"),
    (["--schedules", "tvm"], "--schedules tvm"),
    (["--max-size", "0"], "--max-size must be positive"),
])
def test_orchestrate_refuses_what_it_cannot_honour(tmp_path, extra, message, capsys):
    assert main(["compile", "tiny", "-o", str(tmp_path / "a"), "--orchestrate", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "a").exists()
