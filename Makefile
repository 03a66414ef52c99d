# The README's two commands are `make run` (execute the whole notebook series headless) and
# `make test` (lint and every test). Each creates .venv and installs requirements.txt when needed.
PYTHON ?= python3
PY := .venv/bin/python
VENV := .venv/.installed-$(shell cksum < requirements.txt | cut -d' ' -f1)
export HELPERS_PROGRESS ?= 0

.PHONY: run test lint bench bench-report speedrun notebooks venv

venv: $(VENV)

$(VENV): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv .venv
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	rm -f .venv/.installed-* && touch $@

## Execute every notebook with papermill into runs/<timestamp>/ (ARGS="-p device cpu" passes parameters;
## ARGS="--lang zh" also writes the executed notebooks in Chinese, without a second execution).
run: $(VENV)
	$(PY) notebooks/series.py run $(ARGS)

## Lint and every test: helpers, data sources, checkpoints, speed tools, and one papermill run of the series
## whose outputs are checked against the committed notebooks. `make test ARGS="-m cuda"`: the GPU tests alone.
test: $(VENV) lint
	$(PY) -m pytest tests $(ARGS)

lint: $(VENV)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

## Seconds per epoch of each input pipeline on each device, side by side (runs/bench/).
## `make bench ARGS=--ddp`: one process against two data-parallel ones, and communication's share.
bench: $(VENV)
	$(PY) helpers.py bench $(ARGS)

## Replace the README's measured block with the tables of runs/bench/bench.json (after `make bench`, on any machine).
bench-report: $(VENV)
	$(PY) helpers.py bench-report --readme README.md

speedrun: $(VENV)
	$(PY) helpers.py speedrun

## Re-execute the committed notebooks in place, so their stored outputs match the code; rebuild notebooks/zh/.
notebooks: $(VENV)
	$(PY) notebooks/series.py refresh
