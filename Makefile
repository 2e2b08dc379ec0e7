VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,analytics,bench]'
	touch $(STAMP)

demo: setup
	$(PY) -m replog.demo

test: setup
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m pytest -q

bench: setup
	$(PY) -m benchmarks --quick

clean:
	rm -rf $(VENV) build *.egg-info
