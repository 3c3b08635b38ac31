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

out=$(produce both "times out" acks=all request.timeout.ms=1000 retries=0 message.timeout.ms=20000 || true)
echo "$out" | grep -qi "timed out" || fail "expected REQUEST_TIMED_OUT, kcat said: $out"
ok "first produce: $(echo "$out" | grep -i 'timed out' | head -1 | sed 's/^% //')"

wait_for "the ISR to shrink to the leader" 'part("both")["isr"] == [1]' 15
say "ISR shrank to $(q 'part("both")["isr"]') (replica.lag.time.max.ms = ${LAG}, no fetches)"
leo_before=$(q 'part("both")["log_end_offset"]')
out=$(produce both "refused" acks=all retries=0 message.timeout.ms=20000 || true)
echo "$out" | grep -qi "not enough in-sync replicas" || fail "expected NOT_ENOUGH_REPLICAS, kcat said: $out"
[ "$(q 'part("both")["log_end_offset"]')" = "$leo_before" ] || fail "a refused produce must not be appended"
ok "second produce: $(echo "$out" | grep -i 'not enough' | head -1 | sed 's/^% //') (LEO unchanged at $leo_before)"
