"""The import structure the README's architecture section draws: no cycle between our modules (function-level
imports counted too), the layers in their order, no mode compared as a string, and a TVM-free device table."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import adreno

ROOT = Path(adreno.__file__).parent


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict) -> set[str]:
    """Our modules `name` imports anywhere in its file (module level and inside functions): the module named, or
    the deepest of our modules above it."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = (".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
                    if node.level else node.module or "")
            # `from package import module` names the module (its package is initialised first, as always)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


MODULES = _modules()
GRAPH = {name: _imports(name, path, MODULES) for name, path in MODULES.items()}


def _reaches(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in GRAPH[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_no_import_cycle_between_our_modules():
    cycles = sorted(name for name in GRAPH if name in _reaches(name))
    assert not cycles, f"modules on an import cycle: {cycles}"


def _package_imports(package: str) -> set[str]:
    return {dep for name, deps in GRAPH.items() if name == package or name.startswith(package + ".")
            for dep in deps}


def test_layers_import_downwards_only():
    """Schedules know neither the cost model nor compile nor tune; the cost model sits below compile and tune;
    compile never imports tune; tune reaches compile through `compile.lower_relax` only."""
    def under(deps, package):
        return sorted(d for d in deps if d == package or d.startswith(package + "."))

    schedules = _package_imports("adreno.schedules")
    for above in ("adreno.costmodel", "adreno.tune", "adreno.compile", "adreno.cli"):
        assert not under(schedules, above), above
    costmodel = _package_imports("adreno.costmodel")
    for above in ("adreno.tune", "adreno.compile", "adreno.cli"):
        assert not under(costmodel, above), above
    assert not under(GRAPH["adreno.compile"], "adreno.tune")
    tune_to_compile = {name for name, deps in GRAPH.items() if name.startswith("adreno.tune.")
                       and "adreno.compile" in deps}
    for name in tune_to_compile:
        source = MODULES[name].read_text()
        assert set(re.findall(r"from \.\.compile import (\w+)", source)) == {"lower_relax"}, name


RUN_SIDE = ("adreno.cache", "adreno.opencl", "adreno.runners", "adreno.farm", "adreno.native")
COMPILER = ("adreno.compile", "adreno.tune", "adreno.schedules", "adreno.costmodel", "adreno.frontend",
            "adreno.texture", "adreno.target")


def test_the_run_side_has_no_compiler_and_the_frontend_only_leaves():
    """What runs an artifact (the cache, the OpenCL executor, the runners, the farm, TVM's runtime path) never
    imports the compiler: a phone's farm agent and the GPU bundle run it without TVM or onnx. The ONNX frontend
    imports only the TVM-free leaves (errors, paths, identifiers, native_log, artifact)."""
    for package in RUN_SIDE:
        compiler = sorted(d for d in _package_imports(package) if d.startswith(COMPILER))
        assert not compiler, (package, compiler)
    leaves = {"adreno.errors", "adreno.paths", "adreno.identifiers", "adreno.native_log", "adreno.artifact"}
    outside = sorted(d for d in _package_imports("adreno.frontend") if not d.startswith("adreno.frontend"))
    assert set(outside) <= leaves, outside


HEAVY = ("adreno.target", "adreno.texture.planning", "adreno.orchestrate", "adreno.frontend.zoo", "adreno.cli.__main__")


def test_importing_our_modules_loads_neither_tvm_nor_onnx():
    """The rule `adreno/__init__.py` states: only the modules in HEAVY load TVM or onnx at import (`cli.__main__`
    runs the command line)."""
    light = sorted(m for m in MODULES if not m.startswith(HEAVY))
    code = ("import importlib, sys\n"
            f"for name in {light!r}:\n"
            "    importlib.import_module(name)\n"
            "    heavy = [m for m in ('tvm', 'onnx', 'onnxruntime') if m in sys.modules]\n"
            "    if heavy:\n"
            "        sys.exit(f'importing {name} loaded {heavy}')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-400:]


def test_an_artifact_runs_without_tvm_or_onnx():
    blocker = ("import sys\n"
               "class Block:\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        if name.split('.')[0] in ('tvm', 'tvm_ffi', 'onnx', 'onnxruntime'):\n"
               "            raise ImportError('blocked: ' + name)\n"
               "sys.meta_path.insert(0, Block())\n"
               "import adreno.cache, adreno.opencl.executor, adreno.runners.offline, adreno.devices\n")
    proc = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


MODES = "texture|buffer|fp16|fp32|plan|tvm|android|native|auto|off|rule|model"
MODE_COMPARISON = re.compile(rf"""[!=]=\s*["']({MODES})["']""")


def test_no_mode_compared_as_a_string():
    found = [f"{path.relative_to(ROOT.parent)}:{number}: {line.strip()}" for path in MODULES.values()
             for number, line in enumerate(path.read_text().splitlines(), 1) if MODE_COMPARISON.search(line)]
    assert not found, "\n".join(found)


def test_the_device_table_imports_no_tvm():
    code = "import sys, adreno.devices, adreno.options; assert 'tvm' not in sys.modules, 'tvm imported'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_the_farm_never_imports_the_runners_that_call_it():
    """The runners (clients) use the farm's protocol helpers; the farm (agents, tracker: the servers) needs nothing
    of its clients, so the two packages are no import pair."""
    assert not sorted(d for d in _package_imports("adreno.farm") if d.startswith("adreno.runners"))
