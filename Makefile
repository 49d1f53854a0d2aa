# Two commands set up everything on a fresh machine: `make run` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test test-fast check fmt bench bench-auth bench-replication bench-brokers bench-bookie bench-ml bench-topic-open bench-activity bench-compaction bench-spark bench-kafka bench-kafka-wire pulsar-proto bench-console bench-pulsar bench-scale soak chaos chaos-fuzz client openapi clean

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/install-system-deps.sh
	bash scripts/install-system-deps.sh
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@if [ -d clients/python ]; then $(PY) -m pip install --quiet -e clients/python; fi
	touch $(STAMP)

run: setup
	$(BIN)/quire standalone

# Bytecode caches on for the tests, whatever the shell says: the suite starts hundreds of Python
# processes, and without caches each compiles Quire's modules again and pytest rewrites the
# asserts of every test module again (about 25 s of CPU per collection). __pycache__ is ignored.
test test-fast: export PYTHONDONTWRITEBYTECODE :=

# The whole suite: every kind of test (tests/kinds.py), slow ones included.
test: setup
	$(BIN)/pytest -q -ra

# The inner loop: unit and contract tests only, no process started (under 3 minutes on 2 cores);
# Hypothesis properties run a quarter of their examples here (tests/examples.py).
test-fast: export QUIRE_TEST_QUICK := 1
test-fast: setup
	$(BIN)/pytest -q -ra -m "unit or contract"

check: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

fmt: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: setup
	bash scripts/install-system-deps.sh --bench
	$(PY) -m bench.bench_api

# The batched produce and consume rows with authentication off, then on (bar: within 10%).
bench-auth: setup
	bash scripts/install-system-deps.sh --bench
	$(PY) -m bench.bench_auth

bench-replication: setup
	bash scripts/install-system-deps.sh --bench
	$(PY) -m bench.bench_replication

bench-brokers: setup
	$(PY) -m bench.bench_brokers

bench-bookie: setup
	$(PY) -m bench.bench_bookie

bench-ml: setup
	$(PY) -m bench.bench_ml

# Topics created by a first produce, then reopened after a restart (issue 26): created/s and
# reopened/s on SQLite; BENCH_TOPIC_OPEN_ARGS for more (--database postgres, --kill9, --checkout DIR).
BENCH_TOPIC_OPEN_ARGS ?=
bench-topic-open: setup
	$(PY) -m bench.topic_open $(BENCH_TOPIC_OPEN_ARGS)

# Cost follows activity: produce p50/p99 to one topic and broker RSS per topic with N idle topics,
# before and after idle unload, for each tree side by side (BENCH_ACTIVITY_TREES: NAME=PATH ...).
BENCH_ACTIVITY_TREES ?= this=.
BENCH_ACTIVITY_STEPS ?= 1000,5000,20000
bench-activity: setup
	$(PY) -m bench.activity.bench_activity $(addprefix --tree ,$(BENCH_ACTIVITY_TREES)) --steps $(BENCH_ACTIVITY_STEPS)

# Incremental compaction: a full run, runs after +1% and +10% writes, replay, driver memory at two
# key counts; BENCH_COMPACTION_MESSAGES messages per topic over BENCH_COMPACTION_KEYS keys.
BENCH_COMPACTION_MESSAGES ?= 5000000
BENCH_COMPACTION_KEYS ?= 1000000
bench-compaction: setup
	$(PY) -m bench.bench_compaction --messages $(BENCH_COMPACTION_MESSAGES) --keys $(BENCH_COMPACTION_KEYS)

# The Spark connector: batch reads into count() and Parquet, a stream, the sink with exactly once on
# and off, against the REST reader and a Kafka consumer; BENCH_SPARK_MESSAGES messages of 100 B.
BENCH_SPARK_MESSAGES ?= 500000
bench-spark: setup
	$(PY) -m bench.bench_spark --messages $(BENCH_SPARK_MESSAGES)

# confluent-kafka against the Kafka listener, the same messages over REST, NATS JetStream as the
# peer: one run, median of BENCH_KAFKA_ROUNDS rounds of BENCH_KAFKA_MESSAGES 100 B messages.
BENCH_KAFKA_ROUNDS ?= 3
BENCH_KAFKA_MESSAGES ?= 1000000
bench-kafka: setup
	bash scripts/install-system-deps.sh --bench
	$(PY) -m bench.bench_kafka --rounds $(BENCH_KAFKA_ROUNDS) --messages $(BENCH_KAFKA_MESSAGES)

# The Kafka listener's wire layer alone: codec costs per 1 MB request, and a pipelined connection.
bench-kafka-wire: setup
	$(PY) -m bench.bench_kafka_wire

# pulsar-client against Quire's Pulsar listener and pulsar-lite in one run, Kafka as a second row.
BENCH_PULSAR_MESSAGES ?= 1000000
BENCH_PULSAR_ROUNDS ?= 3
bench-pulsar: setup
	$(PY) -m bench.bench_pulsar --rounds $(BENCH_PULSAR_ROUNDS) --messages $(BENCH_PULSAR_MESSAGES)

# Every console page's server time with 1,000 topics in a namespace (bar: under 300 ms each).
bench-console: setup
	$(PY) -m bench.bench_console

# Many topics (issue 26): steps to 100,000 topics on one broker (SQLite) and over 3 (PostgreSQL at
# 127.0.0.1:5432, a fresh schema per run), restart and reopen, kill -9 of one of 3 brokers with 30,000
# topics. BENCH_SCALE_ARGS shrinks it, e.g. "--steps 1000,5000 --max-topics 10000 --failover-topics 6000".
BENCH_SCALE_ARGS ?=
bench-scale: setup
	$(PY) -m bench.scale $(BENCH_SCALE_ARGS)

# A steady load on a local cluster (PostgreSQL at 127.0.0.1:5432): RSS and p99 per minute.
SOAK_S ?= 600
soak: setup
	$(PY) -m bench.soak --seconds $(SOAK_S)

# Schemathesis against a live broker with thousands of cases (CI runs a few hundred).
FUZZ_EXAMPLES ?= 50
chaos-fuzz: setup
	QUIRE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest -q -s tests/api/test_live_fuzz.py -k thorough

# A chaos campaign over a local cluster: CHAOS_S seconds of load under faults, then the checker
# and its table (CHAOS_SEED=... repeats a schedule). Exit status 1 on any violation.
CHAOS_S ?= 180
chaos: setup
	$(PY) -m bench.chaos --seconds $(CHAOS_S)

# The Pulsar listener's codec: pulsar_api.proto compiled by the protoc inside grpcio-tools (pinned in
# pyproject's dev extras), with mypy-protobuf's stub; both generated files are committed.
PULSAR_PROTO := app/pulsar_listener/proto
pulsar-proto: setup
	$(PY) -m grpc_tools.protoc --proto_path=$(PULSAR_PROTO) --python_out=$(PULSAR_PROTO) --plugin=protoc-gen-mypy=$(BIN)/protoc-gen-mypy --mypy_out=$(PULSAR_PROTO) $(PULSAR_PROTO)/pulsar_api.proto

openapi: setup
	$(PY) -m app.openapi_export openapi.json

client: openapi
	rm -rf clients/python
	$(BIN)/openapi-python-client generate --path openapi.json --output-path clients/python --meta setup --config clients/openapi-client-config.yaml --custom-template-path clients/templates
	$(PY) -m pip install --quiet -e clients/python

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache
