# Shared helpers for the demo scripts: start a broker, read its state, produce with kcat.
# Sourced, not run. Each demo exits 0 only if what it shows actually happened.

set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PURGATORY="${PURGATORY_BIN:-$ROOT/target/release/purgatory}"
command -v kcat >/dev/null || { echo "kcat is required (apt-get install kcat)"; exit 1; }
[ -x "$PURGATORY" ] || (cd "$ROOT" && cargo build --release -q -p purgatory)

# free_ports N: N distinct free ports. The sockets are held until all are bound: ports
# asked for one after the other can come back equal once the first socket is closed.
free_ports() { python3 -c 'import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"; }

say() { printf '  %s\n' "$*"; }
ok() { printf '  \033[32mOK\033[0m %s\n' "$*"; }
fail() { printf '  \033[31mFAIL\033[0m %s\n' "$*"; echo "  broker log: $BROKER_LOG"; tail -n 30 "$BROKER_LOG" | sed 's/^/    | /'; exit 1; }

# start_broker [purgatory serve flags...]: starts a broker with embedded followers on free
# ports and waits for its admin API. BROKER_CONFIG=FILE replaces config/broker.toml.
# A port found free can be taken before the broker binds it (the kernel hands the same
# range to outgoing connections): a broker that stops on that starts again on other ports.
start_broker() {
    local attempt
    for attempt in 1 2 3 4 5; do
        read -r PORT ADMIN_PORT < <(free_ports 2)
        BOOTSTRAP="127.0.0.1:$PORT"; ADMIN="127.0.0.1:$ADMIN_PORT"
        BROKER_LOG="$(mktemp -t purgatory-demo.XXXXXX.log)"
        RUST_LOG="${RUST_LOG:-purgatory=info}" "$PURGATORY" serve --config "${BROKER_CONFIG:-$ROOT/config/broker.toml}" \
            --listen "$BOOTSTRAP" --admin-listen "$ADMIN" "$@" >"$BROKER_LOG" 2>&1 &
        BROKER_PID=$!
        trap 'kill $BROKER_PID 2>/dev/null || true; wait $BROKER_PID 2>/dev/null || true' EXIT
        for _ in $(seq 1 200); do
            "$PURGATORY" ctl --admin "$ADMIN" state --json >/dev/null 2>&1 && return 0
            if ! kill -0 "$BROKER_PID" 2>/dev/null; then
                grep -q "Address already in use" "$BROKER_LOG" && continue 2
                fail "broker stopped"
            fi
            sleep 0.05
        done
        fail "broker did not start"
    done
    fail "broker did not start: its ports were taken $attempt times"
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
