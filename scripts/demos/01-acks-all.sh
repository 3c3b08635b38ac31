#!/usr/bin/env bash
# acks=all waits for both followers; acks=1 does not.
#
# Both followers are paused, so the high watermark cannot move: an acks=all produce is
# appended and parked as a DelayedProduce. An acks=1 produce sent meanwhile is answered at
# once. When the followers resume and fetch past it, the HW moves and the acks=all produce
# completes.
source "$(dirname "$0")/lib.sh"
echo "== acks=all completes once both followers fetch; acks=1 does not wait"
start_broker

produce demo "warm-up" acks=all >/dev/null || fail "warm-up produce failed"
ctl follower 2 pause >/dev/null
ctl follower 3 pause >/dev/null
say "followers 2 and 3 paused; HW is $(q 'part("demo")["high_watermark"]')"

start=$(now_ms)
produce demo "needs both followers" acks=all request.timeout.ms=30000 >"$BROKER_LOG.all" &
ALL_PID=$!
wait_for "the acks=all produce to be parked" 'pg("produce")["delayed"] == 1'
say "acks=all produce parked: $(q 'pg("produce")["pending"][0]["description"]')"

t1=$(now_ms)
produce demo "leader only" acks=1 >/dev/null || fail "acks=1 produce failed"
acks1_ms=$(( $(now_ms) - t1 ))
[ "$(q 'pg("produce")["delayed"]')" = "1" ] || fail "the acks=all produce should still be parked"
ok "acks=1 answered in ${acks1_ms} ms while acks=all still waits (LEO $(q 'part("demo")["log_end_offset"]'), HW $(q 'part("demo")["high_watermark"]'))"

sleep 0.3
ctl follower 2 resume >/dev/null
ctl follower 3 resume >/dev/null
wait "$ALL_PID" || fail "acks=all produce failed: $(cat "$BROKER_LOG.all")"
all_ms=$(( $(now_ms) - start ))
wait_for "the HW to reach the log end" 'part("demo")["high_watermark"] == part("demo")["log_end_offset"]'
ok "acks=all answered after ${all_ms} ms, once both followers fetched past it (HW $(q 'part("demo")["high_watermark"]'), ISR $(q 'part("demo")["isr"]'))"
