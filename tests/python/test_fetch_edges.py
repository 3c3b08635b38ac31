"""A consumer whose position is outside the log resets by its `auto.offset.reset`.

Kafka answers a fetch offset above the log end, or below the log start, with
OFFSET_OUT_OF_RANGE, and the client then asks ListOffsets for the earliest or latest offset.
Here with confluent-kafka (librdkafka) and kafka-python, from above the log end and from
below a log start that retention moved. And a consumer with nothing to read waits for
each fetch's `max_wait_ms` rather than fetching again at once: the broker never spins.
"""

import time
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from conftest import wait_for


def create(broker, topic, config=None):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(topic, 1, 1, config=config or {})])
    futures[topic].result(10)


def produce(broker, topic, values):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for value in values:
        producer.produce(topic, value.encode(), partition=0)
    assert producer.flush(10) == 0


def requests(broker, request):
    """How many `request`s (Kafka's request metric name) the broker has answered."""
    with urllib.request.urlopen(broker.admin + "/metrics", timeout=5) as r:
        text = r.read().decode()
    total = 0
    prefix = f'kafka_network_requestmetrics_requests_total{{request="{request}"'
    for line in text.splitlines():
        if line.startswith(prefix):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def confluent_read(broker, topic, offset, reset, want, group):
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "auto.offset.reset": reset,
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 500,
    })
    try:
        consumer.assign([TopicPartition(topic, 0, offset)])
        got = []
        deadline = time.time() + 20
        while len(got) < want and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append((msg.offset(), msg.value().decode()))
        return got
    finally:
        consumer.close()


def test_confluent_kafka_resets_to_earliest_from_above_the_log_end(broker):
    create(broker, "oor-earliest")
    produce(broker, "oor-earliest", ["a", "b", "c"])
    got = confluent_read(broker, "oor-earliest", 999, "earliest", 3, "oor-1")
    assert got == [(0, "a"), (1, "b"), (2, "c")]


def test_confluent_kafka_resets_to_latest_and_reads_what_comes_next(broker):
    create(broker, "oor-latest")
    produce(broker, "oor-latest", ["old"])
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": "oor-2",
        "auto.offset.reset": "latest",
        "enable.auto.commit": False,
    })
    try:
        asked = requests(broker, "ListOffsets")
        consumer.assign([TopicPartition("oor-latest", 0, 999)])
        # The reset asks ListOffsets for the log end (1) before anything new is written.
        wait_for("the reset's ListOffsets",
                 lambda: consumer.poll(0.1) is None and requests(broker, "ListOffsets") > asked)
        produce(broker, "oor-latest", ["new"])
        got = []
        deadline = time.time() + 20
        while not got and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append((msg.offset(), msg.value().decode()))
        assert got == [(1, "new")]
    finally:
        consumer.close()


def test_kafka_python_resets_from_below_a_log_start_that_retention_moved(broker):
    # Four batches of one record (about 70 bytes each) and retention.bytes 100: only the
    # newest is kept, so the log start passes offset 0.
    create(broker, "oor-retained", {"retention.bytes": "100"})
    for value in ["x0", "x1", "x2", "x3"]:
        produce(broker, "oor-retained", [value])
    start = broker.state()
    part = next(p for p in start["partitions"] if p["topic"] == "oor-retained")
    assert part["log_start_offset"] > 0, part
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=500,
    )
    try:
        tp = KpTopicPartition("oor-retained", 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got = []
        deadline = time.time() + 20
        while not got and time.time() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(records)
        assert got, "no record after the reset"
        assert got[0].offset == part["log_start_offset"]
        assert got[-1].value == b"x3"
    finally:
        consumer.close()


def test_a_consumer_with_nothing_to_read_waits_for_each_fetch(broker):
    """librdkafka fetches again as soon as an answer comes. At 500 ms per fetch a consumer
    makes at most two fetches a second; a broker that answered at once made ~17,000."""
    create(broker, "idle")
    produce(broker, "idle", ["only"])
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": "idle",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 500,
    })
    try:
        # From out of range: the consumer resets, reads the one record, then sits at the end.
        consumer.assign([TopicPartition("idle", 0, 999)])
        first = None
        deadline = time.time() + 20
        while first is None and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                first = msg
        assert first is not None and first.value() == b"only"
        before, started = requests(broker, "FetchConsumer"), time.time()
        while time.time() - started < 3:
            assert consumer.poll(0.5) is None
        fetches, elapsed = requests(broker, "FetchConsumer") - before, time.time() - started
        # Each waits 500 ms; one more may have been in flight when the count began.
        assert fetches <= elapsed / 0.5 + 2, f"{fetches} fetches in {elapsed:.1f} s"
        assert fetches >= 1, "the consumer kept fetching"
    finally:
        consumer.close()
