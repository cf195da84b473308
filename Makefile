# Two commands on a fresh machine: `make demo` and `make test` (each installs what it needs first).
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# pytest-xdist workers, each taking whole test files (module fixtures such as a compiled bundle are made once)
TEST_JOBS ?= 2

.PHONY: install native native-aarch64 phonebox demo test clean

install: $(VENV)/.installed native

# TVM's OpenCL runtime plugin and the app harness (native/), rebuilt when their sources or the TVM wheels change.
native: $(VENV)/.installed
	$(MAKE) -C native -j2 --no-print-directory \
	  SITE="$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
	  VERSIONS="$$($(PY) -c 'from adreno.native.versions import wheel_versions; print(wheel_versions())')"

# The same native/ built for AArch64 Linux (glibc) with Debian's aarch64-linux-gnu-g++, against the aarch64 wheels of
# the venv's versions, into build/native-aarch64 (docs/native.md); `phonebox`: that build in an arm64 userland run
# by qemu-user (tools/phonebox.sh), where the tests run a phone's lib.so.
native-aarch64: $(VENV)/.installed
	PYTHON=$(PY) bash tools/phonebox.sh native

phonebox: $(VENV)/.installed
	PYTHON=$(PY) bash tools/phonebox.sh setup

$(VENV)/.installed: pyproject.toml tools/install_system_deps.sh
	bash tools/install_system_deps.sh
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

demo: install
	$(VENV)/bin/adreno compile resnet18 --target adreno-740 -o build/resnet18
	$(VENV)/bin/adreno run build/resnet18 --check --repeat 5

test: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/python -m pytest -q -n $(TEST_JOBS) --dist loadfile $(PYTEST_ARGS)

clean:
	rm -rf build $(VENV) adreno/native/lib
