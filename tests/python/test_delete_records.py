"""DeleteRecords from confluent-kafka's AdminClient, and the DeleteRecords purgatory.

The leader moves its log start at once; the answer waits until both followers have
dropped the records too and said so in a fetch. With the followers paused it waits in the
DeleteRecords purgatory, visible in /api/state and /metrics, until its operation timeout
answers REQUEST_TIMED_OUT; resumed, they catch up and the next deletion completes.
"""

import urllib.request

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import Cluster, wait_for


def admin(target):
    return AdminClient({"bootstrap.servers": target.bootstrap})


def create(target, topic):
    client = admin(target)  # kept until the future is done: its handle answers it
    client.create_topics([NewTopic(topic, 1, 3)])[topic].result(10)


def produce(target, topic, count):
    producer = Producer({"bootstrap.servers": target.bootstrap, "acks": "all"})
    for i in range(count):
        producer.produce(topic, f"r{i}".encode(), partition=0)
    assert producer.flush(20) == 0


def delete(target, topic, offset, timeout=10.0):
    tp = TopicPartition(topic, 0, offset)
    client = admin(target)
    futures = client.delete_records([tp], operation_timeout=timeout, request_timeout=timeout + 20)
    return futures[tp].result(timeout + 30)


def earliest(target, topic):
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": "earliest"})
    try:
        low, _high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return low
    finally:
        consumer.close()


def partition_state(broker, topic):
    return next(p for p in broker.state()["partitions"] if p["topic"] == topic and p["partition"] == 0)


def metric(broker, name, **labels):
    with urllib.request.urlopen(broker.admin + "/metrics", timeout=5) as r:
        text = r.read().decode()
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(f"{name}{{{want}}}"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name}{{{want}}} in /metrics")


def test_delete_records_moves_the_log_start_on_every_replica(broker):
    create(broker, "dr-basic")
    produce(broker, "dr-basic", 10)
    deleted = delete(broker, "dr-basic", 4)
    assert deleted.low_watermark == 4
    assert earliest(broker, "dr-basic") == 4
    # The answer came once both followers reported the new start in a fetch.
    followers = partition_state(broker, "dr-basic")["followers"]
    assert [f["log_start_offset"] for f in followers] == [4, 4], followers
    # A consumer from the beginning starts at the new log start.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dr-read",
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition("dr-basic", 0, -2)])  # OFFSET_BEGINNING
        msg = None
        while msg is None or msg.error() is not None:
            msg = consumer.poll(10)
            assert msg is not None, "nothing read"
        assert (msg.offset(), msg.value()) == (4, b"r4")
    finally:
        consumer.close()
    # -1 deletes up to the high watermark; above it is OFFSET_OUT_OF_RANGE.
    assert delete(broker, "dr-basic", -1).low_watermark == 10
    with pytest.raises(KafkaException) as refused:
        delete(broker, "dr-basic", 11)
    assert refused.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE


def test_paused_followers_hold_delete_records_in_its_purgatory_until_it_times_out(broker):
    create(broker, "dr-held")
    produce(broker, "dr-held", 5)
    for follower in (2, 3):
        broker.follower(follower, "pause")
    try:
        tp = TopicPartition("dr-held", 0, 3)
        client = admin(broker)
        future = client.delete_records([tp], operation_timeout=3, request_timeout=30)[tp]
        wait_for("the DeleteRecords to park",
                 lambda: broker.state()["purgatories"]["delete_records"]["delayed"] == 1)
        assert metric(broker, "kafka_server_delayedoperationpurgatory_numdelayedoperations",
                      delayedOperation="DeleteRecords") == 1
        pending = broker.state()["purgatories"]["delete_records"]["pending"]
        assert "DelayedDeleteRecords" in pending[0]["description"], pending
        # The leader deleted at once; the followers have not heard of it.
        assert partition_state(broker, "dr-held")["log_start_offset"] == 3
        with pytest.raises(KafkaException) as timed_out:
            future.result(30)
        assert timed_out.value.args[0].code() == KafkaError.REQUEST_TIMED_OUT
        assert broker.state()["purgatories"]["delete_records"]["expired"] >= 1
    finally:
        for follower in (2, 3):
            broker.follower(follower, "resume")
    # Resumed, the followers take the new start, and a deletion now completes.
    assert delete(broker, "dr-held", 3).low_watermark == 3


def test_delete_records_in_a_cluster_waits_for_the_follower_brokers():
    cluster = Cluster(brokers=3)
    try:
        create(cluster, "dr-cluster")
        produce(cluster, "dr-cluster", 8)
        assert delete(cluster, "dr-cluster", 5).low_watermark == 5
        # Every broker's copy now starts at 5: the followers truncated their front.
        state = cluster.state()
        copies = [p for p in state["partitions"] if p["topic"] == "dr-cluster"]
        assert copies and all(p["log_start_offset"] == 5 for p in copies), copies
    finally:
        cluster.stop()
