"""Transactions on three brokers (`serve --brokers 3`), with confluent-kafka as a user
writes them.

In a cluster the parts of one transaction live on different brokers, as in Kafka: the
coordinator of a transactional id is the leader of the id's `__transaction_state`
partition; each marker is written by the leader of its partition; a group's offsets are
committed by the group's coordinator. These tests put a transaction's partitions on all
three brokers, and then kill the transaction's coordinator while the transaction is open:
the new leader of its `__transaction_state` partition loads the transaction from its copy
of the log, and the producer commits it there.
"""

import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import Cluster, wait_for

PARTITIONS = 3


@pytest.fixture
def cluster():
    c = Cluster(3)
    yield c
    c.stop()


def java_hash(s):
    """Java's String.hashCode, as Kafka places an id in a partition by it."""
    h, units = 0, s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def coordinator_partition(transactional_id, partitions=50):
    h = java_hash(transactional_id)
    return 0 if h == -(1 << 31) else abs(h) % partitions


def spread_topic(cluster):
    """A topic whose partitions are led by brokers 1, 2 and 3."""
    name = "txn-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 3)])[name].result(30)
    wait_for(f"{name} with a full ISR everywhere", lambda: all(
        len((cluster.partition(name, i) or {}).get("isr", [])) == 3 for i in range(PARTITIONS)), timeout=30)
    leaders = sorted(cluster.partition(name, i)["leader"] for i in range(PARTITIONS))
    assert leaders == [1, 2, 3], f"one partition led by each broker: {leaders}"
    return name


def read(cluster, topic, partition, isolation, expect):
    """Values of one partition from offset 0 with `isolation`, until `expect` are read
    (the records past them, if any, are read too: the consumer reads to the end)."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "r-" + uuid.uuid4().hex[:6],
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        got, at_end = [], False
        for _ in range(300):
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                at_end = len(got) >= expect
                if at_end:
                    break
                continue
            got.append(m.value().decode())
        assert at_end, f"{isolation} read of {topic}-{partition} reached its end: {got}"
        return got
    finally:
        c.close()


def test_a_transaction_over_partitions_of_three_leaders_commits_and_aborts_on_each(cluster):
    topic = spread_topic(cluster)
    p = Producer({"bootstrap.servers": cluster.bootstrap,
                  "transactional.id": "spread-" + uuid.uuid4().hex[:6], "linger.ms": 0})
    p.init_transactions(60)
    p.begin_transaction()
    for part in range(PARTITIONS):
        p.produce(topic, f"committed-{part}".encode(), partition=part)
    p.commit_transaction(60)
    p.begin_transaction()
    for part in range(PARTITIONS):
        p.produce(topic, f"aborted-{part}".encode(), partition=part)
    assert p.flush(30) == 0
    p.abort_transaction(60)
    for part in range(PARTITIONS):
        # Each partition's leader wrote the markers: read_committed sees the commit's record
        # and not the abort's, read_uncommitted sees both; each log ends after two markers.
        assert read(cluster, topic, part, "read_committed", 1) == [f"committed-{part}"]
        assert read(cluster, topic, part, "read_uncommitted", 2) == [f"committed-{part}", f"aborted-{part}"]
        state = cluster.partition(topic, part)
        assert state["last_stable_offset"] == state["high_watermark"] == 4, state
    log = cluster.partition("__transaction_state", 0)
    assert log is not None and len(log["replicas"]) == 3, "__transaction_state has three replicas"


def test_an_open_transaction_is_committed_through_the_new_coordinator_after_its_coordinator_is_killed(cluster):
    topic = spread_topic(cluster)
    tid = "moving-" + uuid.uuid4().hex[:6]
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid, "linger.ms": 0})
    p.init_transactions(60)
    p.begin_transaction()
    for part in range(PARTITIONS):
        p.produce(topic, f"kept-{part}".encode(), partition=part)
    assert p.flush(30) == 0, "every record acknowledged (acks=all) before the kill"
    state_partition = coordinator_partition(tid)
    coordinator = cluster.partition("__transaction_state", state_partition)["leader"]
    killed = cluster.broker(coordinator, "kill")
    moved = [c for c in killed["changes"] if c["type"] == "leader_elected"
             and c["tp"] == {"topic": "__transaction_state", "partition": state_partition}]
    assert len(moved) == 1 and moved[0]["new_leader"] != coordinator, killed["changes"]
    # The client finds the new coordinator (NOT_COORDINATOR, then FindCoordinator); it
    # knows the open transaction and its partitions from its log, and writes the markers
    # to the partitions' leaders of now.
    p.commit_transaction(60)
    for part in range(PARTITIONS):
        assert read(cluster, topic, part, "read_committed", 1) == [f"kept-{part}"]
    # The id goes on from there: the next transaction works as before.
    p.begin_transaction()
    p.produce(topic, b"after", partition=0)
    p.commit_transaction(60)
    assert read(cluster, topic, 0, "read_committed", 2) == ["kept-0", "after"]
    cluster.broker(coordinator, "restart")
