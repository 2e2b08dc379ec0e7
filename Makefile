VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test compat compat-build bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,analytics,bench]'
	touch $(STAMP)

demo: setup
	$(PY) -m replog.demo

# Two pytest-xdist workers, each taking whole files (a module's fixtures and order stay as written): most
# tests wait on brokers in other processes, so two overlap their waits even on two cores (540-554 s against
# 940 s in one process on the idle 2-vCPU VM). TEST_WORKERS=0 runs the suite in-process.
# Files are handed out in collection order, where tests/conftest.py puts the longest first (tests/slow_files.py);
# without --no-loadscope-reorder xdist would re-sort them by their number of tests.
TEST_WORKERS ?= 2

test: setup
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m pytest -q --numprocesses $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# librdkafka's own integration suite against replog; fails if a test in tests/compat/librdkafka-passing.txt fails.
compat: setup
	$(PY) -m tests.compat.librdkafka

# Only the build of librdkafka's test-runner (kept in build/ per source hash; make compat would do it first).
compat-build: setup
	$(PY) -m tests.compat.librdkafka --build-only

bench: setup
	$(PY) -m benchmarks --quick

clean:
	rm -rf $(VENV) build *.egg-info
