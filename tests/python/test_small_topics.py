"""acks=all on topics with one or two replicas, from every client.

The broker's min.insync.replicas is 2, like many real clusters'. The minimum in force is
min(min.insync.replicas, replication factor), as Kafka's `effectiveMinIsr`: a topic with one
replica takes acks=all writes at once (the leader is the whole ISR), a topic with two waits
for follower 2. Each client creates its topics with its own admin API, produces with
acks=all, and the records are read back.
"""

import json
import os
import subprocess

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic as CkNewTopic
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic as PyNewTopic

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def read_back(bootstrap, topic, count):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    for _ in range(300):
        if len(values) == count:
            break
        msg = consumer.poll(0.1)
        if msg is not None and not msg.error():
            values.append(msg.value().decode())
    consumer.close()
    return values


def replicas_of(broker, topic):
    partition = next(p for p in broker.state()["partitions"] if p["topic"] == topic)
    return partition["replicas"], partition["effective_min_isr"]


@pytest.mark.parametrize("replicas", [1, 2])
def test_confluent_kafka(broker, replicas):
    topic = f"ck-rf{replicas}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([CkNewTopic(topic, 1, replicas)])[topic].result(timeout=30)
    assert replicas_of(broker, topic) == (list(range(1, replicas + 1)), replicas)

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0,
                         "message.timeout.ms": 20000})
    reports = []
    for i in range(10):
        producer.produce(topic, f"m{i}".encode(), on_delivery=lambda err, msg: reports.append((err, msg.offset())))
        producer.flush(20)
    assert [err for err, _ in reports] == [None] * 10
    assert [offset for _, offset in reports] == list(range(10))
    assert read_back(broker.bootstrap, topic, 10) == [f"m{i}" for i in range(10)]


@pytest.mark.parametrize("replicas", [1, 2])
def test_kafka_python(broker, replicas):
    topic = f"py-rf{replicas}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        created = admin.create_topics([PyNewTopic(topic, 1, replicas)])
        assert [t["error_code"] for t in created["topics"]] == [0]
    finally:
        admin.close()
    # kafka-python 3's defaults: acks=all and idempotence.
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0, request_timeout_ms=20000)
    offsets = [producer.send(topic, f"m{i}".encode()).get(timeout=30).offset for i in range(10)]
    producer.close()
    assert offsets == list(range(10))
    assert read_back(broker.bootstrap, topic, 10) == [f"m{i}" for i in range(10)]


@pytest.mark.parametrize("replicas", [1, 2])
def test_kafkajs(broker, replicas):
    topic = f"kjs-rf{replicas}"
    out = subprocess.run(
        ["node", os.path.join(ROOT, "tests", "node", "kafkajs_check.js"), broker.bootstrap, topic, str(replicas)],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["created"] is True
    assert seen["partition"]["replicas"] == list(range(1, replicas + 1))
    assert seen["offsets"] == list(range(20))
    assert seen["high"] == 20


@pytest.mark.parametrize("replicas", [1, 2])
def test_kcat(broker, replicas):
    topic = f"kcat-rf{replicas}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([CkNewTopic(topic, 1, replicas)])[topic].result(timeout=30)
    lines = "".join(f"line {i}\n" for i in range(5))
    out = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-P", "-t", topic, "-X", "acks=all",
         "-X", "message.timeout.ms=20000"],
        input=lines, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert read_back(broker.bootstrap, topic, 5) == [f"line {i}" for i in range(5)]
