#!/usr/bin/env bash
# The project's one test command (README: "Test it").
#
# On a fresh machine it installs what the tests need, then runs every suite:
#   1. formatting, lints and doc links (cargo fmt, cargo clippy -D warnings, cargo doc)
#   2. the Rust workspace tests (unit, property, integration with librdkafka)
#   3. real-client tests in Python (kafka-python, confluent-kafka) from a venv it creates,
#      and the live view in Debian's headless chromium (selenium + chromium-driver)
#   4. Kafka's Java client and tools (Maven, tests/java) and Go's franz-go and Sarama
#      (tests/go)
#   5. the short conformance corpus against a real Apache Kafka 4.4 cluster
#      (scripts/kafka-reference.sh, started in the background during the Rust tests)
#   6. the demo scripts, which are tests too
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

step() { printf '\n==> %s\n' "$*"; }

# ---------------------------------------------------------------- installs
need_apt=()
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
# kafkajs comes from npm; Debian's npm brings Node.js with it.
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
# Debian splits `python3 -m venv` (and the pip it bootstraps) into its own package.
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
# The live view's browser test: Debian's chromium and its chromedriver (no browser download).
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium-driver)
# Kafka's jars (the Java tests, the reference cluster) come through Maven, on Java 17+.
command -v java >/dev/null 2>&1 || need_apt+=(default-jdk-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
# franz-go and Sarama come through the Go module proxy.
command -v go >/dev/null 2>&1 || need_apt+=(golang-go)
if ((${#need_apt[@]})); then
    step "installing Debian packages: ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || true
    apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

VENV="$ROOT/.venv"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import kafka, pytest, yaml, confluent_kafka, selenium, prometheus_client' 2>/dev/null; then
    step "creating Python venv with kafka-python, confluent-kafka, pytest, selenium and prometheus-client"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check 'kafka-python>=3,<4' 'confluent-kafka>=2.6' pytest pyyaml \
        'selenium>=4.20' 'prometheus-client>=0.20'
fi

if [ ! -d tests/node/node_modules/kafkajs ]; then
    step "installing kafkajs (npm)"
    (cd tests/node && npm install --no-audit --no-fund --silent)
fi

# ---------------------------------------------------------------- checks
step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets -q -- -D warnings

# The module docs are how a newcomer reads the code: their links must lead somewhere.
step "cargo doc (broken or private links are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps -q

step "cargo test (workspace)"
cargo build --release -q --workspace --bins

# The reference Kafka starts while the Rust tests run (its JVMs take most of a minute),
# on four free consecutive ports, in a data folder of this run; it is stopped on exit.
export KAFKA_REF_DIR="$ROOT/target/kafka-reference-test"
KAFKA_REF_PORT=$(python3 "$ROOT/scripts/free_port_run.py" 4)
export KAFKA_REF_PORT
# Leaders stay where a scenario put them after a broker was stopped and continued.
export KAFKA_REF_EXTRA="auto.leader.rebalance.enable=false"
stop_reference() { bash "$ROOT/scripts/kafka-reference.sh" stop >/dev/null 2>&1 || true; }
trap stop_reference EXIT
bash scripts/kafka-reference.sh start >"$ROOT/target/kafka-reference-test.log" 2>&1 &
reference_start=$!

cargo test --workspace -q 2>&1

if [ -d tests/python ] && ls tests/python/test_*.py >/dev/null 2>&1; then
    step "real-client tests: kafka-python, confluent-kafka, kafkajs; the live view in headless chromium"
    # Selenium must use Debian's chromedriver, never try to download one.
    SE_OFFLINE=true PURGATORY_BIN="$ROOT/target/release/purgatory" "$VENV/bin/python" -m pytest -q tests/python
fi

step "Java: kafka-clients 4.4, VerifiableProducer/VerifiableConsumer, ProducerPerformance (Maven)"
PURGATORY_BIN="$ROOT/target/release/purgatory" mvn -q -B -f tests/java/pom.xml test

step "Go: franz-go and IBM Sarama (go test)"
(cd tests/go && PURGATORY_BIN="$ROOT/target/release/purgatory" go test -count=1 ./...)

step "conformance: the short corpus against Apache Kafka 4.4 (scripts/kafka-reference.sh)"
if ! wait "$reference_start"; then
    cat "$ROOT/target/kafka-reference-test.log" >&2
    echo "the reference Kafka cluster did not start" >&2
    exit 1
fi
target/release/conformance --short --kafka "127.0.0.1:$((KAFKA_REF_PORT + 1))" \
    --kafka-dir "$KAFKA_REF_DIR" --markdown "$ROOT/target/conformance-short.md"
stop_reference

if [ -d scripts/demos ]; then
    for demo in scripts/demos/[0-9]*.sh; do
        [ -e "$demo" ] || continue
        step "demo: $demo"
        bash "$demo"
    done
fi

step "all suites passed"
