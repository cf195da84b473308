"""The import structure docs/architecture.md draws: no cycle between our modules (function-level
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
# The package's lazy re-export of its Python API (`adreno.__getattr__` imports `adreno.api` when a caller first asks
# for `adreno.compile` and the like, after the modules have loaded) is no import-order dependency: modules that read
# `adreno.__version__` do not make a cycle with it.
GRAPH["adreno"].discard("adreno.api")


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


def test_orchestration_measures_through_the_runners_not_tune():
    """`adreno.orchestrate` sits above tuning but never imports it: its candidates are written by
    `runners.kernel_artifact` and measured by a `runners.interface.Runner`, the interface tuning measures through too
    (both packages' docstrings say so)."""
    orchestrate = _package_imports("adreno.orchestrate")
    assert not sorted(d for d in orchestrate if d == "adreno.tune" or d.startswith("adreno.tune.")), orchestrate
    writer = "adreno.runners.kernel_artifact"
    assert writer in orchestrate and writer in GRAPH["adreno.tune.builder"]


# What each package under the root may import besides itself, as its docstring says.
ALLOWED = {
    "adreno.artifact": ("adreno.errors", "adreno.options", "adreno.support", "adreno.targets"),
    "adreno.compiler": ("adreno.artifact", "adreno.targets", "adreno.texture", "adreno.opencl", "adreno.records",
                        "adreno.workload", "adreno.support", "adreno.errors", "adreno.options"),
    "adreno.targets": ("adreno.errors", "adreno.options", "adreno.opencl.device"),
    "adreno.support": ("adreno.errors",),
}
ROOT_MODULES_AT_MOST = 12  # issue 50: the root shows the compiler's entry points, the packages hold the rest


def test_each_root_package_imports_only_what_its_docstring_allows():
    for package, allowed in ALLOWED.items():
        outside = {d for d in _package_imports(package) if not d.startswith(package)} - {"adreno"}  # the version
        assert not sorted(d for d in outside if not d.startswith(allowed)), package


def test_the_root_holds_few_modules():
    modules = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(modules) <= ROOT_MODULES_AT_MOST, modules


RUN_SIDE = ("adreno.cache", "adreno.opencl", "adreno.runners", "adreno.farm", "adreno.native")
COMPILER = ("adreno.compile", "adreno.compiler", "adreno.tune", "adreno.schedules", "adreno.costmodel",
            "adreno.frontend", "adreno.texture", "adreno.targets.target")


def test_the_run_side_has_no_compiler_and_the_frontend_only_leaves():
    """What runs an artifact (the cache, the OpenCL executor, the runners, the farm, TVM's runtime path) never
    imports the compiler: a phone's farm agent and the GPU bundle run it without TVM or onnx. The ONNX frontend
    imports only the TVM-free leaves (errors, paths, identifiers, native_log, artifact)."""
    for package in RUN_SIDE:
        compiler = sorted(d for d in _package_imports(package) if d.startswith(COMPILER))
        assert not compiler, (package, compiler)
    leaves = {"adreno.errors", "adreno.support.paths", "adreno.support.identifiers", "adreno.support.native_log",
              "adreno.artifact.format"}
    outside = sorted(d for d in _package_imports("adreno.frontend") if not d.startswith("adreno.frontend"))
    assert set(outside) <= leaves, outside


# The command line's entry points (`python -m adreno`, `python -m adreno.cli`) run it when imported.
ENTRY_POINTS = ("adreno.__main__", "adreno.cli.__main__")
HEAVY = ("adreno.targets.target", "adreno.texture.planning", "adreno.orchestrate", "adreno.frontend.zoo", *ENTRY_POINTS)


def test_importing_our_modules_loads_neither_tvm_nor_onnx():
    """The rule `adreno/__init__.py` states: only the modules in HEAVY load TVM or onnx at import (`cli.__main__`
    and `__main__` run the command line)."""
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
               "import adreno.cache, adreno.opencl.executor, adreno.runners.offline, adreno.targets.devices\n")
    proc = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# Third-party packages whose import costs what a light entry point must not pay: TVM (and its FFI), onnx, onnxruntime,
# scipy, paramiko, torch, and pyopencl and numpy, which the run side needs only once it runs (the farm agent starts
# without numpy; nothing of the run side loads pyopencl at import). PULLS: what a package imports at its own import.
HEAVY_PACKAGES = frozenset({"tvm", "tvm_ffi", "onnx", "onnxruntime", "scipy", "paramiko", "torch", "pyopencl", "numpy"})
PULLS = {"tvm": {"tvm_ffi", "numpy"}, "tvm_ffi": {"numpy"}, "onnx": {"numpy"}, "onnxruntime": {"numpy"},
         "scipy": {"numpy"}, "pyopencl": {"numpy"}, "lightgbm": {"scipy", "numpy"}, "matplotlib": {"numpy"},
         "torch": {"numpy"}}
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _statements(path: Path) -> tuple[list, list]:
    """A file's import statements: (run at its import, inside functions). A class body runs at import."""
    top, inside = [], []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                (inside if in_function else top).append(child)
            visit(child, in_function or isinstance(child, FUNCTIONS))

    visit(ast.parse(path.read_text()), False)
    return top, inside


def _named(name: str, path: Path, node) -> list[str]:
    """The modules an import statement names: ours resolved to absolute names, `from package import module` naming
    the package and the module; third-party ones as written."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    base = (".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
            if node.level else node.module or "")
    return [base] + [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES]


def _initialised(target: str) -> list[str]:
    """Our modules that importing `target` runs: it and every package above it."""
    parts = target.split(".")
    return [m for m in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if m in MODULES]


AT_IMPORT = {name: [t for node in _statements(path)[0] for t in _named(name, path, node)]
             for name, path in MODULES.items()}


def _loads(targets) -> tuple[set[str], set[str]]:
    """(our modules, heavy packages) that importing `targets` loads: their packages' `__init__` and module-level
    imports, followed through our modules."""
    ours, heavy, todo = set(), set(), [m for t in targets for m in _initialised(t)]
    while todo:
        module = todo.pop()
        if module in ours:
            continue
        ours.add(module)
        for target in AT_IMPORT[module]:
            if target.split(".")[0] == "adreno":
                todo.extend(_initialised(target))
            else:
                top = target.split(".")[0]
                heavy |= ({top} | PULLS.get(top, set())) & HEAVY_PACKAGES
    return ours, heavy


# What `adreno --help` loads: the command line's modules (its parser imports every command module) and below.
HELP = _loads(m for m in MODULES if m.startswith("adreno.cli.") and m not in ENTRY_POINTS)[0]
NAMES = {"tvm": "TVM", "tvm_ffi": "TVM"}


def why_inside(name: str, path: Path, node) -> str | None:
    """Why a function-level import of our modules must stay in its function, or None: at module level it would load
    a heavy package that importing `name` does not load, or (in a module `adreno --help` loads) more of ours."""
    ours = [t for t in _named(name, path, node) if t.split(".")[0] == "adreno"]
    loaded, heavy = _loads(ours)
    extra = heavy - _loads([name])[1]
    if extra:
        named = {NAMES.get(p, p) for p in extra}
        return f"loads {' and '.join(sorted(named - {'numpy'} or named))} at import"  # numpy comes with the others
    if name in HELP and loaded - HELP:
        return "adreno --help does not need it"
    return None


def function_level_imports():
    """(module, path, statement) of every import of our modules inside a function."""
    for name, path in sorted(MODULES.items()):
        for node in _statements(path)[1]:
            if any(t.split(".")[0] == "adreno" for t in _named(name, path, node)):
                yield name, path, node


def _says_why(lines: list[str], node) -> bool:
    """An `# inside:` comment on the statement's lines, or on the line above the run of imports it belongs to."""
    if any("# inside:" in line for line in lines[node.lineno - 1:node.end_lineno]):
        return True
    above = node.lineno - 2
    while above >= 0 and lines[above].strip().startswith(("from ", "import ")):
        above -= 1
    return above >= 0 and lines[above].strip().startswith("# inside:")


def test_function_level_imports_of_ours_only_where_needed_and_each_says_why():
    """The rule `adreno/__init__.py` states: an import of our own modules sits inside a function only where, at
    module level, it would load TVM, onnx, onnxruntime, scipy, paramiko, torch, pyopencl or numpy (HEAVY_PACKAGES)
    into a module that does not load it, or more of ours into what `adreno --help` loads; and it says so in a
    `# inside:` comment on its line or above the run of imports it belongs to."""
    needless, silent = [], []
    for name, path, node in function_level_imports():
        where = f"{path.relative_to(ROOT.parent)}:{node.lineno}: {ast.unparse(node)}"
        if why_inside(name, path, node) is None:
            needless.append(where)
        if not _says_why(path.read_text().splitlines(), node):
            silent.append(where)
    assert not needless and not silent, (
        "imports that belong at module level (nothing heavy, nothing more for adreno --help):\n" + "\n".join(needless)
        + "\nfunction-level imports without a `# inside:` comment:\n" + "\n".join(silent))


def test_the_import_analysis_misses_no_heavy_package():
    """`_loads` reads the source; importing the modules, lightest first, loads no heavy package it did not name."""
    order = sorted((m for m in MODULES if m not in ENTRY_POINTS), key=lambda m: len(_loads([m])[1]))
    expected = {m: sorted(_loads([m])[1]) for m in order}
    code = ("import importlib, sys\n"
            f"heavy, expected, named = {sorted(HEAVY_PACKAGES)!r}, {expected!r}, set()\n"
            "for name, packages in expected.items():\n"
            "    importlib.import_module(name)\n"
            "    named |= set(packages)\n"
            "    loaded = {m for m in heavy if m in sys.modules} - named\n"
            "    if loaded:\n"
            "        sys.exit(f'importing {name} loaded {sorted(loaded)}, which the analysis does not name')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-600:]


MODES = "texture|buffer|fp16|fp32|plan|tvm|android|native|auto|off|rule|model"
MODE_COMPARISON = re.compile(rf"""[!=]=\s*["']({MODES})["']""")


def test_no_mode_compared_as_a_string():
    found = [f"{path.relative_to(ROOT.parent)}:{number}: {line.strip()}" for path in MODULES.values()
             for number, line in enumerate(path.read_text().splitlines(), 1) if MODE_COMPARISON.search(line)]
    assert not found, "\n".join(found)


def test_the_device_table_imports_no_tvm():
    code = "import sys, adreno.targets.devices, adreno.options; assert 'tvm' not in sys.modules, 'tvm imported'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_the_farm_never_imports_the_runners_that_call_it():
    """The runners (clients) use the farm's protocol helpers; the farm (agents, tracker: the servers) needs nothing
    of its clients, so the two packages are no import pair."""
    assert not sorted(d for d in _package_imports("adreno.farm") if d.startswith("adreno.runners"))
