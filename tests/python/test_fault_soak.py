"""Nothing acknowledged is lost: a seeded, time-bounded run of random broker faults.

Three brokers; a topic of 3 partitions, replication factor 3, min.insync.replicas=2. Two
idempotent acks=all producers (confluent-kafka) write without pause while the test kills,
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
be stored, and neither counts against the broker.

PURGATORY_FAULT_SEED replays a run; the seed is printed either way, with the faults.
"""

import os
import random
import threading
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import ROOT, Cluster, wait_for

FAULT_SECONDS = float(os.environ.get("PURGATORY_FAULT_SECONDS", "12"))
PARTITIONS = 3


class Writer(threading.Thread):
    """Sends `name-<seq>` records round robin over the partitions until told to stop."""

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


def test_random_kills_restarts_and_pauses_lose_no_acknowledged_record():
    seed = int(os.environ.get("PURGATORY_FAULT_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    config = os.path.join(ROOT, "target", f"fault-soak-{seed}.toml")
    with open(os.path.join(ROOT, "config", "broker.toml")) as base, open(config, "w") as f:
        f.write(base.read().replace('"replica.lag.time.max.ms" = 30000', '"replica.lag.time.max.ms" = 1500'))
    cluster = Cluster(3, config=config)
    faults = []
    try:
        topic = "soak"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for fut in admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})]).values():
            fut.result(30)
        wait_for("every partition led", lambda: all(
            (cluster.partition(topic, p) or {}).get("leader", -1) > 0 for p in range(PARTITIONS)))
        writers = [Writer(cluster, topic, f"w{i}") for i in range(2)]
        for w in writers:
            w.start()

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

        acked = sum(len(w.acked) for w in writers)
        lost = [(v, at) for w in writers for v, at in w.acked.items() if stored[at[0]].get(at[1]) != v]
        values = [v for s in stored.values() for v in s.values()]
        duplicates = len(values) - len(set(values))
        misordered = []
        for w in writers:
            for p in range(PARTITIONS):
                acked_in_order = [v for v in w.sent[p] if v in w.acked]
                offsets = [w.acked[v][1] for v in acked_in_order]
                if offsets != sorted(offsets):
                    misordered.append((w.name, p))
        indeterminate = sum(len(w.failed) for w in writers)
        print(f"\nseed {seed}: {len(faults)} faults injected: {', '.join(faults)}")
        print(f"records acknowledged {acked}, lost {len(lost)}, duplicates {duplicates}, "
              f"out of order {len(misordered)}, indeterminate (failed) {indeterminate}, stored {len(values)}")
        assert [w.fatal for w in writers] == [None, None], "no producer hit a fatal error"
        assert acked > 0
        assert lost == [], f"seed {seed}: acknowledged and lost: {lost[:10]}"
        assert duplicates == 0, f"seed {seed}"
        assert misordered == [], f"seed {seed}"
    finally:
        cluster.stop()
        os.unlink(config)
