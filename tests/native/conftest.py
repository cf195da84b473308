"""Artifacts with a host library for this machine (`--host native`), compiled once per session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def native_tiny(tmp_path_factory):
    """`tiny` compiled with --host native in each memory: {"buffer": path, "texture": path}."""
    from adreno.compile import compile_model
    from adreno.options import CompileOptions

    root = tmp_path_factory.mktemp("native-tiny")
    return {memory: compile_model("tiny", root / memory, CompileOptions(memory=memory, host="native"))
            for memory in ("buffer", "texture")}


@pytest.fixture(scope="session")
def native_shape_sets(tmp_path_factory):
    """An OCR-recogniser-like model (tests/dynamic_models.py) at widths 8 and 16 in one artifact of two shape sets
    (texture, --host native), with an input of each set's shape: (path, [x of set 0, x of set 1])."""
    import numpy as np
    import onnx

    from adreno.artifact.shape_sets import parse_shape_sets
    from adreno.compile_shapes import compile_shape_sets
    from adreno.options import CompileOptions
    from tests.dynamic_models import ocr_like

    root = tmp_path_factory.mktemp("native-shapes")
    onnx.save(ocr_like(), root / "model.onnx")
    path, _ = compile_shape_sets(root / "model.onnx", root / "art", CompileOptions(memory="texture", host="native"),
                                 parse_shape_sets(["x:1,3,8,8", "x:1,3,8,16"]))
    rng = np.random.default_rng(6)
    return path, [rng.standard_normal((1, 3, 8, width)).astype(np.float32) for width in (8, 16)]


@pytest.fixture(scope="session")
def rt_check(tmp_path_factory):
    """tests/native/rt_check.c built against the app library's header (a C program of the C API)."""
    from .rt_programs import HERE, build_c

    return build_c(HERE / "rt_check.c", tmp_path_factory.mktemp("rt") / "rt_check")


@pytest.fixture(scope="session")
def java_api(tmp_path_factory):
    """The Java API's classes (native/java) compiled with the JDK's javac, and the directory of its JNI library."""
    import subprocess

    from adreno.native.plugin import LIB_DIR

    from .rt_programs import JAVA_SOURCES

    assert (LIB_DIR / "libadreno_rt_jni.so").is_file(), "libadreno_rt_jni.so is not built: install " \
        "openjdk-17-jdk-headless (tools/install_system_deps.sh) and run `make native`"
    classes = tmp_path_factory.mktemp("java")
    subprocess.run(["javac", "-d", str(classes), *map(str, sorted(JAVA_SOURCES.glob("adreno/rt/*.java")))],
                   check=True, capture_output=True, text=True)
    return classes
