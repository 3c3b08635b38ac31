#!/usr/bin/env bash
# A transaction left open holds back every read_committed consumer of its partition: the
# last stable offset (LSO) stays at the transaction's first record, whatever comes after
# it. When transaction.timeout.ms passes, the coordinator aborts the transaction itself
# (its epoch bumped, so the producer that left it is fenced), writes the ABORT marker, the
# LSO jumps to the log end, and the consumer gets the records that came later.
source "$(dirname "$0")/lib.sh"
echo "== an open transaction holds read_committed consumers at the LSO until it times out"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PYTHON" ] || fail "the demo needs the test venv's python with confluent-kafka ($PYTHON; bash scripts/test.sh makes it)"
TOPIC=payments
TIMEOUT_MS=4000
CONFIG="$(mktemp -t purgatory-demo-config.XXXXXX.toml)"
cp "$ROOT/config/broker.toml" "$CONFIG"
echo '"transaction.abort.timed.out.transaction.cleanup.interval.ms" = 500' >>"$CONFIG"
BROKER_CONFIG="$CONFIG" start_broker
trap 'kill $BROKER_PID 2>/dev/null || true; wait $BROKER_PID 2>/dev/null || true; rm -f "$CONFIG"' EXIT

# A transactional producer writes one record and goes away without committing.
"$PYTHON" - "$BOOTSTRAP" "$TOPIC" "$TIMEOUT_MS" <<'PY' || fail "the transactional producer failed"
import os, sys
from confluent_kafka import Producer
bootstrap, topic, timeout = sys.argv[1], sys.argv[2], sys.argv[3]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "demo-payments",
              "transaction.timeout.ms": int(timeout), "log_level": 0})
p.init_transactions(30)
p.begin_transaction()
p.produce(topic, b"payment-in-flight", partition=0)
assert p.flush(30) == 0
os._exit(0)  # gone, the transaction still open
PY
say "a transactional producer wrote 1 record to $TOPIC-0 and left without committing"
for i in 1 2 3; do echo "later-$i"; done | kcat -b "$BOOTSTRAP" -P -t "$TOPIC" -p 0 -X acks=all 2>/dev/null || fail "produce failed"
wait_for "the later records to be replicated" 'part("payments")["high_watermark"] == 4'
say "3 plain records after it: HW $(q 'part("payments")["high_watermark"]'), LSO $(q 'part("payments")["last_stable_offset"]'), open: $(q '[(t["producer_id"], t["first_offset"]) for t in part("payments")["open_transactions"]]')"
[ "$(q 'part("payments")["last_stable_offset"]')" = 0 ] || fail "the LSO should be held at the open transaction's first offset"
HELD=$(kcat -b "$BOOTSTRAP" -C -t "$TOPIC" -p 0 -o beginning -e -q -X isolation.level=read_committed 2>/dev/null | wc -l)
[ "$HELD" = 0 ] || fail "a read_committed consumer read $HELD records past the LSO"
ok "a read_committed consumer reads nothing: the open transaction holds all 4 records back"
STARTED=$(now_ms)
wait_for "the coordinator to abort the timed-out transaction" 'part("payments")["last_stable_offset"] == 5' $(( TIMEOUT_MS / 1000 + 15 ))
say "after $(( $(now_ms) - STARTED )) ms the coordinator aborted it (transaction.timeout.ms $TIMEOUT_MS): LSO $(q 'part("payments")["last_stable_offset"]'), open: $(q 'part("payments")["open_transactions"]')"
GOT=$(kcat -b "$BOOTSTRAP" -C -t "$TOPIC" -p 0 -o beginning -e -q -X isolation.level=read_committed 2>/dev/null | tr '\n' ' ')
[ "$GOT" = "later-1 later-2 later-3 " ] || fail "read_committed got '$GOT', expected the 3 later records"
ok "the LSO jumped past the ABORT marker: a read_committed consumer gets $GOT(not the aborted payment)"
