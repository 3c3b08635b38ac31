"""The admin surface Kafka's tools call, with real clients, on three brokers in one process.

- CreatePartitions (confluent-kafka `AdminClient.create_partitions`): validate_only changes
  nothing, a count that is not an increase is INVALID_PARTITIONS, and the partitions added
  are led and replicated like the others: an acks=all record to one is acknowledged once
  its followers have it, Metadata (`list_topics`) lists it, and a consumer reads it back.
- OffsetDelete (kafka-python `KafkaAdminClient.delete_group_offsets`; confluent-kafka 2.x
  has no call for it): an active consumer group keeps the offsets of the topic it
  subscribes to (GROUP_SUBSCRIBED_TO_TOPIC) and loses those of another; an unknown group
  is GROUP_ID_NOT_FOUND; what it deletes stays deleted when the group's coordinator is
  killed and another broker takes over its `__consumer_offsets` partition.
- DescribeLogDirs (kafka-python `describe_log_dirs`; confluent-kafka 2.x has none either):
  each broker reports its one in-memory log directory with the partitions it hosts, leader
  and follower copies alike, and their sizes.
"""

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import GroupIdNotFoundError, GroupSubscribedToTopicError, NoError

from conftest import Cluster, wait_for


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(3)
    yield c
    c.stop()


def admin(cluster):
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def create(cluster, name, partitions):
    client = admin(cluster)  # held until the futures resolve: a freed client cancels them
    for f in client.create_topics([NewTopic(name, partitions, 3)]).values():
        f.result(30)
    for p in range(partitions):
        wait_for(f"{name}-{p} with a full ISR", lambda: len((cluster.partition(name, p) or {}).get("isr", [])) == 3)


def partition_count(cluster, name):
    return len(admin(cluster).list_topics(name, timeout=10).topics[name].partitions)


def grow(cluster, name, total, validate_only=False):
    client = admin(cluster)  # held until the future resolves
    futures = client.create_partitions([NewPartitions(name, total)], validate_only=validate_only)
    return futures[name].result(30)


def test_create_partitions_grows_a_topic_whose_new_partitions_take_acks_all_records(cluster):
    create(cluster, "grown", 2)

    grow(cluster, "grown", 5, validate_only=True)
    assert partition_count(cluster, "grown") == 2, "validate_only added partitions"
    for not_more in (2, 1):
        with pytest.raises(KafkaException) as refused:
            grow(cluster, "grown", not_more)
        assert refused.value.args[0].code() == KafkaError.INVALID_PARTITIONS, refused.value
    assert "Topic already has 2 partition(s)." in str(
        pytest.raises(KafkaException, grow, cluster, "grown", 2).value
    )

    grow(cluster, "grown", 4)
    metadata = admin(cluster).list_topics("grown", timeout=10).topics["grown"]
    assert sorted(metadata.partitions) == [0, 1, 2, 3]
    # The controller continues the topic's round robin: partition 2 is led by broker 3,
    # partition 3 by broker 1, every broker a replica of each.
    assert metadata.partitions[2].leader == 3
    assert metadata.partitions[3].leader == 1
    for p in (2, 3):
        assert sorted(metadata.partitions[p].replicas) == [1, 2, 3]
        wait_for(f"grown-{p} with a full ISR", lambda: len(cluster.partition("grown", p)["isr"]) == 3)

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
    delivered = []
    for i in range(10):
        producer.produce(
            "grown",
            value=f"new-{i}".encode(),
            partition=2 + i % 2,
            on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())),
        )
    assert producer.flush(30) == 0, "records still in flight"
    assert [e for e, _, _ in delivered if e is not None] == [], delivered
    assert sorted((p, o) for _, p, o in delivered) == [(p, o) for p in (2, 3) for o in range(5)]
    # acks=all was answered once the followers had the records: the HW is past them.
    for p in (2, 3):
        assert cluster.partition("grown", p)["high_watermark"] == 5

    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "grown-reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("grown", p, 0) for p in (2, 3)])
    seen = set()
    wait_for("the new partitions' records to be read back",
             lambda: seen.update(m.value().decode() for m in consumer.consume(10, 0.5) if not m.error())
             or len(seen) == 10)
    consumer.close()
    assert seen == {f"new-{i}" for i in range(10)}


def test_delete_group_offsets_keeps_what_an_active_group_reads(cluster):
    create(cluster, "kept", 1)
    create(cluster, "dropped", 1)
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "keepers",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["kept"])
    wait_for("the consumer to be assigned kept-0",
             lambda: consumer.poll(0.2) is None and consumer.assignment() != [])
    consumer.commit(
        offsets=[TopicPartition("kept", 0, 4), TopicPartition("dropped", 0, 7)], asynchronous=False
    )

    kafka_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        results = kafka_admin.delete_group_offsets(
            "keepers", [KafkaTopicPartition("kept", 0), KafkaTopicPartition("dropped", 0)]
        )
        assert results == {
            KafkaTopicPartition("kept", 0): GroupSubscribedToTopicError,
            KafkaTopicPartition("dropped", 0): NoError,
        }
        committed = {
            (tp.topic, tp.partition): tp.offset
            for tp in consumer.committed([TopicPartition("kept", 0), TopicPartition("dropped", 0)], 10)
        }
        assert committed[("kept", 0)] == 4, "the subscribed topic keeps its offset"
        assert committed[("dropped", 0)] < 0, "deleted: no committed offset"

        with pytest.raises(GroupIdNotFoundError):
            kafka_admin.delete_group_offsets("nobody-here", [KafkaTopicPartition("kept", 0)])
    finally:
        consumer.close()
        kafka_admin.close()


def test_describe_log_dirs_lists_every_hosted_copy_in_the_in_memory_dir(cluster):
    create(cluster, "sized", 1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(3):
        producer.produce("sized", value=b"x" * 100, partition=0)
    assert producer.flush(30) == 0
    kafka_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        answers = kafka_admin.describe_log_dirs(topic_partitions={"sized": [0]})
    finally:
        kafka_admin.close()
    assert sorted(a["broker"] for a in answers) == [1, 2, 3]
    sizes = {}
    for answer in answers:
        (log_dir,) = answer["log_dirs"]
        assert log_dir["error_code"] == 0
        assert log_dir["log_dir"] == "/memory"
        (topic,) = log_dir["topics"]
        assert topic["name"] == "sized"
        (partition,) = topic["partitions"]
        assert partition["partition_index"] == 0
        assert partition["offset_lag"] == 0
        assert partition["is_future_key"] is False
        sizes[answer["broker"]] = partition["partition_size"]
    # The leader's log and both followers' copies hold the same batches.
    assert len(set(sizes.values())) == 1 and sizes[1] > 300, sizes


def offsets_partition(group, partitions=50):
    """The `__consumer_offsets` partition of `group`: abs(Java's String.hashCode) % 50."""
    h = 0
    for unit in group.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def test_deleted_offsets_stay_deleted_when_the_coordinator_fails_over(cluster):
    # The deletion is a tombstone in __consumer_offsets, replicated before the answer: the
    # broker elected in the coordinator's place replays it after the commit and ends
    # without the offset. (Had only the old coordinator's memory forgotten it, the new one
    # would read the commit back.)
    create(cluster, "moved", 2)
    group = "movers"
    committer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False})
    committer.commit(offsets=[TopicPartition("moved", 0, 4), TopicPartition("moved", 1, 9)], asynchronous=False)
    committer.close()
    kafka_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        assert kafka_admin.delete_group_offsets(group, [KafkaTopicPartition("moved", 0)]) == {
            KafkaTopicPartition("moved", 0): NoError
        }
    finally:
        kafka_admin.close()

    p = offsets_partition(group)
    coordinator = cluster.partition("__consumer_offsets", p)["leader"]
    cluster.broker(coordinator, "kill")
    wait_for(f"__consumer_offsets-{p} to fail over",
             lambda: cluster.partition("__consumer_offsets", p)["leader"] not in (-1, coordinator))
    try:
        reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False})
        committed = {
            tp.partition: tp.offset
            for tp in reader.committed([TopicPartition("moved", 0), TopicPartition("moved", 1)], 30)
        }
        reader.close()
        assert committed[1] == 9, "the offset not deleted is still there"
        assert committed[0] < 0, "the deleted offset came back on the new coordinator"
    finally:
        cluster.broker(coordinator, "restart")
