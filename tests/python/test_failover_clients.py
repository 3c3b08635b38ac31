"""Issue 20, point 5: kafka-python and kafkajs keep producing and consuming across a leader
kill, with at most the delay their retries take. (confluent-kafka: test_failover.py; the
Java client: tests/java FailoverClientTest; franz-go: tests/go failover_test.go.)

Each test runs the same sequence on a cluster of its own (`serve --brokers 3`):
1. a topic with 1 partition, replication factor 3, min.insync.replicas=2, led by broker 1;
2. an idempotent acks=all producer writes a first batch and every record is acknowledged;
3. the producer keeps writing a second batch, and once some of it is acknowledged broker 1
   is killed over the admin API: the answer must show a clean election from the ISR to
   broker 2 or 3, leader epoch 1; the producer goes on writing, and its retries (with the
   retry/backoff settings a user would set) carry what was in flight to the new leader;
4. a consumer of the same library, bootstrapped on the new leader alone, reads the
   partition up to its high watermark: every record the producer was told is stored is
   there exactly once, at the offset it was told, in the order it was sent;
5. broker 1 restarts as a follower and rejoins the ISR.

There is no bound on how long the clients take: every wait is on an observable condition
with a generous deadline that fails with what it waited for. Each test prints its counts.
"""

import json
import logging
import os
import subprocess
import threading
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError, KafkaTimeoutError

from conftest import ROOT, Cluster, wait_for

FIRST = 20  # records of the first batch, acknowledged before the kill
AFTER_KILL = 20  # records the producer still sends once the kill has been answered
BEFORE_KILL = 5  # second-batch records acknowledged before broker 1 is killed
WINDOW = 5  # records a producer may have unanswered (kafka-python pipelines them)


@pytest.fixture
def cluster():
    c = Cluster(3)
    yield c
    c.stop()


def create_topic(cluster, topic):
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, client_id="failover-admin")
    try:
        admin.create_topics([NewTopic(topic, 1, 3, topic_configs={"min.insync.replicas": "2"})])
    finally:
        admin.close()
    wait_for(f"{topic} led by broker 1 with a full ISR",
             lambda: (cluster.partition(topic) or {}).get("isr") == [1, 2, 3], timeout=30)
    assert cluster.partition(topic)["leader"] == 1, "partition 0 of a new topic is led by broker 1"


def kill_leader(cluster, topic):
    """Kills broker 1 and checks the controller's answer: one clean election, epoch 1."""
    killed = cluster.broker(1, "kill")
    elected = [c for c in killed["changes"]
               if c["type"] == "leader_elected" and c["tp"]["topic"] == topic and c["tp"]["partition"] == 0]
    assert len(elected) == 1, f"one election for {topic}-0 in the kill's answer: {killed['changes']}"
    assert elected[0]["clean"], f"a clean election from the ISR: {elected[0]}"
    assert elected[0]["leader_epoch"] == 1, f"leader epoch 0 -> 1: {elected[0]}"
    new_leader = elected[0]["new_leader"]
    assert new_leader in (2, 3), elected[0]
    assert [b["alive"] for b in cluster.get("/api/brokers")] == [False, True, True]
    return new_leader


def restart_old_leader(cluster, topic, new_leader):
    cluster.broker(1, "restart")
    wait_for("broker 1 to catch up and rejoin the ISR of " + topic,
             lambda: sorted(cluster.partition(topic)["isr"]) == [1, 2, 3], timeout=60)
    p = cluster.partition(topic)
    assert p["leader"] == new_leader and p["leader_epoch"] == 1, p


def check_read_back(client, sent, acked, failed, stored):
    """sent: values in send order; acked: [(value, offset)] the producer was told are
    stored; failed: [(value, error)]; stored: [(offset, value)] read from the new leader.
    Prints the counts, then asserts that nothing acknowledged is lost, doubled, misplaced
    or out of order."""
    values = [v for _, v in stored]
    at = dict(stored)
    acked_values = {v for v, _ in acked}
    lost = [v for v, _ in acked if v not in at.values()]
    duplicates = len(values) - len(set(values))
    print(f"\n{client}: {len(sent)} sent, {len(acked)} acknowledged, {len(failed)} failed, "
          f"{len(stored)} read back, {len(lost)} lost, {duplicates} duplicates")
    assert failed == [], f"{client}: records the producer gave up on: {failed[:5]}"
    assert len(acked) == len(sent) and acked_values == set(sent), f"{client}: every record sent was acknowledged"
    assert lost == [], f"{client}: acknowledged and not read back: {lost}"
    assert duplicates == 0, f"{client}: records read back twice: {[v for v in set(values) if values.count(v) > 1]}"
    assert [o for o, _ in stored] == list(range(len(stored))), f"{client}: offsets read back are 0..N-1"
    wrong = [(v, o, at.get(o)) for v, o in acked if at.get(o) != v]
    assert wrong == [], f"{client}: (record, offset acknowledged, record found there): {wrong[:5]}"
    assert [v for v in values if v in acked_values] == sent, f"{client}: records read back in the order sent"


class ClientLog(logging.Handler):
    """kafka-python's warnings and errors: what it saw of the kill."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(f"{record.name}: {record.getMessage()}")


def test_kafka_python_produces_and_consumes_across_a_leader_kill(cluster):
    topic = "failover-kafka-python"
    create_topic(cluster, topic)
    log = ClientLog()
    logging.getLogger("kafka").addHandler(log)
    # What kafka-python does on the kill: the connection to broker 1 closes under the
    # batches in flight ("Error sending produce request to node 1: KafkaConnectionError:
    # socket disconnected", then "Got error produce response ... retrying (19 attempts
    # left)"), and its reconnect is refused (ECONNREFUSED). A retriable error asks for a
    # metadata refresh, which (from broker 2 or 3) names the new leader, and the batches are
    # retried there after retry_backoff_ms with the same producer id and sequence numbers, so
    # the new leader writes each once. (A produce reaching a broker no longer leader would
    # get NotLeaderForPartitionError, retried the same way.)
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap,
        client_id="failover-kafka-python",
        acks="all",
        enable_idempotence=True,
        retries=20,
        retry_backoff_ms=100,
        reconnect_backoff_ms=50,
        reconnect_backoff_max_ms=1000,
        request_timeout_ms=10000,
        delivery_timeout_ms=60000,
        max_in_flight_requests_per_connection=WINDOW,
        linger_ms=0,
    )
    sent, acked, failed = [], [], []
    lock = threading.Lock()
    killed = threading.Event()

    def send(value):
        sent.append(value)
        future = producer.send(topic, value.encode(), partition=0)

        def ok(md):
            with lock:
                acked.append((value, md.offset))

        def bad(e):
            with lock:
                failed.append((value, repr(e)))

        future.add_callback(ok)
        future.add_errback(bad)
        return future

    try:
        for i in range(FIRST):
            send(f"first-{i}")
        producer.flush(timeout=60)
        assert len(acked) == FIRST and not failed, (acked, failed)

        errors = []

        def keep_producing():
            """The second batch: records go on being sent, WINDOW at most unanswered, until
            AFTER_KILL of them have been sent after the kill was answered."""
            try:
                futures, after = [], 0
                while after < AFTER_KILL and len(futures) < 100000:
                    if len(futures) >= WINDOW:
                        # Until the record WINDOW back is answered, either way (the callbacks
                        # keep which); 90 s is a deadline, not a time bound.
                        try:
                            futures[-WINDOW].get(timeout=90)
                        except KafkaTimeoutError:
                            if not futures[-WINDOW].is_done:
                                raise AssertionError("a record unanswered for 90 s") from None
                        except KafkaError:
                            pass
                    if killed.is_set():
                        after += 1
                    futures.append(send(f"second-{len(futures)}"))
            except BaseException as e:  # noqa: BLE001 - reported by the main thread
                errors.append(e)

        producing = threading.Thread(target=keep_producing, name="second-batch", daemon=True)
        producing.start()
        wait_for(f"{BEFORE_KILL} records of the second batch acknowledged",
                 lambda: len(acked) >= FIRST + BEFORE_KILL, timeout=30)
        new_leader = kill_leader(cluster, topic)
        in_flight_at_kill = len(sent) - len(acked) - len(failed)
        killed.set()
        producing.join(timeout=120)
        assert not producing.is_alive(), "the second batch's producer thread did not finish"
        assert not errors, errors
        producer.flush(timeout=90)
        wait_for("every record sent answered", lambda: len(acked) + len(failed) == len(sent), timeout=90)
    finally:
        killed.set()  # a failed check before the kill must not leave the thread producing
        producer.close(timeout=10)
        logging.getLogger("kafka").removeHandler(log)
    print(f"\nkafka-python: killed broker 1 with {in_flight_at_kill} records unanswered; new leader {new_leader}")
    for line in sorted(set(log.lines))[:15]:
        print("  client log:", line)

    p = cluster.partition(topic)
    assert p["leader"] == new_leader and p["leader_epoch"] == 1 and 1 not in p["isr"], p
    end = p["high_watermark"]
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.listeners[new_leader],
        client_id="failover-reader",
        group_id=None,
        enable_auto_commit=False,
        retry_backoff_ms=100,
    )
    stored = []
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = time.time() + 60
        while len(stored) < end:
            assert time.time() < deadline, f"read {len(stored)} of {end} records from broker {new_leader}"
            for records in consumer.poll(timeout_ms=500).values():
                stored.extend((r.offset, r.value.decode()) for r in records)
    finally:
        consumer.close()
    check_read_back("kafka-python", sent, acked, failed, stored)
    restart_old_leader(cluster, topic, new_leader)


def test_kafkajs_produces_and_consumes_across_a_leader_kill(cluster):
    """tests/node/kafkajs_failover.js does steps 1-4 with kafkajs (what it does on the kill
    is said there) and prints what it saw; the checks are here."""
    topic = "failover-kafkajs"
    out = subprocess.run(
        ["node", os.path.join(ROOT, "tests", "node", "kafkajs_failover.js"), cluster.admin, topic],
        capture_output=True, text=True, timeout=180,
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    elected = seen["elected"]
    assert elected["clean"], f"a clean election from the ISR: {seen['changes']}"
    assert elected["leader_epoch"] == 1, f"leader epoch 0 -> 1: {elected}"
    new_leader = seen["newLeader"]
    assert new_leader in (2, 3), elected
    assert [b["alive"] for b in cluster.get("/api/brokers")] == [False, True, True]
    print(f"\nkafkajs: killed broker 1 with {seen['unansweredAtKill']} record unanswered; new leader {new_leader}")
    for line in sorted(set(seen["clientLog"]))[:15]:
        print("  client log:", line)
    for line in seen["killLog"]:
        print("  after the kill:", line)
    p = cluster.partition(topic)
    assert p["leader"] == new_leader and p["leader_epoch"] == 1 and 1 not in p["isr"], p
    assert seen["end"] == p["high_watermark"]
    check_read_back("kafkajs", seen["sent"], [tuple(a) for a in seen["acked"]], seen["failed"],
                    [tuple(s) for s in seen["stored"]])
    restart_old_leader(cluster, topic, new_leader)
