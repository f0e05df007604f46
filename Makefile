# Two commands do all the set-up on a fresh machine: `make run` and `make test`.
# Both create (once) and reuse the virtual environment in .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of torch is pinned here, not in pyproject.toml (which keeps a range), and is
# installed first so that pip does not resolve a multi-GB CUDA build for the other packages.
TORCH_PIN ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: install run demo test test-fast test-main-job bench bench-save bench-compare lint docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_PIN)"
	$(BIN)/python -m pip install --quiet -e ".[dev,ray,docs]"
	touch $(STAMP)

install: $(STAMP)

# The main job: a quick grid on HalfCheetahVel (4.5 minutes on 2 cores), then its table:
# MAML-TRPO as published (reduced budget) beside the floors it must beat, multitask and NOP.
# Three seeds: the table's Student's t interval spans 12.7 standard errors each side over 2 seeds
# (too wide to tell MAML-TRPO's gain from 0), 4.3 over 3. Run it again to finish an interrupted
# grid; runs land in runs/grid.
run: $(STAMP)
	$(BIN)/metabench bench --benchmarks HalfCheetahVel --algorithms maml-trpo multitask nop \
		--seeds 0 1 2 --profile quick --results runs/grid

demo: $(STAMP)
	$(BIN)/metabench demo

# The docstring examples of the package run as doctests after tests/; the 10 slowest tests are
# listed, to keep the suite within its 15 minutes.
test: $(STAMP)
	$(BIN)/python -m pytest -m "not benchmark and not mainjob" -q --durations=10
	$(BIN)/python -m pytest -q --doctest-modules metabench

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not benchmark and not mainjob" -q
	$(BIN)/python -m pytest -q --doctest-modules metabench

# make run's grid (about 5 minutes), checked: MAML-TRPO adapts and beats multitask and NOP.
test-main-job: $(STAMP)
	$(BIN)/python -m pytest -m mainjob -q

bench: $(STAMP)
	$(BIN)/python -m pytest tests/benchmarks -m benchmark --benchmark-enable -q -s $(BENCH_ARGS)

# Save the speed ratios as a baseline, or fail on a ratio more than 15 % worse than it.
bench-save: $(STAMP)
	$(MAKE) bench BENCH_ARGS="--save-ratios benchmarks/ratios.json"

bench-compare: $(STAMP)
	$(MAKE) bench BENCH_ARGS="--compare-ratios benchmarks/ratios.json"

lint: $(STAMP)
	$(BIN)/ruff check metabench tests scripts docs/griffe_sphinx.py
	$(BIN)/ruff format --check metabench tests scripts docs/griffe_sphinx.py
	$(BIN)/mypy
	$(BIN)/lint-imports

# The docs site (mkdocs.yml: the pages in docs/, the API reference from the docstrings) into
# site/; --strict makes every warning an error (a broken link or anchor, a docstring's :param:
# that the signature lacks).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
