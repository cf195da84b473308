"""Modes are enums all the way down (docs/architecture.md): the CLI parses a flag into its member, the key grammar
writes and reads a kernel's memory in one place, task extraction keeps what compile keeps, and JSON holds the same
strings as before the enums."""

from __future__ import annotations

import json

import pytest

from adreno.cli.main import build_parser
from adreno.options import CompileOptions, Host, Memory, Precision, Runtime, Schedules, Staging, Winograd
from adreno.records import DIRECT_OPS, LAYOUT_OPS, direct_key, layout_key
from adreno.schedules import conv2d_1x1, conv2d_texture, conv2d_winograd
from adreno.workload import ConvWorkload, key_memory, memory_op

CONV = ConvWorkload(1, 64, 14, 14, 64, 3, 3, 14, 14, (1, 1), (1, 1), (1, 1, 1, 1), 1, "float32")


def test_the_key_grammar_writes_and_reads_the_memory_in_one_place():
    for memory in Memory:
        assert key_memory(CONV.key(memory_op("conv2d_winograd", memory))) is memory
        assert key_memory(layout_key(CONV, memory)) is memory and key_memory(direct_key(CONV, memory)) is memory
        assert LAYOUT_OPS[memory] in layout_key(CONV, memory) and DIRECT_OPS[memory] in direct_key(CONV, memory)
    texture_ops = [*conv2d_texture.OPS.values(), conv2d_1x1.OP,
                   *(stage for stage, _ in conv2d_winograd.stage_workloads(CONV, 4, packed=True))]
    assert all(key_memory(f"{op}|x") is Memory.TEXTURE for op in texture_ops), texture_ops
    buffer_ops = ["conv2d_direct", "depthwise_conv2d", "softmax", "max_pool2d",
                  *(stage for stage, _ in conv2d_winograd.stage_workloads(CONV, 4))]
    assert all(key_memory(f"{op}|x") is Memory.BUFFER for op in buffer_ops), buffer_ops


def test_the_cli_parses_flags_into_members():
    parser = build_parser()
    args = parser.parse_args(["compile", "tiny", "--memory", "buffer", "--precision", "fp32", "--schedules", "tvm",
                              "--winograd", "f4", "--staging", "off", "--host", "native"])
    assert (args.memory, args.precision, args.schedules, args.winograd, args.staging, args.host) == (
        Memory.BUFFER, Precision.FP32, Schedules.TVM, Winograd.F4, Staging.OFF, Host.NATIVE)
    assert all(type(v) is not str for v in (args.memory, args.schedules, args.winograd, args.staging, args.host))
    defaults = parser.parse_args(["compile", "tiny"])
    assert defaults.precision is Precision.FP32 and defaults.staging is Staging.AUTO and defaults.memory is None
    assert parser.parse_args(["run", "artifact"]).runtime is Runtime.PLAN
    tune = parser.parse_args(["tune", "tiny"])
    assert tune.memory is Memory.TEXTURE and tune.precision is Precision.FP32 and tune.runtime is Runtime.PLAN


@pytest.mark.parametrize("argv", [["compile", "tiny", "--memory", "textures"],
                                  ["compile", "tiny", "--schedules", "none"],  # task extraction's, not a user's
                                  ["tune", "tiny", "--precision", "fp8"]])
def test_an_illegal_flag_value_is_an_invalid_choice(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_members_serialise_to_the_strings_records_and_manifests_always_held():
    assert json.dumps({"memory": Memory.TEXTURE, "precision": Precision.FP16, "staging": Staging.OFF}) == \
        '{"memory": "texture", "precision": "fp16", "staging": "off"}'
    assert f"{Memory.BUFFER} memory" == "buffer memory"


def test_task_extraction_keeps_the_image_limit_and_stores_the_precision():
    """`tune/extract.py` builds its device as compile does: `--image-max` caps the images a task records."""
    from adreno.tune.extract import extract_tasks

    def sides(tasks) -> list[int]:
        return [max(image["width"], image["height"]) for task in tasks for image in task.images if image]

    tasks = extract_tasks("tiny", CompileOptions(memory=Memory.TEXTURE, precision=Precision.FP16))
    assert max(sides(tasks)) > 8, "tiny's activations are 16x16 and 32x32 images"
    assert all(task.precision is Precision.FP16 and task.staging is Staging.AUTO for task in tasks)
    capped = extract_tasks("tiny", CompileOptions(memory=Memory.TEXTURE, image_max=8))
    assert sides(capped) and max(sides(capped)) <= 8, "wider tensors stay buffers, as compile --image-max 8 plans"
    assert all(task.precision is Precision.FP32 for task in capped)
