#!/usr/bin/env python3
"""The broker's memory under `log.memory.max.bytes`: process RSS after a long acks=all write.

Starts the broker (with its embedded followers) with `log.memory.max.bytes` set to --cap-mib,
creates a topic of --partitions partitions with three replicas, writes --megabytes of 1 KB
records to it with acks=all (confluent-kafka, linger.ms=5), and reads the broker process's
resident memory from /proc: its RSS at the end and its peak (VmHWM). The goal (issue 20):
RSS within 1.5x of brokers x cap, plus a fixed baseline of at most 100 MB:

    goal = 1.5 * brokers * cap + 100 MiB

With --brokers N (N > 1) the process runs N brokers (`serve --brokers N`): each broker's
cap covers its own replicas, the copies it follows included, so the goal grows with N.

With --bin LABEL=PATH (repeatable) it measures several builds, in interleaved rounds
(--rounds), and prints each round and the medians, so a change is measured against the
build before it in the same run:

    .venv/bin/python scripts/bench_memory.py --bin before=/tmp/purgatory-before \\
        --bin after=target/release/purgatory --rounds 3

Run from the repository root with the test venv (it needs confluent-kafka).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import ready_launch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
MIB = 1 << 20


def config_with_cap(cap_bytes):
    """config/broker.toml with `log.memory.max.bytes` replaced, in a temporary file."""
    lines = []
    with open(os.path.join(ROOT, "config", "broker.toml")) as f:
        for line in f:
            if line.startswith('"log.memory.max.bytes"'):
                line = f'"log.memory.max.bytes" = {cap_bytes}\n'
            lines.append(line)
    out = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
    out.write("".join(lines))
    out.close()
    return out.name


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def run_once(binary, cap_bytes, megabytes, partitions, brokers):
    config = config_with_cap(cap_bytes)
    extra = [] if brokers == 1 else ["--brokers", str(brokers)]
    proc, ready = ready_launch.serve(binary, ["--config", config, *extra], subprocess.DEVNULL)
    bootstrap = ready["bootstrap"]
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("mem", partitions, 3)])["mem"].result(timeout=30)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                             "queue.buffering.max.kbytes": 65536, "log_level": 3})
        failed = []
        value = b"x" * 1000
        count = megabytes * 1000
        for i in range(count):
            while True:
                try:
                    producer.produce("mem", value, partition=i % partitions,
                                     on_delivery=lambda err, _m: err and failed.append(err))
                    break
                except BufferError:
                    producer.poll(0.05)
            if i % 10_000 == 0:
                producer.poll(0)
        producer.flush(120)
        time.sleep(1)
        rss = status_kib(proc.pid, "VmRSS") * 1024
        peak = status_kib(proc.pid, "VmHWM") * 1024
        return rss, peak, len(failed)
    finally:
        producer = admin = None  # closed before the broker goes, so they do not log it
        proc.terminate()
        proc.wait(timeout=10)
        os.unlink(config)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cap-mib", type=int, default=20)
    ap.add_argument("--megabytes", type=int, default=240)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--brokers", type=int, default=1,
                    help="brokers in the process (1: one leader with its simulated followers)")
    ap.add_argument("--bin", action="append", default=[],
                    help="LABEL=PATH of a build to measure (default: target/release/purgatory)")
    args = ap.parse_args()
    builds = [b.split("=", 1) if "=" in b else (b, b) for b in args.bin] or [
        ("this", os.path.join(ROOT, "target", "release", "purgatory"))]
    cap = args.cap_mib * MIB
    goal = 1.5 * args.brokers * cap + 100 * MIB
    print(f"bench_memory: {args.megabytes} MB of acks=all writes to {args.partitions} partitions, "
          f"log.memory.max.bytes = {args.cap_mib} MiB, {args.brokers} broker(s) in the process; "
          f"goal RSS <= 1.5 x {args.brokers} x cap + 100 MiB = {goal / MIB:.0f} MiB")
    results = {label: [] for label, _ in builds}
    for r in range(args.rounds):
        order = builds if r % 2 == 0 else list(reversed(builds))
        for label, path in order:
            rss, peak, failed = run_once(path, cap, args.megabytes, args.partitions, args.brokers)
            results[label].append((rss, peak))
            print(f"round {r} {label:<10} RSS {rss / MIB:7.1f} MiB  peak {peak / MIB:7.1f} MiB  "
                  f"RSS / goal {rss / goal:5.2f}  failed deliveries {failed}", flush=True)
    print(f"--- medians over {args.rounds} round(s)")
    base = None
    for label, _ in builds:
        rss = statistics.median(x[0] for x in results[label])
        peak = statistics.median(x[1] for x in results[label])
        base = base or rss
        print(f"{label:<10} RSS {rss / MIB:7.1f} MiB  peak {peak / MIB:7.1f} MiB  "
              f"RSS / goal {rss / goal:5.2f}  RSS / {builds[0][0]} {rss / base:5.2f}")


if __name__ == "__main__":
    sys.exit(main())
