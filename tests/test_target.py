import dataclasses
import json

import pytest
import tvm

from adreno.errors import AdrenoError, UnknownTargetError
from adreno.targets.devices import DEVICES, AdrenoDevice, describe, get_device
from adreno.targets.target import tvm_target

REQUIRED = ["adreno-640", "adreno-650", "adreno-660", "adreno-730", "adreno-740", "adreno-750", "adreno-830"]


def test_table_has_the_required_devices():
    assert set(REQUIRED) <= set(DEVICES)


@pytest.mark.parametrize("name", sorted(DEVICES))
def test_device_entry_is_consistent(name):
    d = DEVICES[name]
    assert d.name == name and d.gpu == f"Adreno {name.split('-')[1]}"
    assert d.generation == int(name.split("-")[1][0]) and d.socs and all(s.startswith("Snapdragon") for s in d.socs)
    assert d.compute_units is None or d.compute_units > 0
    assert 0 < d.schedule_threads <= d.max_workgroup_size and d.local_memory_bytes > 0
    assert min(d.image2d_max_width, d.image2d_max_height, d.image_array_max_layers) > 0 and d.fp16
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.fp16 = False


@pytest.mark.parametrize("name", sorted(DEVICES))
def test_tvm_target_carries_the_table_limits(name):
    d, target = DEVICES[name], tvm_target(name)
    assert target.kind.name == "opencl" and "adreno" in list(target.keys)
    assert target.attrs["device"] == "adreno"
    assert target.attrs["max_num_threads"] == target.attrs["max_threads_per_block"] == d.schedule_threads
    assert target.attrs["max_shared_memory_per_block"] == d.local_memory_bytes
    assert target.attrs["texture_spatial_limit"] == d.image2d_max_width
    assert target.attrs["texture_depth_limit"] == d.image_array_max_layers
    assert target.attrs["thread_warp_size"] == 1 and target.attrs["image_base_address_alignment"] == 64


def test_target_sets_every_attribute_of_tvms_adreno_tag():
    tag, ours = tvm.target.Target("qcom/adreno-opencl"), tvm_target("adreno-740")
    assert set(tag.attrs) <= set(ours.attrs) and list(tag.keys) == list(ours.keys)


def test_hosts():
    android, native = tvm_target("adreno-660").host, tvm_target("adreno-660", host="native").host
    assert android.kind.name == native.kind.name == "llvm"
    assert android.attrs["mtriple"] == "aarch64-linux-android"
    assert native.attrs.get("mtriple", "") != "aarch64-linux-android"
    with pytest.raises(UnknownTargetError, match="android, native"):
        tvm_target("adreno-660", host="ios")


@pytest.mark.parametrize("name", ["nvidia-h200", "pocl-cpu"])
def test_devices_met_in_measurement_are_targets(name):
    d = get_device(name)
    assert d.name == name and not d.socs and tvm_target(name).attrs["model"] == name
    assert d.device_class == ("cpu" if name == "pocl-cpu" else "gpu") and d.compute_units > 0 and d.facts_source


def test_tvm_target_accepts_a_device_or_a_name():
    assert tvm_target(get_device("650")).export() == tvm_target("adreno-650").export()


@pytest.mark.parametrize("spelling", ["adreno-740", "740", "Adreno 740", "ADRENO-740", " adreno_740 "])
def test_name_forms(spelling):
    assert get_device(spelling) is DEVICES["adreno-740"]


@pytest.mark.parametrize("name", ["adreno-999", "mali-g78", "", "74"])
def test_unknown_name_lists_known_names(name):
    with pytest.raises(UnknownTargetError) as info:
        get_device(name)
    assert isinstance(info.value, AdrenoError) and all(known in str(info.value) for known in DEVICES)


def test_describe_is_json_serialisable():
    summary = describe("adreno-830")
    assert json.loads(json.dumps(summary)) == summary
    assert summary["name"] == "adreno-830" and summary["generation"] == 8 and summary["socs"] == ["Snapdragon 8 Elite"]
    assert set(summary) == {f.name for f in dataclasses.fields(AdrenoDevice)} | {"register_budget"}
    assert summary["register_budget"] == get_device("adreno-830").register_budget
