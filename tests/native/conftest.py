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
def rt_check(tmp_path_factory):
    """tests/native/rt_check.c built against the app library's header (a C program of the C API)."""
    from .rt_programs import HERE, build_c

    return build_c(HERE / "rt_check.c", tmp_path_factory.mktemp("rt") / "rt_check")
