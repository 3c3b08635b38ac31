#!/usr/bin/env bash
# A follower crashes (loses its connection and its copy of the log) and restarts: it
# replicates again from offset 0, catches up to the leader and rejoins the ISR.
source "$(dirname "$0")/lib.sh"
echo "== a follower crashes and restarts"
LAG=3000
start_broker --replica-lag-time-max-ms "$LAG"
for i in $(seq 1 20); do echo "before crash $i"; done | kcat -b "$BOOTSTRAP" -P -t crash -X acks=all 2>/dev/null || fail "produce failed"
wait_for "follower 3 to be caught up" 'next(f for f in part("crash")["followers"] if f["id"] == 3)["log_end_offset"] == 20'
ctl follower 3 crash >/dev/null
say "follower 3 crashed (LEO on the leader's books: $(q 'next(f for f in part("crash")["followers"] if f["id"] == 3)["log_end_offset"]'))"
for i in $(seq 1 10); do echo "while down $i"; done | kcat -b "$BOOTSTRAP" -P -t crash -X acks=all 2>/dev/null || fail "produce failed"
wait_for "the ISR to drop follower 3" 'part("crash")["isr"] == [1, 2]' 15
say "ISR without it: $(q 'part("crash")["isr"]'), LEO $(q 'part("crash")["log_end_offset"]')"
ctl follower 3 restart >/dev/null
wait_for "follower 3 to rejoin the ISR" 'part("crash")["isr"] == [1, 2, 3]'
wait_for "follower 3 to catch up" 'next(f for f in part("crash")["followers"] if f["id"] == 3)["log_end_offset"] == part("crash")["log_end_offset"]'
ok "follower 3 restarted from offset 0, caught up to LEO $(q 'part("crash")["log_end_offset"]') and rejoined: ISR $(q 'part("crash")["isr"]')"
