#!/usr/bin/env bash
# A slow follower makes every acks=all produce slower by about its fetch delay: the HW is
# the minimum LEO over the ISR, so the slowest in-sync follower sets the pace.
source "$(dirname "$0")/lib.sh"
echo "== a slow follower slows every acks=all produce by about its delay"
start_broker
DELAY=400

latency() { # average ms of N sequential acks=all produces
    local n=$1 total=0
    for i in $(seq 1 "$n"); do
        local t=$(now_ms)
        produce slow "m$i" acks=all >/dev/null || fail "produce failed"
        total=$(( total + $(now_ms) - t ))
    done
    echo $(( total / n ))
}
produce slow "warm-up" acks=all >/dev/null || fail "warm-up produce failed"
healthy=$(latency 5)
say "healthy followers: acks=all takes ${healthy} ms on average (kcat start-up included)"
ctl follower 3 delay "$DELAY" >/dev/null
slow=$(latency 5)
say "follower 3 waiting ${DELAY} ms before each fetch: acks=all takes ${slow} ms on average"
extra=$(( slow - healthy ))
[ "$extra" -ge $(( DELAY * 3 / 4 )) ] || fail "expected about ${DELAY} ms more, got ${extra} ms"
ok "each acks=all produce got ${extra} ms slower (follower delay ${DELAY} ms); ISR $(q 'part("slow")["isr"]')"
