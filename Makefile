# Basalt's developer entry points. `make test` is the whole suite, exactly as CI runs it;
# it needs only rustup, python3, node, npm and go (everything else installs itself).
#
#   make test                  every step below, then a pass/fail summary with timings
#   make lint                  cargo fmt --check, clippy -D warnings, ruff on the Python code
#   make fmt                   format the Rust and Python code in place
#   make cargo-test            unit tests and the Rust-driver end-to-end tests
#   make pytest                pymongo end-to-end tests (tests/e2e); PYTEST_ARGS=-k... to narrow
#   make browser               headless Chromium for the status page's test (as root, from apt)
#   make mongo-tools           MongoDB's Database Tools from MONGO_TOOLS_SRC, for their test
#   make node-test             Node.js driver and mongosh tests (tests/node)
#   make go-test               gofmt, vet and the tests of the linearizability checker (tools/)
#   make conformance           MongoDB driver-spec conformance run, checked against the baseline
#   make conformance-baseline  the same, then write the new passed count to the baseline file
#   make documentdb-ft         DocumentDB's ~53,000-test functional suite, checked against the baseline
#   make documentdb-ft-baseline  the same, then write the new passed count to the baseline file
#   make documentdb-ft-replicaset  the same suite against a one-member replica set
#   make spark-test            the MongoDB Spark connector (PySpark) reading, filtering and writing W1
#   make fuzz                  fuzz the wire decoder and the SCRAM parsers, FUZZ_SECONDS each (nightly + cargo-fuzz)
#   make soak                  normal and hostile traffic for SOAK_SECONDS against a release build
#   make cluster               a local three-member replica set (CLUSTER_MEMBERS, CLUSTER_DIR)
#   make failover              kill -9, SIGSTOP and partition trials against a three-member set,
#                              histories checked for linearizability (FAILOVER_TRIALS)
#   make bank                  the bank test of transactions, with and without a killed primary
#   make change-stream-bench   change events' latency at 10 k writes/s, an open stream's cost
#   make replica-bench         W1 load, W4 and a new member's initial sync on a three-member set

SHELL := bash
.SHELLFLAGS := -euo pipefail -c

CARGO_TARGET_DIR ?= $(HOME)/.cache/basalt-target
export CARGO_TARGET_DIR
BASALT_BIN ?= $(CARGO_TARGET_DIR)/debug/basalt
export BASALT_BIN

VENV := .venv
PYTHON := $(VENV)/bin/python
NODE_DIR := tests/node
FUZZ_SECONDS ?= 60
PYTEST_ARGS ?=

.PHONY: test lint fmt fmt-check clippy py-lint cargo-test go-test build venv node-deps pytest node-test browser mongo-tools \
	conformance conformance-baseline fuzz

test:
	@scripts/test-all.sh

lint: fmt-check clippy py-lint

fmt: venv
	cargo fmt --all
	$(VENV)/bin/ruff format --config tests/ruff.toml tests scripts
	$(VENV)/bin/ruff check --config tests/ruff.toml --fix tests scripts

fmt-check:
	cargo fmt --all -- --check

clippy:
	cargo clippy --workspace --all-targets -- -D warnings

py-lint: venv
	$(VENV)/bin/ruff check --config tests/ruff.toml tests scripts
	$(VENV)/bin/ruff format --config tests/ruff.toml --check tests scripts

cargo-test:
	cargo test --workspace

# The linearizability checker of `make failover` (Go, Porcupine pinned in its go.sum).
go-test:
	cd tools/linearizability && test -z "$$(gofmt -l .)" && go vet ./... && go test ./...

# The server binary the Python, Node and conformance runs start. `cargo test --workspace`
# leaves a fresh one at the same path (built with the tests' feature set, so building
# it again here would recompile much of the tree): after a passing cargo test,
# scripts/test-all.sh sets SKIP_BUILD=1.
build:
ifdef SKIP_BUILD
	test -x $(BASALT_BIN)
else
	cargo build -p basalt --bin basalt
endif

venv: $(VENV)/.installed

$(VENV)/.installed: tests/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
	touch $@

# --ignore-scripts: the native add-ons some mongosh dependencies would compile are
# optional, and building them would fetch Node headers from outside the registry.
node-deps: $(NODE_DIR)/node_modules/.installed

$(NODE_DIR)/node_modules/.installed: $(NODE_DIR)/package-lock.json $(NODE_DIR)/package.json
	cd $(NODE_DIR) && npm ci --ignore-scripts --no-audit --no-fund
	touch $@

pytest: build venv
	$(PYTHON) -m pytest tests/e2e $(PYTEST_ARGS)

# Headless Chromium for the status page's browser test (tests/e2e/test_status_page.py),
# from the OS packages; where it cannot be installed (not root, no apt) the test is
# skipped with a message.
browser:
	@if command -v chromium >/dev/null; then echo "chromium: $$(command -v chromium)"; \
	elif [[ $$(id -u) == 0 ]] && command -v apt-get >/dev/null; then \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium; \
	else echo "chromium not installed and cannot be (needs root and apt): the browser test will be skipped"; fi

# MongoDB's Database Tools built from their Go sources (MONGO_TOOLS_SRC: a checkout of
# github.com/mongodb/mongo-tools) into .tools/bin, where tests/e2e/test_operations.py
# finds them (or set MONGO_TOOLS_DIR).
MONGO_TOOLS := mongodump mongorestore mongoexport mongoimport mongostat mongotop bsondump
mongo-tools:
	@test -n "$(MONGO_TOOLS_SRC)" || { echo "set MONGO_TOOLS_SRC to a mongo-tools checkout"; exit 1; }
	for tool in $(MONGO_TOOLS); do \
	  (cd "$(MONGO_TOOLS_SRC)" && go build -mod=vendor -o "$(CURDIR)/.tools/bin/$$tool" ./$$tool/main); \
	done

node-test: build node-deps
	cd $(NODE_DIR) && npm test

conformance: build venv
	$(PYTHON) scripts/conformance.py

conformance-baseline: build venv
	$(PYTHON) scripts/conformance.py --update-baseline

# DocumentDB's functional suite (../shared/documentdb-functional-tests) in a venv of its
# own, against a fresh server, checked against its baseline (scripts/functional_tests.py).
FT_VENV := .venv-ft
.PHONY: ft-venv documentdb-ft documentdb-ft-baseline documentdb-ft-replicaset documentdb-ft-replicaset-baseline
ft-venv: $(FT_VENV)/.installed

$(FT_VENV)/.installed: tests/functional/requirements.txt
	python3 -m venv $(FT_VENV)
	$(FT_VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/functional/requirements.txt
	touch $@

documentdb-ft: build venv ft-venv
	$(PYTHON) scripts/functional_tests.py --python $(FT_VENV)/bin/python

documentdb-ft-baseline: build venv ft-venv
	$(PYTHON) scripts/functional_tests.py --python $(FT_VENV)/bin/python --update-baseline

# The same suite against a one-member replica set: the tests of transactions, change
# streams, cluster-wide settings and the oplog run there too.
documentdb-ft-replicaset: build venv ft-venv
	$(PYTHON) scripts/functional_tests.py --replica-set --python $(FT_VENV)/bin/python

documentdb-ft-replicaset-baseline: build venv ft-venv
	$(PYTHON) scripts/functional_tests.py --replica-set --python $(FT_VENV)/bin/python --update-baseline

fuzz:
	scripts/fuzz.sh $(FUZZ_SECONDS)

# `make spark-test`: the MongoDB Spark connector with PySpark against Basalt, on W1-shaped
# documents (SPARK_TEST_DOCS, 1 M by default; tests/spark). PySpark (~320 MB) in a venv
# of its own, the connector's jars from Maven Central (tests/spark/pom.xml); needs Java 17
# and mvn.
SPARK_VENV := .venv-spark
SPARK_JARS := tests/spark/target/jars

$(SPARK_VENV)/.installed: tests/spark/requirements.txt
	python3 -m venv $(SPARK_VENV)
	$(SPARK_VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/spark/requirements.txt
	touch $@

$(SPARK_JARS)/.installed: tests/spark/pom.xml
	cd tests/spark && mvn --batch-mode --quiet dependency:copy-dependencies \
		-DoutputDirectory=target/jars -DincludeScope=runtime
	touch $@

.PHONY: spark-test
spark-test: build $(SPARK_VENV)/.installed $(SPARK_JARS)/.installed
	$(SPARK_VENV)/bin/python -m pytest -p no:cacheprovider tests/spark

# `make soak`: scripts/soak.py against a release build (10 minutes by default).
SOAK_SECONDS ?= 600
.PHONY: soak
soak: venv
	cargo build --release -p basalt --bin basalt
	$(PYTHON) scripts/soak.py --binary $(CARGO_TARGET_DIR)/release/basalt --duration $(SOAK_SECONDS)

# `make cluster`: a local replica set on 127.0.0.1 until Ctrl-C (scripts/cluster.py).
CLUSTER_MEMBERS ?= 3
CLUSTER_DIR ?= cluster
.PHONY: cluster failover bank change-stream-bench replica-bench
cluster: build venv
	$(PYTHON) scripts/cluster.py --members $(CLUSTER_MEMBERS) --dir $(CLUSTER_DIR)

# `make failover`: the bounded fault trials of scripts/failover.py against a release build.
FAILOVER_TRIALS ?= 20
failover: venv
	cargo build --release -p basalt --bin basalt
	$(PYTHON) scripts/failover.py --binary $(CARGO_TARGET_DIR)/release/basalt --trials $(FAILOVER_TRIALS)

# `make bank`: the bank test of transactions (scripts/bank.py) on a three-member set, as it
# is and with the primary killed half-way (docs/bank-results.json, bank-failover-results.json).
bank: venv
	cargo build --release -p basalt --bin basalt
	$(PYTHON) scripts/bank.py --binary $(CARGO_TARGET_DIR)/release/basalt \
		--out docs/bank-results.json
	$(PYTHON) scripts/bank.py --binary $(CARGO_TARGET_DIR)/release/basalt --kill-primary \
		--out docs/bank-failover-results.json

# `make change-stream-bench`: event latency at 10 k writes/s and an open stream's cost on
# W4 puts, on a three-member set (scripts/change_stream_bench.py, docs/change-stream-bench.json).
change-stream-bench: venv
	cargo build --release -p basalt --bin basalt
	$(PYTHON) scripts/change_stream_bench.py --binary $(CARGO_TARGET_DIR)/release/basalt \
		--out docs/change-stream-bench.json

# `make replica-bench`: W1's load and W4 through a three-member set with w: "majority",
# then the initial sync of a fourth member (docs/replica-set-bench.json).
replica-bench: venv
	cargo build --release -p basalt --bin basalt
	$(PYTHON) scripts/replica_bench.py --binary $(CARGO_TARGET_DIR)/release/basalt \
		--out docs/replica-set-bench.json

# `make bench`: the W1-W5 benchmarks beside DuckDB and SQLite (docs/benchmarks.md), with a
# release build and the peers' pinned packages in bench/.venv. BENCH_SIZE=N to resize,
# BENCH_ARGS for more flags (e.g. --workloads w1,w3).
BENCH_SIZE ?= 1000000
BENCH_ARGS ?=
BENCH_VENV := bench/.venv

$(BENCH_VENV)/.installed: bench/requirements.txt
	python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --quiet --disable-pip-version-check -r bench/requirements.txt
	touch $@

.PHONY: bench
bench: $(BENCH_VENV)/.installed
	cargo build --release -p basalt --bin basalt
	$(CARGO_TARGET_DIR)/release/basalt bench --size $(BENCH_SIZE) --python $(BENCH_VENV)/bin/python $(BENCH_ARGS)
