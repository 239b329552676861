# The two commands of the README, and make test-fast. Each creates .venv on first use (Python >= 3.11).
PYTHON ?= python3
# one venv per interpreter: `PYTHON=python3.13 make test` builds and tests in .venv-python3.13
VENV   ?= $(if $(filter python3,$(PYTHON)),.venv,.venv-$(notdir $(PYTHON)))
PY      = $(VENV)/bin/python
PIP     = $(PY) -m pip
# torch is pinned (a CPU wheel on these machines; an unpinned torch pulls GBs of CUDA wheels)
CONSTRAINTS = .ci/constraints.txt

.PHONY: run test test-fast lint fuzz figures docs bench clean

# pip shows what it installs (no -q): the test install brings torch (a ~200 MB CPU wheel for Python
# 3.11 here; on Python 3.12/3.13 PyPI's build, several GB with its CUDA libraries) and the extras;
# each step says what it does first, so a long download is not mistaken for a hang.
$(VENV)/.installed-run: pyproject.toml
	@echo "== cprsim: creating $(VENV) with $$($(PYTHON) --version) and installing cprsim (numpy, scipy, simpy, matplotlib, ...)"
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --progress-bar on --upgrade pip
	$(PIP) install --progress-bar on -c $(CONSTRAINTS) -e .
	touch $@

# the MovieLens-100k files of `cprsim calibrate --data movielens-100k` come in recbole's wheel, which
# is installed without its dependencies (recbole is never imported; its ray pin caps Python at 3.11)
$(VENV)/.installed-test: pyproject.toml $(CONSTRAINTS)
	@echo "== cprsim: creating $(VENV) with $$($(PYTHON) --version); installing cprsim with the test extras:"
	@echo "   torch (dlrm), dask (distributed), jupyter (notebooks), pyarrow, pandas, ruff, mypy; several minutes"
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --progress-bar on --upgrade pip
	$(PIP) install --progress-bar on -c $(CONSTRAINTS) -e '.[test,dlrm,distributed,notebooks,parquet,pandas,lint]'
	@echo "== cprsim: the MovieLens-100k files (recbole's wheel, 2 MB, without its dependencies)"
	$(PIP) install --progress-bar on --no-deps -c $(CONSTRAINTS) recbole
	@echo "== cprsim: installed in $(VENV)"
	touch $@ $(VENV)/.installed-run

## make run: simulate the built-in default scenario (cpr-production) and print the breakdown
run: $(VENV)/.installed-run
	$(VENV)/bin/cprsim simulate cpr-production --out out/cpr-production

## make test: the whole test suite, on every core (pytest-xdist; each test file stays on one
## worker: TEST_JOBS=1 make test runs it in one process)
TEST_JOBS ?= auto
test: $(VENV)/.installed-test
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_JOBS) --dist loadfile

## make lint: ruff (the rule set in pyproject.toml), ruff format and mypy (with the pydantic plugin)
LINTED = cprsim tests examples docs benchmarks
lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/mypy

## make test-fast: the suite without the tests marked slow (4-6 min on 2 cores, measured while other jobs shared them: README)
test-fast: $(VENV)/.installed-test
	$(PY) -m pytest -q -p no:cacheprovider -m "not slow"

## make fuzz: the long bad-input campaign (5,000 hostile inputs through the CLI; counts in out/fuzz.json)
fuzz: $(VENV)/.installed-test
	@mkdir -p out
	FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-5000} FUZZ_REPORT=out/fuzz.json $(PY) -m pytest -q -s -p no:cacheprovider tests/test_fuzz.py

## make figures: regenerate every experiment's figures into experiments/*/out/ and the tables its README pastes
## (QUICK=1 make figures: the same pipeline on tiny sizes, README left alone; tests/test_experiments.py)
figures: $(VENV)/.installed-test
	@for d in experiments/*/; do if [ -x $$d/run.sh ]; then echo "== $$d"; $$d/run.sh || exit 1; fi; done

## make docs: regenerate the generated docs: the CLI and API references and every pasted output
## (docs/gen_outputs.py reruns each marked command; a test fails on a stale one)
docs: $(VENV)/.installed-test
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) docs/gen_cli.py
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) docs/gen_api.py
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) docs/gen_outputs.py --write

## make bench: the benchmarks (ratios against a baseline measured in the same run)
bench: $(VENV)/.installed-test
	@for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) out .pytest_cache
