#!/usr/bin/env python3
"""Paired rounds of two timer-bench binaries (before / after a change).

Each round runs both binaries once on the same workload, in an order that alternates
from round to round, and prints every implementation's CPU ns/op (or the purgatory's
rate and CPU) for each, and the ratio before/after (above 1: the change is faster);
then the median of the ratios. Usage:

    pair.py BEFORE AFTER ROUNDS -- WORKLOAD ARGS...

e.g. pair.py /tmp/tb-main target/release/timer-bench 6 -- churn --pending 1000000 \
    --ops 2000000 --cancel random --impl timewheel,timewheel-timer
"""
import statistics
import subprocess
import sys

# Lower is better for these keys (times, lateness, memory); the purgatory's rate is
# higher-is-better.
LOWER = ["cpu_ns_per_op", "cpu_ms", "late_p99_ms", "add_ns", "cancel_ns", "bytes_per_entry_after"]
HIGHER = ["actual_rate"]


def run(binary, args):
    out = subprocess.run([binary] + args, capture_output=True, text=True, check=True).stdout
    values = {}
    for line in out.splitlines():
        fields = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
        name = fields.get("impl")
        if not name or "ratio" in fields:
            continue
        for key in LOWER + HIGHER:
            try:
                values[(name, key)] = float(fields[key])
            except (KeyError, ValueError):
                pass
    return values


def main():
    if len(sys.argv) < 5 or sys.argv[4] != "--":
        sys.exit(__doc__)
    before, after, rounds, args = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[5:]
    ratios = {}
    for r in range(rounds):
        order = [(0, before), (1, after)] if r % 2 == 0 else [(1, after), (0, before)]
        got = {}
        for side, binary in order:
            got[side] = run(binary, args)
        for key in sorted(set(got[0]) & set(got[1])):
            b, a = got[0][key], got[1][key]
            if a <= 0 or b <= 0:
                continue
            ratio = b / a if key[1] in LOWER else a / b
            ratios.setdefault(key, []).append(ratio)
            print(f"round {r} {key[0]} {key[1]} before={b:.2f} after={a:.2f} before/after={ratio:.3f}")
        sys.stdout.flush()
    for (name, key), rs in sorted(ratios.items()):
        listed = " ".join(f"{x:.2f}" for x in rs)
        print(f"median {name} {key} {statistics.median(rs):.3f} [{listed}]")


if __name__ == "__main__":
    main()
