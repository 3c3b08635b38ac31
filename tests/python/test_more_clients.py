"""More independent clients: confluent-kafka (a newer librdkafka than the rdkafka crate's)
and kafkajs (its own protocol implementation, in JavaScript)."""

import json
import os
import subprocess

from confluent_kafka import Consumer, Producer, TopicPartition

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_confluent_kafka_idempotent_zstd_acks_all_round_trip(broker):
    producer = Producer({
        "bootstrap.servers": broker.bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 0,
        "compression.type": "zstd",
    })
    reports = []
    for i in range(50):
        producer.produce("ck-topic", f"ck {i}".encode(), on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert producer.flush(30) == 0
    assert [err for err, _ in reports if err] == []
    assert sorted(offset for _, offset in reports) == list(range(50))

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ck-readback", "enable.auto.commit": False})
    consumer.assign([TopicPartition("ck-topic", 0, 0)])
    values = []
    for _ in range(200):
        if len(values) == 50:
            break
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            values.append(msg.value().decode())
    consumer.close()
    assert values == [f"ck {i}" for i in range(50)]


def test_kafkajs_admin_and_idempotent_acks_all_producer(broker):
    out = subprocess.run(
        ["node", os.path.join(ROOT, "tests", "node", "kafkajs_check.js"), broker.bootstrap, "kjs-topic"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["created"] is True
    assert seen["partition"]["replicas"] == [1, 2, 3]
    assert seen["partition"]["isr"] == [1, 2, 3]
    assert seen["offsets"] == list(range(20))
    assert seen["high"] == 20


def test_kafkajs_transactions_commit_and_abort_as_read_committed_sees_them(broker):
    out = subprocess.run(
        ["node", os.path.join(ROOT, "tests", "node", "kafkajs_txn.js"), broker.bootstrap, "kjs-txn"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["committed"] == ["committed-1", "committed-2", "committed-3"]
    assert seen["uncommitted"] == ["committed-1", "committed-2", "aborted-1", "committed-3"]
