#!/usr/bin/env bash
# Both followers paused with min.insync.replicas = 2: first REQUEST_TIMED_OUT (the produce
# is appended but the HW never reaches it), then, once the ISR has shrunk to the leader
# alone, NOT_ENOUGH_REPLICAS (refused up front, nothing appended).
source "$(dirname "$0")/lib.sh"
echo "== both followers paused, min.insync.replicas = 2"
LAG=3000
start_broker --replica-lag-time-max-ms "$LAG" --min-insync-replicas 2
produce both "warm-up" acks=all >/dev/null || fail "warm-up produce failed"
ctl follower 2 pause >/dev/null
ctl follower 3 pause >/dev/null
say "followers 2 and 3 paused; ISR $(q 'part("both")["isr"]')"

# request.timeout.ms goes to the broker as the Produce's timeout_ms: the broker answers
# REQUEST_TIMED_OUT when it expires. librdkafka gives up on its own only after
# message.timeout.ms ("Local: Message timed out"), set 20 times longer so that the broker's
# answer comes first; the check below accepts only the broker's error code.
REQUEST_TIMEOUT=1000
out=$(produce both "times out" acks=all request.timeout.ms=$REQUEST_TIMEOUT retries=0 \
    message.timeout.ms=$((REQUEST_TIMEOUT * 20)) || true)
err=$(delivery_error "$out")
[ "$err" = "Broker: Request timed out" ] || fail "expected the broker's REQUEST_TIMED_OUT, kcat said: $out"
ok "first produce: the broker answered REQUEST_TIMED_OUT after request.timeout.ms = ${REQUEST_TIMEOUT} (kcat: $err)"

wait_for "the ISR to shrink to the leader" 'part("both")["isr"] == [1]' 15
say "ISR shrank to $(q 'part("both")["isr"]') (replica.lag.time.max.ms = ${LAG}, no fetches)"
leo_before=$(q 'part("both")["log_end_offset"]')
out=$(produce both "refused" acks=all retries=0 message.timeout.ms=20000 || true)
err=$(delivery_error "$out")
# Not "... after append" (NOT_ENOUGH_REPLICAS_AFTER_APPEND), which would mean it was appended.
[ "$err" = "Broker: Not enough in-sync replicas" ] || fail "expected NOT_ENOUGH_REPLICAS, kcat said: $out"
[ "$(q 'part("both")["log_end_offset"]')" = "$leo_before" ] || fail "a refused produce must not be appended"
ok "second produce: the broker answered NOT_ENOUGH_REPLICAS, LEO unchanged at $leo_before (kcat: $err)"
