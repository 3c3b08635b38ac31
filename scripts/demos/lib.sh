# Shared helpers for the demo scripts: start a broker, read its state, produce with kcat.
# Sourced, not run. Each demo exits 0 only if what it shows actually happened.

set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PURGATORY="${PURGATORY_BIN:-$ROOT/target/release/purgatory}"
command -v kcat >/dev/null || { echo "kcat is required (apt-get install kcat)"; exit 1; }
[ -x "$PURGATORY" ] || (cd "$ROOT" && cargo build --release -q -p purgatory)

say() { printf '  %s\n' "$*"; }
ok() { printf '  \033[32mOK\033[0m %s\n' "$*"; }
fail() { printf '  \033[31mFAIL\033[0m %s\n' "$*"; echo "  broker log: $BROKER_LOG"; tail -n 30 "$BROKER_LOG" | sed 's/^/    | /'; exit 1; }

# start_broker [purgatory serve flags...]: starts a broker with embedded followers, every
# listener on a port the kernel picks, and waits for its ready file (`--ready-file`), which
# names the bound addresses once they serve. Sets BOOTSTRAP, ADMIN, BROKER_PID and
# BROKER_LOG. BROKER_CONFIG=FILE replaces config/broker.toml.
start_broker() {
    BROKER_LOG="$(mktemp -t purgatory-demo.XXXXXX.log)"
    local ready="$BROKER_LOG.ready.json"
    RUST_LOG="${RUST_LOG:-purgatory=info}" "$PURGATORY" serve --config "${BROKER_CONFIG:-$ROOT/config/broker.toml}" \
        --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --ready-file "$ready" "$@" >"$BROKER_LOG" 2>&1 &
    BROKER_PID=$!
    trap 'kill $BROKER_PID 2>/dev/null || true; wait $BROKER_PID 2>/dev/null || true' EXIT
    local deadline=$((SECONDS + 30))
    until [ -e "$ready" ]; do
        kill -0 "$BROKER_PID" 2>/dev/null || fail "broker stopped"
        [ $SECONDS -lt $deadline ] || fail "broker did not start"
        sleep 0.02
    done
    read -r BOOTSTRAP ADMIN < <(python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print(r["bootstrap"], r["admin"])' "$ready")
    rm -f "$ready"
}

ctl() { "$PURGATORY" ctl --admin "$ADMIN" "$@"; }

# q PY_EXPR: evaluates a Python expression over the state JSON (`s`); helpers:
# part(topic) -> the partition's state, pg(name) -> a purgatory's state, grp(id) -> a
# consumer group's state (None if there is no such group).
q() {
    ctl state --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
def part(t, p=0): return next(x for x in s["partitions"] if x["topic"] == t and x["partition"] == p)
def pg(n): return s["purgatories"][n]
def grp(g): return next((x for x in (s.get("groups") or {}).get("list", []) if x["group_id"] == g), None)
print(eval(sys.argv[1]))' "$1"
}

# wait_for DESCRIPTION PY_EXPR [SECONDS]: waits until the expression is True.
wait_for() {
    local deadline=$((SECONDS + ${3:-20}))
    until [ "$(q "$2")" = "True" ]; do
        [ $SECONDS -lt $deadline ] || fail "timed out waiting for: $1"
        sleep 0.05
    done
}

now_ms() { date +%s%3N; }

# produce TOPIC MESSAGE [kcat -X options...]: one message with kcat; prints kcat's
# delivery report; returns kcat's exit status.
produce() {
    local topic=$1 msg=$2; shift 2
    local args=()
    for x in "$@"; do args+=(-X "$x"); done
    echo "$msg" | kcat -b "$BOOTSTRAP" -P -t "$topic" -X linger.ms=0 "${args[@]}" -v 2>&1
}

# delivery_error KCAT_OUTPUT: the error in kcat's delivery report of the (one) message, as
# librdkafka names it, or nothing if it was delivered. An error code the broker sent reads
# "Broker: <name>" (e.g. "Broker: Request timed out" for REQUEST_TIMED_OUT); one librdkafka
# decided itself reads "Local: <name>" (e.g. "Local: Message timed out").
delivery_error() {
    printf '%s\n' "$1" | sed -n 's/^% Delivery failed for message: //p;T;q'
}
