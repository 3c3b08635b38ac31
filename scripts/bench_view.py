#!/usr/bin/env python3
"""acks=all throughput with the live view open vs closed, in interleaved rounds.

Starts the broker (two embedded followers, topic `bench` with three replicas) and, per
round, runs each condition in turn (the order rotating from round to round):

  closed   nobody watches;
  sse      the live view streams to an SSE client reading /api/view/stream;
  browser  the page itself is open in Debian's headless chromium;
  base     another build of the broker (--base-bin, e.g. main before the view), closed;

and the controls, which watch nothing: a busy process (spin, or memspin), the same headless
chromium showing a page that only changes one number 11 times a second (trivial), the
view's page streaming its frames but drawing only its clock (floor), or nothing at all (none: `closed` again, whose distance from `closed` is the bench's noise).
They tell what the view costs from what any neighbour, or any page updating at the view's
pace, costs this machine. --viewer picks the watching conditions, e.g.
--viewer browser,trivial runs closed, browser and trivial in each round.

Each condition measures two things with librdkafka (confluent-kafka), acks=all, and for
each the broker's CPU time per record (all its threads, the embedded followers included,
from /proc: on a busy shared machine this varies far less than the wall-clock rate):
  pipelined   --messages records of 100 bytes produced as fast as the producer goes
              (linger.ms=0: each request carries what queued up while the last was in
              flight), records/s, and records per Produce request (from /metrics): fewer
              records per request means more requests, so more broker work per record;
  sequential  --sequential records, each flushed before the next (one request in flight,
              latency-bound), produces/s.

--pin splits the machine's CPUs: the broker and the producer on the first half, the viewer
(the SSE reader, or chromium and everything it starts) on the rest, in every condition.
Unpinned, on a small machine, the browser's rendering takes CPU from the producer and the
broker, and the figure says what this machine's CPU can do for all three; pinned, it says
what the open view costs the broker itself (its frames, its request log), as it would with
the browser on another core or another machine.

Prints each round and the medians, and the ratios to `closed`. Run from the repository
root with the test venv: .venv/bin/python scripts/bench_view.py --rounds 5
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

# With --pin: the CPUs of the broker and the producer, and those of the viewer (None: any).
BROKER_CPUS = None
VIEWER_CPUS = None


def pinned(cmd, cpus):
    """`cmd` run on `cpus` (with everything it starts), or as it is if `cpus` is None."""
    return cmd if cpus is None else ["taskset", "-c", ",".join(map(str, sorted(cpus)))] + cmd


class Broker:
    def __init__(self, binary):
        self.log = tempfile.NamedTemporaryFile(prefix="bench-view-", suffix=".log", delete=False)
        self.proc, ready = ready_launch.serve(
            binary, ["--config", os.path.join(ROOT, "config", "broker.toml")], self.log,
            cwd=ROOT, env={**os.environ, "RUST_LOG": "warn"},
            wrap=lambda cmd: pinned(cmd, BROKER_CPUS))
        self.bootstrap = ready["bootstrap"]
        self.admin = "http://" + ready["admin"]
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic("bench", 1, 3)])["bench"].result(timeout=30)
        for _ in range(300):
            state = json.load(urllib.request.urlopen(self.admin + "/api/state", timeout=2))
            if all(any(p["topic"] == "bench" for p in f["partitions"]) for f in state["followers"]):
                break
            time.sleep(0.05)

    def cpu_ns(self):
        """CPU time of every thread of the broker so far, in ns."""
        total = 0
        task_dir = f"/proc/{self.proc.pid}/task"
        for tid in os.listdir(task_dir):
            try:
                with open(f"{task_dir}/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except OSError:
                pass  # a thread that just ended
        return total

    def produce_requests(self):
        """Produce requests answered so far (from /metrics)."""
        text = urllib.request.urlopen(self.admin + "/metrics", timeout=5).read().decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith('kafka_network_requestmetrics_requests_total{request="Produce"'))

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


# The SSE reader runs in its own process: in this one it would compete with the producer
# loop for the interpreter lock, and slow the producer, not the broker.
READER = r"""
import signal, sys, urllib.request
frames = 0
def done(*_):
    print(frames, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, done)
for line in urllib.request.urlopen(sys.argv[1], timeout=60):
    if line.startswith(b"event: frame"):
        frames += 1
"""


def processes_cpu(match):
    """CPU seconds so far of the processes for which `match(pid, cmdline)` is true."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            if not match(int(pid), cmdline):
                continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            # utime, stime, and those of its children that have ended: chromium ends a
            # page's renderer when it navigates away, and its parent (also matched) then
            # holds its time, so the total never goes down.
            total += sum(int(x) for x in fields[11:15])
        except OSError:
            pass  # gone meanwhile
    return total / os.sysconf("SC_CLK_TCK")


class SseViewer:
    """Reads the page's stream, as the page would, counting frames."""

    def __init__(self, broker):
        self.proc = subprocess.Popen(pinned([sys.executable, "-c", READER, broker.admin + "/api/view/stream"], VIEWER_CPUS),
                                     stdout=subprocess.PIPE, text=True)

    def cpu(self):
        return processes_cpu(lambda pid, _cmdline: pid == self.proc.pid)

    def stop(self):
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        return int(out.strip() or 0)


# The controls: no view at all, a process on the viewer's CPUs that is busy half the
# time (5 ms on, 5 ms off), either spinning or copying 32 MB buffers.
SPINNER = r"""
import sys, time
a, b = bytearray(32 << 20), bytearray(32 << 20)
copy = sys.argv[1] == "memory"
while True:
    end = time.perf_counter() + 0.005
    while time.perf_counter() < end:
        if copy:
            b[:] = a
    time.sleep(0.005)
"""


class Spinner:
    """A control: what a busy neighbour (`spin`), or its memory traffic (`memory`), costs
    the broker."""

    def __init__(self, broker, kind="spin"):
        self.proc = subprocess.Popen(pinned([sys.executable, "-c", SPINNER, kind], VIEWER_CPUS))

    def cpu(self):
        return processes_cpu(lambda pid, _cmdline: pid == self.proc.pid)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        return 0


# The browser control: a page that changes one number 11 times a second, as often as the
# view's frames come, and does nothing else (no stream, no broker).
TRIVIAL_PAGE = ("data:text/html,<body><div id=n style='font:40px sans-serif'>0</div><script>"
                "window.purgatoryFrames=0;setInterval(()=>{document.getElementById('n').textContent="
                "String(++window.purgatoryFrames)},90)</script></body>")


class NoViewer:
    """The A/A control: nobody watches, as in `closed`; the spread between the two is the
    bench's own noise."""

    def __init__(self, broker):
        pass

    def cpu(self):
        return 0

    def stop(self):
        return 0


class BrowserViewer:
    """The page itself in headless chromium; `about:blank` between rounds closes its stream.
    With `trivial`, the same browser shows `TRIVIAL_PAGE` instead: a control. With `floor`,
    the page itself with its stream, drawing from each frame only the clock: what any page
    that follows the broker 11 times a second costs, before drawing anything else."""

    driver = None
    # Every chromium process of this run has it on its command line.
    profile = tempfile.mkdtemp(prefix="bench-view-chromium-")

    def __init__(self, broker, trivial=False, floor=False):
        if BrowserViewer.driver is None:
            from selenium import webdriver
            from selenium.webdriver.chrome.service import Service
            opts = webdriver.ChromeOptions()
            opts.binary_location = "/usr/bin/chromium"
            if VIEWER_CPUS is not None:
                # chromedriver starts the browser: a wrapper pins it (and its renderers).
                wrapper = os.path.join(tempfile.mkdtemp(), "chromium")
                with open(wrapper, "w") as f:
                    f.write("#!/bin/sh\nexec " + " ".join(pinned(["/usr/bin/chromium"], VIEWER_CPUS)) + ' "$@"\n')
                os.chmod(wrapper, 0o755)
                opts.binary_location = wrapper
            for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={BrowserViewer.profile}", "--window-size=1600,1000"]:
                opts.add_argument(arg)
            BrowserViewer.driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
        self.driver = BrowserViewer.driver
        self.driver.get(TRIVIAL_PAGE if trivial else broker.admin + "/")
        if floor:
            # The page's functions are globals: each frame is still parsed and counted.
            self.driver.execute_script("render = function () { renderClock(); };")
        for _ in range(200):
            if self.driver.execute_script("return window.purgatoryFrames || 0") > 0:
                break
            time.sleep(0.05)
        # Frames are counted from here, as the SSE reader's are from its start.
        self.frames_before = self.driver.execute_script("return window.purgatoryFrames || 0")

    def cpu(self):
        marker = BrowserViewer.profile.encode()
        return processes_cpu(lambda _pid, cmdline: marker in cmdline)

    def stop(self):
        frames = self.driver.execute_script("return window.purgatoryFrames || 0") - self.frames_before
        self.driver.get("about:blank")
        return frames


def pipelined(bootstrap, messages):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                  "queue.buffering.max.messages": max(100000, messages), "client.id": "bench-pipelined"})
    p.produce("bench", b"w")
    p.flush(30)
    value = b"x" * 100
    start = time.perf_counter()
    for _ in range(messages):
        while True:
            try:
                p.produce("bench", value)
                break
            except BufferError:
                p.poll(0.001)
        p.poll(0)
    left = p.flush(120)
    elapsed = time.perf_counter() - start
    assert left == 0
    return messages / elapsed


def sequential(bootstrap, count):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "client.id": "bench-sequential"})
    p.produce("bench", b"w")
    p.flush(30)
    start = time.perf_counter()
    for _ in range(count):
        p.produce("bench", b"y" * 100)
        p.flush(30)
    return count / (time.perf_counter() - start)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "purgatory"))
    ap.add_argument("--base-bin", help="another broker build to compare with, page closed")
    ap.add_argument("--viewer", default="sse",
                    help="who watches, one condition each, comma-separated to run several "
                    "side by side: sse, browser, or a control with no view: spin, a process "
                    "keeping half a CPU busy; memspin, the same copying memory; trivial, chromium "
                    "showing a page that changes one number 11 times a second; floor, the page "
                    "streaming its frames but drawing only the clock; none, nothing (closed again)")
    ap.add_argument("--rounds", type=int, default=5)
    # A run must last well over a frame interval (90 ms), or one frame more or less decides
    # the figure: about a second each, on a 2-core machine.
    ap.add_argument("--messages", type=int, default=1000000)
    ap.add_argument("--sequential", type=int, default=5000)
    ap.add_argument("--pin", action="store_true",
                    help="broker and producer on the first half of the CPUs, the viewer on the rest")
    args = ap.parse_args()
    if args.pin:
        global BROKER_CPUS, VIEWER_CPUS
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            sys.exit("--pin needs at least two CPUs")
        BROKER_CPUS, VIEWER_CPUS = set(cpus[:len(cpus) // 2]), set(cpus[len(cpus) // 2:])
        os.sched_setaffinity(0, BROKER_CPUS)  # the producer (librdkafka's threads start later)
        print(f"pinned: broker and producer on CPUs {sorted(BROKER_CPUS)}, viewer on {sorted(VIEWER_CPUS)}")

    viewer_classes = {"sse": SseViewer, "browser": BrowserViewer, "spin": Spinner,
                      "memspin": lambda b: Spinner(b, "memory"),
                      "trivial": lambda b: BrowserViewer(b, trivial=True),
                      "floor": lambda b: BrowserViewer(b, floor=True), "none": NoViewer}
    viewers = args.viewer.split(",")
    for v in viewers:
        if v not in viewer_classes:
            sys.exit(f"unknown viewer {v!r}: one of {', '.join(viewer_classes)}")
    # Every condition but `base` runs on the same broker.
    brokers = {"closed": Broker(args.bin)}
    if args.base_bin:
        brokers["base"] = Broker(args.base_bin)
    conditions = ["closed"] + viewers + (["base"] if args.base_bin else [])
    results = {c: {"pipelined": [], "sequential": [], "frames/s": [], "cpu_us_pipelined": [], "cpu_us_sequential": [],
                   "records_per_request": [], "viewer_cpu": []}
               for c in conditions}
    try:
        for r in range(args.rounds):
            order = conditions[r % len(conditions):] + conditions[:r % len(conditions)]
            line = [f"round {r + 1}:"]
            for c in order:
                b = brokers.get(c, brokers["closed"])
                viewer = viewer_classes[c](b) if c in viewer_classes else None
                t0 = time.perf_counter()
                v0 = viewer.cpu() if viewer else 0
                r0 = b.produce_requests()
                c0 = b.cpu_ns()
                pipe = pipelined(b.bootstrap, args.messages)
                c1 = b.cpu_ns()
                results[c]["records_per_request"].append((args.messages + 1) / max(1, b.produce_requests() - r0 - 1))
                seq = sequential(b.bootstrap, args.sequential)
                c2 = b.cpu_ns()
                results[c]["cpu_us_pipelined"].append((c1 - c0) / 1e3 / (args.messages + 1))
                results[c]["cpu_us_sequential"].append((c2 - c1) / 1e3 / (args.sequential + 1))
                if viewer:
                    results[c]["viewer_cpu"].append((viewer.cpu() - v0) / (time.perf_counter() - t0))
                    frames = viewer.stop()
                    results[c]["frames/s"].append(frames / (time.perf_counter() - t0))
                results[c]["pipelined"].append(pipe)
                results[c]["sequential"].append(seq)
                line.append(f"{c} {pipe:,.0f} rec/s ({results[c]['records_per_request'][-1]:.1f} rec/req) {seq:,.0f} seq/s "
                            f"[{results[c]['cpu_us_pipelined'][-1]:.2f} / {results[c]['cpu_us_sequential'][-1]:.1f} cpu µs]")
            print("  ".join(line), flush=True)
    finally:
        for b in set(brokers.values()):
            b.stop()
        if BrowserViewer.driver is not None:
            BrowserViewer.driver.quit()

    print()
    keys = ("pipelined", "sequential", "cpu_us_pipelined", "cpu_us_sequential")
    base = {k: statistics.median(results["closed"][k]) for k in keys}
    print("medians (ratio to closed)")
    for c in conditions:
        med = {k: statistics.median(v) for k, v in results[c].items() if v}
        extra = (f"  {med['frames/s']:.1f} frames/s streamed, the viewer used {med['viewer_cpu']:.0%} of a CPU"
                 if "viewer_cpu" in med else "")
        r = {k: med[k] / base[k] for k in keys}
        print(f"{c:>7}: pipelined {med['pipelined']:>9,.0f} rec/s ({r['pipelined']:.3f}), "
              f"broker CPU {med['cpu_us_pipelined']:.2f} µs/rec ({r['cpu_us_pipelined']:.3f}), "
              f"{med['records_per_request']:.1f} records/request;"
              f"  sequential {med['sequential']:>6,.0f} produces/s ({r['sequential']:.3f}), "
              f"broker CPU {med['cpu_us_sequential']:.1f} µs/produce ({r['cpu_us_sequential']:.3f}){extra}")
    # The same ratios paired round by round, with their middle half: how far apart two
    # conditions must be before this machine can tell them apart (see `none`).
    print()
    print("per-round ratios to closed: median [middle half]")
    for c in conditions[1:]:
        line = [f"{c:>7}:"]
        for k in keys:
            ratios = sorted(a / b for a, b in zip(results[c][k], results["closed"][k]))
            q = len(ratios) // 4
            line.append(f"{k} {statistics.median(ratios):.3f} [{ratios[q]:.2f}-{ratios[-1 - q]:.2f}]")
        print("  ".join(line))


if __name__ == "__main__":
    sys.exit(main())
