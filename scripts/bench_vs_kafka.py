#!/usr/bin/env python3
"""acks=all produce speed: this broker against a real Apache Kafka 4.4 cluster, one run.

Both sides replicate over the Kafka protocol: ours is the leader with its two embedded
followers (replication factor 3, min.insync.replicas 2), Kafka is scripts/kafka-reference.sh's
cluster (3 brokers, replication factor 3, min.insync.replicas 2). Kafka's own
ProducerPerformance (kafka-tools 4.4) is the load generator for both, with acks=-1:

  throughput  --num-records 500000 --record-size 100, linger.ms=5, as fast as it goes
  latency     20000 records of 100 bytes at a fixed 500 records/s, linger.ms=0 and
              max.in.flight.requests.per.connection=1: each record is sent alone, 2 ms
              after the last, so it measures one acks=all round trip (p50, p99)
  librdkafka  5000 records, one at a time, each sent when the last is acknowledged, timed
              in microseconds (ProducerPerformance reports whole milliseconds)

Both sides are first warmed with --warm-records (a million) records at full speed, for
Kafka's JIT. Rounds are interleaved (ours, Kafka, Kafka, ours, ...), each on a new
one-partition topic, and each round's ratio is taken before the medians. The brokers' CPU time per record comes
from /proc (utime + stime of our process; of Kafka's three broker JVMs and its controller).

    python3 scripts/bench_vs_kafka.py [--rounds 5] [--records 500000] [--latency-records 20000]

It starts both brokers itself (Kafka from Maven's jars, which the first run resolves) and
stops them at the end. It takes about 2 minutes a round on a 2-vCPU machine.
"""

import argparse
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import time
import urllib.request

import ready_launch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BINARY = os.path.join(ROOT, "target", "release", "purgatory")
CLK_TCK = os.sysconf("SC_CLK_TCK")

SUMMARY = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th"
)


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (after the comm field)
    return total / CLK_TCK


def free_run(n):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "free_port_run.py"), str(n)],
                         check=True, capture_output=True, text=True)
    return int(out.stdout.strip())


class Ours:
    def __init__(self):
        self.log = open(os.path.join(ROOT, "target", "bench-vs-kafka-ours.log"), "w")
        try:
            self.proc, ready = ready_launch.serve(
                BINARY, ["--config", os.path.join(ROOT, "config", "broker.toml")], self.log, cwd=ROOT)
        except RuntimeError as e:
            raise SystemExit(f"our broker: {e}; see target/bench-vs-kafka-ours.log")
        self.bootstrap = ready["bootstrap"]
        self.admin = ready["admin"]

    def pids(self):
        return [self.proc.pid]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)


class Kafka:
    def __init__(self):
        self.env = dict(os.environ)
        self.env["KAFKA_REF_DIR"] = os.path.join(ROOT, "target", "kafka-reference-bench")
        self.env["KAFKA_REF_PORT"] = str(free_run(4))
        script = os.path.join(ROOT, "scripts", "kafka-reference.sh")
        out = subprocess.run(["bash", script, "start"], env=self.env, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit("the reference Kafka did not start:\n" + out.stderr)
        self.bootstrap = out.stdout.strip().splitlines()[-1]
        self.dir = self.env["KAFKA_REF_DIR"]

    def pids(self):
        pids = []
        for name in ("controller-0", "broker-1", "broker-2", "broker-3"):
            with open(os.path.join(self.dir, f"{name}.pid")) as f:
                pids.append(int(f.read().strip()))
        return pids

    def stop(self):
        subprocess.run(["bash", os.path.join(ROOT, "scripts", "kafka-reference.sh"), "stop"],
                       env=self.env, capture_output=True)


def classpath():
    with open(os.path.join(ROOT, "target", "kafka-reference.classpath")) as f:
        return f.read().splitlines()[1]


def producer_performance(bootstrap, topic, records, throughput, props):
    args = ["java", "-Xmx512m", "-cp", classpath(), "org.apache.kafka.tools.ProducerPerformance",
            "--topic", topic, "--num-records", str(records), "--record-size", "100",
            "--throughput", str(throughput), "--bootstrap-server", bootstrap,
            "--command-property", "acks=-1"]
    for p in props:
        args += ["--command-property", p]
    out = subprocess.run(args, capture_output=True, text=True, timeout=900)
    match = None
    for line in out.stdout.splitlines():
        m = SUMMARY.search(line)
        if m:
            match = m
    if out.returncode != 0 or match is None:
        raise SystemExit(f"ProducerPerformance failed on {bootstrap}:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    sent = int(match.group(1))
    if sent != records:
        raise SystemExit(f"ProducerPerformance sent {sent} of {records} on {bootstrap}")
    return {"rate": float(match.group(2)), "p50": int(match.group(6)), "p99": int(match.group(8)),
            "avg": float(match.group(4))}


# A second client for the latency, with microseconds where ProducerPerformance reports whole
# milliseconds: librdkafka (confluent-kafka, from the test command's venv), one acks=all
# record at a time, each sent when the last is acknowledged.
LIBRDKAFKA_PROBE = r"""
import sys, time, statistics
from confluent_kafka import Producer
bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
took, failed = [], []
def done(err, msg):
    if err is not None:
        failed.append(err)
for i in range(n + 200):
    start = time.perf_counter()
    p.produce(topic, b"x" * 100, callback=done)
    p.flush(30)
    if i >= 200:  # the first ones pay for connections and metadata
        took.append(time.perf_counter() - start)
if failed:
    sys.exit(f"{len(failed)} records failed: {failed[0]}")
took.sort()
print(statistics.median(took) * 1e3, took[int(len(took) * 0.99)] * 1e3)
"""


def librdkafka_latency(bootstrap, topic, records):
    python = os.path.join(ROOT, ".venv", "bin", "python")
    if not os.access(python, os.X_OK):
        raise SystemExit("the librdkafka probe needs the test command's venv: run bash scripts/test.sh once")
    out = subprocess.run([python, "-c", LIBRDKAFKA_PROBE, bootstrap, topic, str(records)],
                         capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"the librdkafka probe failed on {bootstrap}:\n{out.stderr[-2000:]}")
    p50, p99 = (float(x) for x in out.stdout.split())
    return p50, p99


def warm_up(side, topic, records):
    """Kafka's JVMs need hundreds of thousands of records before the JIT has compiled the
    produce and replication paths: without this, its first rounds run at a third of its
    later speed and flatter us."""
    producer_performance(side.bootstrap, topic, records, -1, ["linger.ms=5"])


def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(side, topic, records, throughput, props):
    before, client_before = cpu_seconds(side.pids()), children_cpu_seconds()
    result = producer_performance(side.bootstrap, topic, records, throughput, props)
    result["cpu_us_per_record"] = (cpu_seconds(side.pids()) - before) / records * 1e6
    # ProducerPerformance's own JVM: the load generator's share of the two CPUs.
    result["client_cpu_us_per_record"] = (children_cpu_seconds() - client_before) / records * 1e6
    return result


def broker_side_p50_ms(ours):
    """The median time our broker took per Produce (arrival to response sent), over the
    last requests of the run, from its request log."""
    url = f"http://{ours.admin}/api/requests?request=Produce&done=1&limit=4096"
    with urllib.request.urlopen(url, timeout=10) as r:
        requests = json.load(r)["requests"]
    totals = [q["phases_ms"]["total"] for q in requests if q.get("phases_ms")]
    return statistics.median(totals) if totals else float("nan")


def median_and_range(values):
    values = sorted(values)
    return statistics.median(values), values[0], values[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--records", type=int, default=500000)
    ap.add_argument("--latency-records", type=int, default=20000)
    ap.add_argument("--latency-rate", type=int, default=500)
    ap.add_argument("--librdkafka-records", type=int, default=5000)
    ap.add_argument("--warm-records", type=int, default=1000000)
    args = ap.parse_args()

    print("starting the reference Kafka cluster and our broker ...", flush=True)
    kafka = Kafka()
    ours = Ours()
    sides = {"ours": ours, "kafka": kafka}
    results = {name: [] for name in sides}
    try:
        for name, side in sides.items():
            warm_up(side, f"bench-warm-{name}", args.warm_records)
        for r in range(args.rounds):
            order = ["ours", "kafka"] if r % 2 == 0 else ["kafka", "ours"]
            for name in order:
                side = sides[name]
                tput = measure(side, f"bench-tput-{r}", args.records, -1, ["linger.ms=5"])
                lat = measure(side, f"bench-lat-{r}", args.latency_records, args.latency_rate,
                              ["linger.ms=0", "max.in.flight.requests.per.connection=1"])
                if name == "ours":
                    lat["broker_p50"] = broker_side_p50_ms(ours)
                lat["rdk_p50"], lat["rdk_p99"] = librdkafka_latency(
                    side.bootstrap, f"bench-rdk-{r}", args.librdkafka_records)
                results[name].append({"tput": tput, "lat": lat})
                print(f"round {r + 1} {name:>5}: {tput['rate']:>9.0f} records/s "
                      f"({tput['cpu_us_per_record']:.1f} us CPU/record), latency p50 {lat['p50']} ms "
                      f"p99 {lat['p99']} ms avg {lat['avg']:.2f} ms ({lat['cpu_us_per_record']:.0f} us CPU/record), "
                      f"librdkafka p50 {lat['rdk_p50']:.3f} ms p99 {lat['rdk_p99']:.3f} ms",
                      flush=True)
    finally:
        ours.stop()
        kafka.stop()

    def row(label, key, metric, better):
        o = [x[key][metric] for x in results["ours"]]
        k = [x[key][metric] for x in results["kafka"]]
        ratios = [a / b if b else float("inf") for a, b in zip(o, k)]
        mo, mk, (mr, lo, hi) = statistics.median(o), statistics.median(k), median_and_range(ratios)
        print(f"| {label} | {mo:,.2f} | {mk:,.2f} | {mr:.2f}x [{lo:.2f}-{hi:.2f}] | {better} |")

    print()
    print(f"{args.rounds} interleaved rounds; medians, and the median of the per-round ratios ours/Kafka [range]")
    print("| | ours | Kafka 4.4 | ours / Kafka | goal |")
    print("|---|---|---|---|---|")
    row("throughput, records/s (500k x 100 B, linger.ms=5)", "tput", "rate", ">= 3x")
    row("broker CPU per record, us (throughput run)", "tput", "cpu_us_per_record", "")
    row("latency p50, ms (one record in flight)", "lat", "p50", "<= 0.33x")
    row("latency p99, ms", "lat", "p99", "")
    row("latency average, ms", "lat", "avg", "")
    row("latency p50, ms, librdkafka (one record in flight)", "lat", "rdk_p50", "")
    row("latency p99, ms, librdkafka", "lat", "rdk_p99", "")
    row("broker CPU per record, us (latency run)", "lat", "cpu_us_per_record", "")
    row("client (ProducerPerformance) CPU per record, us (throughput run)", "tput",
        "client_cpu_us_per_record", "")
    broker = [x["lat"]["broker_p50"] for x in results["ours"]]
    print(f"\nours, inside the broker (its request log): a latency-run Produce took "
          f"{statistics.median(broker):.2f} ms at the median (arrival to response sent)")


if __name__ == "__main__":
    main()
