#!/usr/bin/env bash
# Consumer groups on the timing wheel, with two kcat balanced consumers (kcat -G):
#  1. consumer B is killed with SIGKILL. Its connection closes, but the coordinator does not
#     care: B keeps its partitions until its DelayedHeartbeat expires, exactly
#     session.timeout.ms after its last heartbeat. Then it is removed, the group rebalances,
#     and A owns all four partitions.
#  2. both followers are paused: A's offset commit is appended to __consumer_offsets and
#     parked in the produce purgatory, invisible to OffsetFetch, until they resume.
source "$(dirname "$0")/lib.sh"
echo "== consumer group: a killed consumer loses its partitions only after its session timeout"
SESSION=6000
TOPIC=clicks
GROUP=demo-group
# The data topic has 4 partitions and 1 replica, so reading it never waits for the
# followers; __consumer_offsets keeps its 3 replicas: commits do wait for them.
CONFIG="$(mktemp -t purgatory-demo-config.XXXXXX.toml)"
sed -e 's/^"num.partitions" = .*/"num.partitions" = 4/' \
    -e 's/^"default.replication.factor" = .*/"default.replication.factor" = 1/' \
    "$ROOT/config/broker.toml" >"$CONFIG"
BROKER_CONFIG="$CONFIG" start_broker
OUT="$(mktemp -d -t purgatory-demo-consumers.XXXXXX)"
PIDS=()
trap 'kill "${PIDS[@]}" $BROKER_PID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$CONFIG" "$OUT"' EXIT

for p in 0 1 2 3; do
    printf 'p%s-%s\n' "$p" 0 "$p" 1 | kcat -b "$BOOTSTRAP" -P -t "$TOPIC" -p "$p" -X acks=all 2>/dev/null \
        || fail "could not produce to $TOPIC-$p"
done

consume() { # consume CLIENT_ID: a kcat balanced consumer in $GROUP, in the background
    kcat -b "$BOOTSTRAP" -G "$GROUP" "$TOPIC" -q -u -f '%p %o %s\n' -X client.id="$1" \
        -X session.timeout.ms=$SESSION -X heartbeat.interval.ms=500 \
        -X auto.offset.reset=earliest -X auto.commit.interval.ms=200 >"$OUT/$1.out" 2>"$OUT/$1.err" &
    PIDS+=($!)
}
owned() { # owned CLIENT_ID: partitions that member is assigned, per the coordinator
    echo "next((m[\"assigned_partitions\"] for m in (grp(\"$GROUP\") or {}).get(\"members\", []) if m[\"client_id\"] == \"$1\"), None)"
}

consume consumer-a
wait_for "consumer-a to own the 4 partitions" "$(owned consumer-a) == 4 and grp('$GROUP')['state'] == 'Stable'" 30
consume consumer-b
B_PID=${PIDS[-1]}
wait_for "the group to split the 4 partitions" \
    "$(owned consumer-a) == 2 and $(owned consumer-b) == 2 and grp('$GROUP')['state'] == 'Stable'" 30
ok "generation $(q "grp('$GROUP')['generation_id']"): consumer-a owns $(q "$(owned consumer-a)") partitions, consumer-b $(q "$(owned consumer-b)") (session.timeout.ms $SESSION)"

{ kill -9 "$B_PID" && wait "$B_PID"; } 2>/dev/null || true
say "consumer-b killed with SIGKILL (its TCP connection is closed; no LeaveGroup was sent)"
ctl groups | sed -n '/^group '"$GROUP"'/,/^$/p' | sed 's/^/    | /'

# Watch the broker's own clock: while it is before consumer-b's session deadline,
# consumer-b must still be a member; once it is gone, the time must be at or past it.
python3 - "$ADMIN" "$GROUP" "$SESSION" <<'PY' || fail "consumer-b's removal did not follow its session timeout"
import json, sys, time, urllib.request
admin, group, session = sys.argv[1], sys.argv[2], int(sys.argv[3])
def state():
    with urllib.request.urlopen(f"http://{admin}/api/state", timeout=5) as r:
        s = json.load(r)
    g = next(x for x in s["groups"]["list"] if x["group_id"] == group)
    b = next((m for m in g["members"] if m["client_id"] == "consumer-b"), None)
    return s["now_ms"], g, b
now, g, b = state()
killed_at, deadline = now, b["session_deadline_ms"]
print(f"  consumer-b killed at broker time {killed_at} ms; its DelayedHeartbeat expires at {deadline} ms "
      f"(last heartbeat + session.timeout.ms {session}), {deadline - killed_at} ms from now")
seen_before = 0
end = time.time() + session / 1000 + 15
while time.time() < end:
    now, g, b = state()
    if b is None:
        break
    # The timer never fires early; on a busy machine it may fire a little late.
    assert now <= b["session_deadline_ms"] + 1000, f"still a member at {now} ms, past its deadline"
    seen_before += 1
    time.sleep(0.02)
else:
    sys.exit("consumer-b was never removed")
assert now >= deadline, f"removed at {now} ms, before its deadline {deadline} ms"
print(f"  consumer-b was still a member at {seen_before} looks before its deadline; removed by {now} ms "
      f"({now - killed_at} ms after the kill, {now - deadline} ms after the deadline); group {g['state']}")
PY
ok "consumer-b kept its 2 partitions until its session expired"
grep -q 'expiry: DelayedHeartbeat expired' "$BROKER_LOG" || fail "the broker log does not tell the expiry"
wait_for "consumer-a to own all 4 partitions again" "$(owned consumer-a) == 4 and grp('$GROUP')['state'] == 'Stable'" 30
ok "rebalanced: generation $(q "grp('$GROUP')['generation_id']"), consumer-a owns $(q "$(owned consumer-a)") partitions"
say "the broker log tells the story:"
sed -E 's/\x1b\[[0-9;]*m//g' "$BROKER_LOG" | grep -E 'purgatory::group: (expiry|rebalance:|stable:)' | tail -n 5 \
    | sed -E 's/^[^ ]+T([0-9:.]+)Z +[A-Z]+ purgatory::group: /\1 /' | cut -c1-140 | sed 's/^/    | /'

echo "== both followers paused: consumer-a's offset commit waits in the produce purgatory"
committed() { echo "sorted((o['partition'], o['offset']) for o in grp('$GROUP')['offsets'])"; }
wait_for "consumer-a's commits to catch up" "$(committed) == [(p, 2) for p in range(4)]" 20
say "committed offsets: $(q "$(committed)")"
ctl follower 2 pause >/dev/null
ctl follower 3 pause >/dev/null
for p in 0 1 2 3; do
    printf 'p%s-2\n' "$p" | kcat -b "$BOOTSTRAP" -P -t "$TOPIC" -p "$p" -X acks=all 2>/dev/null || fail "produce"
done
OFFSETS_TP=$(q "grp('$GROUP')['offsets_partition']")
wait_for "the commit to park in the produce purgatory" \
    "any('$OFFSETS_TP' in op['keys'] for op in pg('produce')['pending']) and grp('$GROUP')['pending_offset_commits'] > 0" 10
PARKED_AT=$(now_ms)
say "$(q "next(op['description'] for op in pg('produce')['pending'] if '$OFFSETS_TP' in op['keys'])" | cut -c1-160)"
[ "$(q "$(committed)")" = "[(0, 2), (1, 2), (2, 2), (3, 2)]" ] || fail "a commit became visible before it was replicated"
ok "the commit is appended to $OFFSETS_TP but not replicated: OffsetFetch still says $(q "$(committed)")"
ctl follower 2 resume >/dev/null
ctl follower 3 resume >/dev/null
wait_for "the commit to complete once the followers fetch" "$(committed) == [(p, 3) for p in range(4)]" 20
ok "followers resumed: the high watermark passed the commit $(( $(now_ms) - PARKED_AT )) ms after it parked; committed offsets now $(q "$(committed)")"
grep -q '^[0-3] 2 p[0-3]-2$' "$OUT/consumer-a.out" || fail "consumer-a did not read the new messages"
