"""Nothing acknowledged is lost: a seeded, time-bounded run of random broker faults.

Three brokers; a topic of 3 partitions, replication factor 3, min.insync.replicas=2. Three
idempotent acks=all producers, two from confluent-kafka and one from Kafka's Java client
(tests/java's SoakWriter, in a JVM of its own), write without pause while the test kills,
restarts and shuts down brokers at random (at most one down at a time, so that an ISR of
two can always form), and pauses and resumes their replica fetchers. The coordinator of
the reading group is killed too, once the readers are running. Then every broker is
brought back and every fetcher resumed, the producers drain, and the log is checked.

The checks follow Jepsen's analysis of Kafka (2013), which treats each partition as a
log and each acknowledged write as a promise:
- **lost**: an acknowledged record whose offset, at the end, holds something else or
  nothing (the promise of "stored at offset N" is broken);
- **duplicates**: a value stored at more than one offset (a retry appended twice);
- **order**: per producer and partition, acknowledged records stored in the order they
  were sent (idempotence keeps it through retries);
- **read back**: a group consumer reads every acknowledged record, through a coordinator
  that was killed on the way.
Records a producer was told failed are "indeterminate", as in Jepsen: they may or may not
be stored, and neither counts against the broker. The figures are printed per producer and
in total.

PURGATORY_FAULT_SEED replays a run; the seed is printed either way, with the faults.
"""

import os
import random
import subprocess
import threading
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import ROOT, Cluster, wait_for

FAULT_SECONDS = float(os.environ.get("PURGATORY_FAULT_SECONDS", "12"))
PARTITIONS = 3


class Writer(threading.Thread):
    """Sends `name-<seq>` records round robin over the partitions until told to stop."""

    client = "confluent-kafka"

    def __init__(self, cluster, topic, name):
        super().__init__(daemon=True)
        self.topic, self.name = topic, name
        self.acked = {}  # value -> (partition, offset)
        self.sent = {p: [] for p in range(PARTITIONS)}  # send order, per partition
        self.failed = []
        self.stop = threading.Event()
        self.producer = Producer({
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "retry.backoff.ms": 50,
            "message.timeout.ms": 120000,
            "client.id": name,
        })

    def _done(self, err, msg):
        value = msg.value().decode()
        if err:
            self.failed.append((value, str(err)))
        else:
            self.acked[value] = (msg.partition(), msg.offset())

    def run(self):
        try:
            self._write()
        except Exception as e:  # a fatal producer error: reported by the test
            self.fatal = e

    fatal = None

    def _write(self):
        seq = 0
        while not self.stop.is_set():
            p = seq % PARTITIONS
            value = f"{self.name}-{seq}"
            try:
                self.producer.produce(self.topic, value=value.encode(), partition=p, on_delivery=self._done)
                self.sent[p].append(value)
                seq += 1
            except BufferError:
                pass
            self.producer.poll(0.002)
        assert self.producer.flush(120) == 0, "every record was answered"


class JavaWriter(threading.Thread):
    """Writer's twin with Kafka's Java client: tests/java's SoakWriter in its own JVM, whose
    stdout lines fill the same fields. Setting `stop` closes the JVM's stdin, which is its
    signal to drain and exit; the thread ends when it has."""

    client = "Java kafka-clients"

    def __init__(self, cluster, topic, name, classpath):
        super().__init__(daemon=True)
        self.topic, self.name = topic, name
        self.acked = {}  # value -> (partition, offset)
        self.sent = {p: [] for p in range(PARTITIONS)}  # send order, per partition
        self.failed = []
        self.fatal = None
        self.stop = threading.Event()
        self.log = open(os.path.join(ROOT, "target", f"fault-soak-{name}.log"), "w")
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-XX:+UseSerialGC", "-cp", classpath, "dev.purgatory.it.SoakWriter",
             cluster.bootstrap, topic, name, str(PARTITIONS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=ROOT)

    def run(self):
        reader = threading.Thread(target=self._read, daemon=True)
        reader.start()
        self.stop.wait()
        self.proc.stdin.close()
        reader.join()  # the JVM has closed its stdout: it drained, or died
        code = self.proc.wait()
        if code != 0 and self.fatal is None:
            self.fatal = f"exited with {code}"
        if self.fatal:
            self.fatal += f" (see {self.log.name})"

    def _read(self):
        """SENT value partition / ACK value partition offset / FAIL value error / FATAL error."""
        for line in self.proc.stdout:
            kind, _, rest = line.rstrip("\n").partition(" ")
            if kind == "SENT":
                value, p = rest.split(" ")
                self.sent[int(p)].append(value)
            elif kind == "ACK":
                value, p, offset = rest.split(" ")
                self.acked[value] = (int(p), int(offset))
            elif kind == "FAIL":
                value, _, error = rest.partition(" ")
                self.failed.append((value, error))
            else:
                self.fatal = rest if kind == "FATAL" else f"unexpected output {line!r}"

    def kill(self):
        """Ends the JVM if it is still running (a test that failed before it drained)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def tally(writer, stored, values):
    """What one producer was promised against what the log holds, for the summary."""
    lost = [(v, at) for v, at in writer.acked.items() if stored[at[0]].get(at[1]) != v]
    mine = [v for v in values if v.startswith(writer.name + "-")]
    misordered = []
    for p in range(PARTITIONS):
        offsets = [writer.acked[v][1] for v in writer.sent[p] if v in writer.acked]
        if offsets != sorted(offsets):
            misordered.append(p)
    return {"acknowledged": len(writer.acked), "lost": lost, "duplicates": len(mine) - len(set(mine)),
            "misordered": misordered, "indeterminate": len(writer.failed)}


def test_random_kills_restarts_and_pauses_lose_no_acknowledged_record(java_classpath):
    seed = int(os.environ.get("PURGATORY_FAULT_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    config = os.path.join(ROOT, "target", f"fault-soak-{seed}.toml")
    with open(os.path.join(ROOT, "config", "broker.toml")) as base, open(config, "w") as f:
        f.write(base.read().replace('"replica.lag.time.max.ms" = 30000', '"replica.lag.time.max.ms" = 1500'))
    cluster = Cluster(3, config=config)
    faults = []
    java = None
    try:
        topic = "soak"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for fut in admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})]).values():
            fut.result(30)
        wait_for("every partition led", lambda: all(
            (cluster.partition(topic, p) or {}).get("leader", -1) > 0 for p in range(PARTITIONS)))
        java = JavaWriter(cluster, topic, "java", java_classpath)
        writers = [Writer(cluster, topic, f"w{i}") for i in range(2)] + [java]
        for w in writers:
            w.start()
        # The JVM takes a few seconds to start: faults begin once every producer is writing.
        wait_for("every producer's first acknowledgement",
                 lambda: all(w.acked for w in writers) or java.proc.poll() is not None, timeout=90)
        assert java.proc.poll() is None, f"the Java writer stopped as it started; see {java.log.name}"

        down, paused = None, set()
        deadline = time.time() + FAULT_SECONDS
        while time.time() < deadline:
            time.sleep(rng.uniform(0.2, 0.8))
            choice = rng.random()
            if down is None and choice < 0.35:
                victim = rng.choice([1, 2, 3])
                action = "kill" if rng.random() < 0.7 else "shutdown"
                cluster.broker(victim, action)
                down = victim
                paused.discard(victim)
                faults.append(f"{action} {victim}")
            elif down is not None and choice < 0.6:
                cluster.broker(down, "restart")
                faults.append(f"restart {down}")
                down = None
            elif choice < 0.8:
                live = [b for b in (1, 2, 3) if b != down and b not in paused]
                if live:
                    b = rng.choice(live)
                    cluster.fetchers(b, "pause")
                    paused.add(b)
                    faults.append(f"pause {b}")
            elif paused:
                b = rng.choice(sorted(paused))
                cluster.fetchers(b, "resume")
                paused.discard(b)
                faults.append(f"resume {b}")

        # Heal: every broker up, every fetcher running; then the producers drain.
        if down is not None:
            cluster.broker(down, "restart")
        for b in paused:
            cluster.fetchers(b, "resume")
        for w in writers:
            w.stop.set()
        for w in writers:
            w.join(180)
            assert not w.is_alive(), "a producer did not drain"
        wait_for("every ISR whole again", lambda: all(
            sorted(cluster.partition(topic, p)["isr"]) == [1, 2, 3] for p in range(PARTITIONS)), timeout=60)

        # Read every partition back with a group consumer, and kill its coordinator once
        # it is reading.
        ends = {p: cluster.partition(topic, p)["high_watermark"] for p in range(PARTITIONS)}
        consumer = Consumer({
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"soak-readers-{seed}",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
        })
        consumer.subscribe([topic])
        stored = {p: {} for p in range(PARTITIONS)}  # offset -> value
        killed_coordinator = None
        read_deadline = time.time() + 120
        try:
            while sum(len(s) for s in stored.values()) < sum(ends.values()):
                assert time.time() < read_deadline, "the consumer stopped reading"
                m = consumer.poll(1)
                if m is None or m.error():
                    continue
                stored[m.partition()][m.offset()] = m.value().decode()
                if killed_coordinator is None and sum(len(s) for s in stored.values()) > 100:
                    (fut,) = admin.describe_consumer_groups([f"soak-readers-{seed}"]).values()
                    killed_coordinator = fut.result(30).coordinator.id
                    cluster.broker(killed_coordinator, "kill")
                    faults.append(f"kill {killed_coordinator} (the readers' coordinator)")
        finally:
            consumer.close()

        values = [v for s in stored.values() for v in s.values()]
        tallies = {w.name: tally(w, stored, values) for w in writers}
        lost = [x for t in tallies.values() for x in t["lost"]]
        duplicates = len(values) - len(set(values))
        misordered = [(name, p) for name, t in tallies.items() for p in t["misordered"]]
        print(f"\nseed {seed}: {len(faults)} faults injected: {', '.join(faults)}")
        print(f"records acknowledged {sum(t['acknowledged'] for t in tallies.values())}, lost {len(lost)}, "
              f"duplicates {duplicates}, out of order {len(misordered)}, "
              f"indeterminate (failed) {sum(t['indeterminate'] for t in tallies.values())}, stored {len(values)}")
        for w in writers:
            t = tallies[w.name]
            print(f"  {w.name} ({w.client}): acknowledged {t['acknowledged']}, lost {len(t['lost'])}, "
                  f"duplicates {t['duplicates']}, out of order {len(t['misordered'])}, "
                  f"indeterminate {t['indeterminate']}")
        assert {w.name: w.fatal for w in writers if w.fatal} == {}, "no producer hit a fatal error"
        assert all(t["acknowledged"] > 0 for t in tallies.values()), "every producer wrote"
        assert lost == [], f"seed {seed}: acknowledged and lost: {lost[:10]}"
        assert duplicates == 0, f"seed {seed}"
        assert misordered == [], f"seed {seed}: (producer, partition) out of order"
    finally:
        if java is not None:
            java.kill()
        cluster.stop()
        os.unlink(config)
