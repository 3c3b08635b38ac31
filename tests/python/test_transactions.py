"""Transactions with confluent-kafka, as a user writes them: commit and abort seen by
read_committed and read_uncommitted consumers, an open transaction holding back the
records after it (the last stable offset), a zombie fenced by a second producer with the
same transactional.id, consume-transform-produce whose group offsets appear only on
commit, and a transaction that outlives its timeout aborted by the coordinator.
"""

import json
import os
import re
import subprocess
import tempfile
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import BINARY, ROOT, Broker, wait_for


def new_topic(broker, partitions=1):
    name = "txn-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3)])[name].result(10)
    return name


def transactional(broker, transactional_id=None, **extra):
    p = Producer({"bootstrap.servers": broker.bootstrap,
                  "transactional.id": transactional_id or "tid-" + uuid.uuid4().hex[:8],
                  "linger.ms": 0, **extra})
    p.init_transactions(30)
    return p


def read(broker, topic, isolation, until=None, partition=0, settle=1.0):
    """Values of `topic`'s partition from offset 0, read with `isolation`: until `until`
    values are there, then `settle` seconds more to catch anything beyond them."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "r-" + uuid.uuid4().hex[:6],
                  "isolation.level": isolation, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        got = []
        deadline = time.time() + 20
        while (until is None or len(got) < until) and time.time() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value().decode())
            if until is None and time.time() > deadline - 20 + settle:
                break
        end = time.time() + settle
        while until is not None and time.time() < end:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value().decode())
        return got
    finally:
        c.close()


def partition_state(broker, topic):
    with urllib.request.urlopen(broker.admin + "/api/state", timeout=5) as r:
        return next(p for p in json.load(r)["partitions"] if p["topic"] == topic)


def test_commit_and_abort_as_read_committed_and_read_uncommitted_see_them(broker):
    topic = new_topic(broker)
    p = transactional(broker)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, f"committed-{i}".encode(), partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(2):
        p.produce(topic, f"aborted-{i}".encode(), partition=0)
    assert p.flush(30) == 0, "the aborted records are in the log before the abort"
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"after", partition=0)
    p.commit_transaction(30)
    committed = [f"committed-{i}" for i in range(3)]
    aborted = [f"aborted-{i}" for i in range(2)]
    assert read(broker, topic, "read_committed", until=4) == committed + ["after"]
    assert read(broker, topic, "read_uncommitted", until=6) == committed + aborted + ["after"]


def test_an_open_transaction_holds_back_later_records_from_read_committed(broker):
    topic = new_topic(broker)
    p = transactional(broker)
    p.begin_transaction()
    p.produce(topic, b"in-the-transaction", partition=0)
    assert p.flush(30) == 0
    plain = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(3):
        plain.produce(topic, f"plain-{i}".encode(), partition=0)
    assert plain.flush(30) == 0
    wait_for("the plain records to be replicated", lambda: partition_state(broker, topic)["high_watermark"] == 4)
    state = partition_state(broker, topic)
    assert state["last_stable_offset"] == 0, state
    with urllib.request.urlopen(broker.admin + "/api/state", timeout=5) as r:
        txns = {t["producer_id"]: t for t in json.load(r)["transactions"]}
    held = txns[state["open_transactions"][0]["producer_id"]]
    assert (held["state"], held["partitions"], held["timeout_ms"]) == ("Ongoing", [f"{topic}-0"], 60000)
    assert held["open_ms"] is not None and held["open_ms"] < held["timeout_ms"]
    ctl = subprocess.run([BINARY, "ctl", "--admin", broker.admin.removeprefix("http://"), "transactions"],
                         capture_output=True, text=True, timeout=30)
    line = next(l for l in ctl.stdout.splitlines() if l.startswith(held["transactional_id"]))
    assert re.fullmatch(rf"{held['transactional_id']}  Ongoing  producer {held['producer_id']} epoch 0, "
                        rf"open \d+\.\d s of 60\.0 s on \[{topic}-0\]", line), line
    assert read(broker, topic, "read_committed", settle=1.5) == [], "nothing past the LSO"
    assert read(broker, topic, "read_uncommitted", until=4)[1:] == ["plain-0", "plain-1", "plain-2"]
    p.commit_transaction(30)
    wait_for("the LSO to pass the marker", lambda: partition_state(broker, topic)["last_stable_offset"] == 5)
    assert read(broker, topic, "read_committed", until=4) == [
        "in-the-transaction", "plain-0", "plain-1", "plain-2"]


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(broker):
    topic = new_topic(broker)
    tid = "zombie-" + uuid.uuid4().hex[:6]
    zombie = transactional(broker, tid)
    zombie.begin_transaction()
    zombie.produce(topic, b"from-the-zombie", partition=0)
    assert zombie.flush(30) == 0
    successor = transactional(broker, tid)
    # The successor's InitProducerId aborted the zombie's open transaction and took the
    # next epoch: the zombie can no longer commit.
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(10)
    assert fenced.value.args[0].fatal() or fenced.value.args[0].txn_requires_abort(), fenced.value
    successor.begin_transaction()
    successor.produce(topic, b"from-the-successor", partition=0)
    successor.commit_transaction(30)
    assert read(broker, topic, "read_committed", until=1) == ["from-the-successor"]


def test_consume_transform_produce_commits_the_group_offsets_only_with_the_transaction(broker):
    source, sink = new_topic(broker), new_topic(broker)
    plain = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(4):
        plain.produce(source, f"in-{i}".encode(), partition=0)
    assert plain.flush(30) == 0
    group = "ctp-" + uuid.uuid4().hex[:6]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    p = transactional(broker)
    try:
        consumer.subscribe([source])
        seen = []
        deadline = time.time() + 30
        while len(seen) < 2 and time.time() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                seen.append(m)

        def transform_and_end(batch, commit):
            p.begin_transaction()
            for m in batch:
                p.produce(sink, m.value().replace(b"in", b"out"), partition=0)
            offsets = [TopicPartition(source, 0, batch[-1].offset() + 1)]
            p.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
            if commit:
                p.commit_transaction(30)
            else:
                assert p.flush(30) == 0
                p.abort_transaction(30)

        def committed():
            return consumer.committed([TopicPartition(source, 0)], 10)[0].offset

        transform_and_end(seen[:1], commit=False)
        assert committed() < 0, "an aborted transaction commits no offsets"
        transform_and_end(seen[:2], commit=True)
        wait_for("the transaction's offsets to reach the group", lambda: committed() == 2)
        assert read(broker, sink, "read_committed", until=2) == ["out-0", "out-1"]
    finally:
        consumer.close()


def test_a_transaction_past_its_timeout_is_aborted_by_the_coordinator():
    """On a manual clock the coordinator's timeout check runs as the clock moves: the
    transaction is aborted with its epoch bumped, the LSO jumps past it, and a
    read_committed consumer gets the records that came after it."""
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        with open(os.path.join(ROOT, "config", "broker.toml")) as base:
            f.write(base.read())
        f.write("\n\"transaction.abort.timed.out.transaction.cleanup.interval.ms\" = 1000\n")
    b = Broker(["--clock", "manual"], config=f.name)
    try:
        topic = new_topic(b)
        p = transactional(b, **{"transaction.timeout.ms": 5000})
        p.begin_transaction()
        p.produce(topic, b"left-open", partition=0)
        assert p.flush(30) == 0
        plain = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
        plain.produce(topic, b"after-it", partition=0)
        assert plain.flush(30) == 0
        wait_for("the plain record to be replicated", lambda: partition_state(b, topic)["high_watermark"] == 2)
        assert partition_state(b, topic)["last_stable_offset"] == 0
        req = urllib.request.Request(b.admin + "/api/clock/advance?ms=7000", data=b"", method="POST")
        urllib.request.urlopen(req, timeout=10).read()
        wait_for("the coordinator's abort to replicate", lambda: partition_state(b, topic)["last_stable_offset"] == 3)
        assert read(b, topic, "read_committed", until=1) == ["after-it"]
        with pytest.raises(KafkaException):
            p.commit_transaction(10)
    finally:
        b.stop()
        os.unlink(f.name)


def test_kafka_python_transactions_commit_and_abort(broker):
    """kafka-python's transactional KafkaProducer: commit, abort, commit, read back by
    confluent-kafka with read_committed and read_uncommitted."""
    from kafka import KafkaProducer
    topic = new_topic(broker)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-" + uuid.uuid4().hex[:6],
                      enable_idempotence=True)
    try:
        p.init_transactions()
        for values, commit in ((["committed-1", "committed-2"], True), (["aborted-1"], False),
                               (["committed-3"], True)):
            p.begin_transaction()
            for v in values:
                p.send(topic, v.encode(), partition=0).get(timeout=30)
            if commit:
                p.commit_transaction()
            else:
                p.abort_transaction()
    finally:
        p.close(timeout=5)
    assert read(broker, topic, "read_committed", until=3) == ["committed-1", "committed-2", "committed-3"]
    assert read(broker, topic, "read_uncommitted", until=4) == [
        "committed-1", "committed-2", "aborted-1", "committed-3"]
