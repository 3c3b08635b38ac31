#!/usr/bin/env bash
# A paused follower holds every acks=all produce until the leader removes it from the ISR
# (after replica.lag.time.max.ms, short here); then the HW moves with the remaining ISR
# and the produce completes. Resumed, the follower catches up and rejoins the ISR.
source "$(dirname "$0")/lib.sh"
echo "== a paused follower: produces wait until the ISR shrinks, then complete"
LAG=3000
start_broker --replica-lag-time-max-ms "$LAG"
produce paused "warm-up" acks=all >/dev/null || fail "warm-up produce failed"
ctl follower 3 pause >/dev/null
say "follower 3 paused; ISR $(q 'part("paused")["isr"]'), replica.lag.time.max.ms = ${LAG}"

start=$(now_ms)
produce paused "waits for the ISR to shrink" acks=all request.timeout.ms=30000 >/dev/null || fail "produce failed"
waited=$(( $(now_ms) - start ))
isr=$(q 'part("paused")["isr"]')
[ "$isr" = "[1, 2]" ] || fail "expected ISR [1, 2], got $isr"
[ "$waited" -ge $(( LAG / 2 )) ] || fail "the produce should have waited for the ISR shrink (waited ${waited} ms)"
ok "acks=all waited ${waited} ms, completed after follower 3 left the ISR (ISR $isr, HW $(q 'part("paused")["high_watermark"]'))"

ctl follower 3 resume >/dev/null
wait_for "follower 3 to rejoin the ISR" 'part("paused")["isr"] == [1, 2, 3]'
ok "follower 3 resumed, caught up to LEO $(q 'part("paused")["log_end_offset"]') and rejoined: ISR $(q 'part("paused")["isr"]')"
