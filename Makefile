# Everything a fresh Debian machine with Python 3.11 and Java 17 needs, from one place.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
EXTRAS := all,test,dev

.PHONY: install system-deps test lint demo bench chart-lint e2e image clean

install: $(INSTALLED)

# Re-run when the dependency pins change; constraints.txt pins the transitive ones.
$(INSTALLED): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[$(EXTRAS)]'
	touch $@

# ZooKeeper for the zookeeper tests: Debian's jars, started by the test fixtures.
system-deps:
	@if [ ! -f /usr/share/java/zookeeper.jar ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper libslf4j-java; \
	fi

test: install system-deps
	$(PY) -m pytest

lint: install
	$(VENV)/bin/ruff check operator tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

demo: install
	$(PY) -m kubecoord.demo

bench: install system-deps
	@for script in bench/bench_*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache
