# The two commands of the README, and make test-fast. Each creates .venv on first use (Python >= 3.11).
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
PIP     = $(PY) -m pip
# torch is pinned (a CPU wheel on these machines; an unpinned torch pulls GBs of CUDA wheels)
CONSTRAINTS = .ci/constraints.txt

.PHONY: run test test-fast lint fuzz figures bench clean

$(VENV)/.installed-run: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -c $(CONSTRAINTS) -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -c $(CONSTRAINTS) -e '.[test,dlrm,distributed,notebooks,movielens,parquet,pandas,lint]'
	touch $@ $(VENV)/.installed-run

## make run: simulate the built-in default scenario (cpr-production) and print the breakdown
run: $(VENV)/.installed-run
	$(VENV)/bin/cprsim simulate cpr-production --out out/cpr-production

## make test: the whole test suite
test: $(VENV)/.installed-test
	$(PY) -m pytest -q -p no:cacheprovider

## make lint: ruff (the rule set in pyproject.toml), ruff format and mypy (with the pydantic plugin)
LINTED = cprsim tests examples docs benchmarks
lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/mypy

## make test-fast: the suite without the tests marked slow (each above ~2 s; under a minute on 2 cores)
test-fast: $(VENV)/.installed-test
	$(PY) -m pytest -q -p no:cacheprovider -m "not slow"

## make fuzz: the long bad-input campaign (5,000 hostile inputs through the CLI; counts in out/fuzz.json)
fuzz: $(VENV)/.installed-test
	@mkdir -p out
	FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-5000} FUZZ_REPORT=out/fuzz.json $(PY) -m pytest -q -s -p no:cacheprovider tests/test_fuzz.py

## make figures: regenerate every experiment's figures into experiments/*/out/
figures: $(VENV)/.installed-test
	@for d in experiments/*/; do if [ -x $$d/run.sh ]; then echo "== $$d"; $$d/run.sh || exit 1; fi; done

## make bench: the benchmarks (ratios against a baseline measured in the same run)
bench: $(VENV)/.installed-test
	@for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) out .pytest_cache
