# Two commands on a fresh machine: `make demo` and `make test` (each installs what it needs first).
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# pytest-xdist workers, each taking whole test files (module fixtures such as a compiled bundle are made once)
TEST_JOBS ?= 2

.PHONY: install native demo test clean

install: $(VENV)/.installed native

# TVM's OpenCL runtime plugin and the app harness (native/), rebuilt when their sources or the TVM wheels change.
native: $(VENV)/.installed
	$(MAKE) -C native -j2 --no-print-directory \
	  SITE="$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
	  VERSIONS="$$($(PY) -c 'from adreno.native.versions import wheel_versions; print(wheel_versions())')"

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
