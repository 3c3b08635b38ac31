"""Consumer groups with real clients: confluent-kafka (librdkafka), kafka-python's
KafkaConsumer, kafkajs and `kcat -G`. Each consumes through the group coordinator — join,
sync, heartbeats, offset commits to __consumer_offsets replicated by the embedded
followers — and each test checks what was read and what was committed."""

import json
import os
import subprocess
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import wait_for

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def create_topic(broker, name, partitions, replication=3):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, replication)]).values():
        future.result(30)


def produce(broker, topic, messages):
    """messages: [(partition, value)], written with acks=all; returns their offsets."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
    reports = []
    for partition, value in messages:
        producer.produce(topic, value.encode(), partition=partition,
                         on_delivery=lambda err, msg: reports.append((err, msg.partition(), msg.offset())))
    assert producer.flush(30) == 0
    assert [r for r in reports if r[0]] == []
    return reports


def group_state(broker, group):
    groups = broker.state()["groups"]["list"]
    return next((g for g in groups if g["group_id"] == group), None)


def consumer(broker, group, **extra):
    config = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
    }
    config.update(extra)
    return Consumer(config)


def poll_into(c, into, timeout=0.1):
    msg = c.poll(timeout)
    if msg is not None and not msg.error():
        into.append((msg.partition(), msg.offset(), msg.value().decode()))


def test_confluent_kafka_two_consumers_split_four_partitions_and_a_new_member_resumes(broker):
    topic, group = "ck-split", "ck-split-group"
    create_topic(broker, topic, 4)
    c1, c2 = consumer(broker, group), consumer(broker, group)
    c1.subscribe([topic])
    c2.subscribe([topic])
    got1, got2 = [], []

    def both_have_two():
        poll_into(c1, got1)
        poll_into(c2, got2)
        g = group_state(broker, group)
        return (len(c1.assignment()) == 2 and len(c2.assignment()) == 2
                and g is not None and g["state"] == "Stable")

    wait_for("the two consumers to split the four partitions", both_have_two, 60)
    g = group_state(broker, group)
    assert len(g["members"]) == 2
    assert sorted(m["assigned_partitions"] for m in g["members"]) == [2, 2]
    mine1 = {tp.partition for tp in c1.assignment()}
    mine2 = {tp.partition for tp in c2.assignment()}
    assert mine1.isdisjoint(mine2) and mine1 | mine2 == {0, 1, 2, 3}

    produce(broker, topic, [(i % 4, f"m{i}") for i in range(40)])
    wait_for("all 40 messages consumed", lambda: (poll_into(c1, got1), poll_into(c2, got2),
                                                   len(got1) + len(got2) == 40)[-1], 60)
    assert {p for p, _, _ in got1} == mine1
    assert {p for p, _, _ in got2} == mine2
    assert sorted(v for _, _, v in got1 + got2) == sorted(f"m{i}" for i in range(40))
    for p, o, v in got1 + got2:
        assert v == f"m{o * 4 + p}", "each partition in order: partition p holds m(4k+p) at offset k"

    for c in (c1, c2):
        c.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in c1.committed([TopicPartition(topic, p) for p in range(4)], 10)}
    assert committed == {0: 10, 1: 10, 2: 10, 3: 10}
    assert {(o["topic"], o["partition"], o["offset"]) for o in group_state(broker, group)["offsets"]} == \
        {(topic, p, 10) for p in range(4)}
    c1.close()
    c2.close()  # LeaveGroup: the group empties at once
    wait_for("the group to empty", lambda: group_state(broker, group)["state"] == "Empty")

    # Two more messages per partition; a new member must start at the committed offsets,
    # not at the beginning (auto.offset.reset=earliest would re-read everything).
    produce(broker, topic, [(i % 4, f"n{i}") for i in range(8)])
    c3 = consumer(broker, group)
    c3.subscribe([topic])
    got3 = []
    wait_for("the new member to read the 8 new messages",
             lambda: (poll_into(c3, got3), len(got3) >= 8)[-1], 60)
    end = time.time() + 1.0
    while time.time() < end:
        poll_into(c3, got3)
    c3.close()
    assert sorted(v for _, _, v in got3) == sorted(f"n{i}" for i in range(8))
    assert all(o >= 10 for _, o, _ in got3)


def test_kafka_python_group_consumer_commits_and_resumes(broker):
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition as KTP

    topic, group = "kp-group-topic", "kp-group"
    create_topic(broker, topic, 2)
    produce(broker, topic, [(i % 2, f"kp{i}") for i in range(10)])

    def read(n):
        c = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                          auto_offset_reset="earliest", enable_auto_commit=False,
                          session_timeout_ms=6000, heartbeat_interval_ms=500,
                          consumer_timeout_ms=20000)
        values = []
        for msg in c:
            values.append((msg.partition, msg.offset, msg.value.decode()))
            if len(values) == n:
                break
        c.commit()
        committed = {p: c.committed(KTP(topic, p)) for p in (0, 1)}
        c.close()
        return values, committed

    values, committed = read(10)
    assert sorted(v for _, _, v in values) == sorted(f"kp{i}" for i in range(10))
    assert committed == {0: 5, 1: 5}
    produce(broker, topic, [(i % 2, f"more{i}") for i in range(4)])
    values, committed = read(4)
    assert sorted(v for _, _, v in values) == sorted(f"more{i}" for i in range(4))
    assert committed == {0: 7, 1: 7}


def test_kafkajs_consumer_group(broker):
    out = subprocess.run(
        ["node", os.path.join(ROOT, "tests", "node", "kafkajs_group.js"), broker.bootstrap, "kjs-group-topic"],
        capture_output=True, text=True, timeout=180,
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert sorted(seen["first"]) == sorted(f"kjs {i}" for i in range(20))
    assert sorted(seen["second"]) == sorted(f"kjs more {i}" for i in range(6))
    assert seen["committed"] == {"0": 13, "1": 13}


def test_kcat_balanced_consumer_commits_and_resumes(broker):
    topic, group = "kcat-group-topic", "kcat-group"
    create_topic(broker, topic, 1)

    def kcat_produce(lines):
        subprocess.run(["kcat", "-b", broker.bootstrap, "-P", "-t", topic, "-X", "acks=all"],
                       input="".join(f"{line}\n" for line in lines), text=True, check=True, timeout=60)

    def kcat_consume():
        out = subprocess.run(
            ["kcat", "-b", broker.bootstrap, "-G", group, topic, "-e", "-q", "-f", "%o %s\n",
             "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000",
             "-X", "heartbeat.interval.ms=500"],
            capture_output=True, text=True, timeout=60,
        )
        assert out.returncode == 0, out.stderr
        return [tuple(line.split(" ", 1)) for line in out.stdout.splitlines()]

    kcat_produce([f"k{i}" for i in range(5)])
    assert kcat_consume() == [(str(i), f"k{i}") for i in range(5)]
    wait_for("kcat's commit in __consumer_offsets",
             lambda: any(o["offset"] == 5 for o in (group_state(broker, group) or {}).get("offsets", [])))
    kcat_produce(["k5", "k6", "k7"])
    assert kcat_consume() == [("5", "k5"), ("6", "k6"), ("7", "k7")], "resumed from the committed offset"


def test_admin_clients_list_describe_fetch_offsets_and_delete_groups(broker):
    """kafka-python's admin (ListGroups v5, DescribeGroups v6, batched FindCoordinator and
    OffsetFetch v8, DeleteGroups v2) and confluent-kafka's (librdkafka's) on a live group."""
    from confluent_kafka import ConsumerGroupState
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition as KTP

    topic, group = "adm-topic", "adm-group"
    create_topic(broker, topic, 2)
    produce(broker, topic, [(i % 2, f"a{i}") for i in range(4)])
    c = consumer(broker, group)
    c.subscribe([topic])
    got = []
    wait_for("the consumer to read 4 messages", lambda: (poll_into(c, got), len(got) == 4)[-1], 60)
    c.commit(asynchronous=False)

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    listed = {g["group_id"]: g for g in admin.list_groups()}
    assert listed[group]["protocol_type"] == "consumer"
    assert listed[group]["group_state"] == "Stable"
    assert group in {g["group_id"] for g in admin.list_groups(states_filter=["stable"])}
    assert group not in {g["group_id"] for g in admin.list_groups(states_filter=["empty"])}
    described = admin.describe_groups([group])[group]
    assert described["error"] is None
    assert (described["group_state"], described["protocol_type"]) == ("Stable", "consumer")
    assert len(described["members"]) == 1
    assert described["members"][0]["client_id"] == "rdkafka"
    offsets = admin.list_group_offsets(group)[group]
    assert {tp: o.offset for tp, o in offsets.items()} == {KTP(topic, 0): 2, KTP(topic, 1): 2}
    assert admin.delete_groups([group]) == {group: "NonEmptyGroupError"}

    ca = AdminClient({"bootstrap.servers": broker.bootstrap})
    listing = {g.group_id: g for g in ca.list_consumer_groups().result(30).valid}
    assert listing[group].state == ConsumerGroupState.STABLE
    description = ca.describe_consumer_groups([group])[group].result(30)
    assert description.state == ConsumerGroupState.STABLE
    assert sorted(tp.partition for tp in description.members[0].assignment.topic_partitions) == [0, 1]

    c.close()
    wait_for("the group to empty", lambda: group_state(broker, group)["state"] == "Empty")
    assert ca.delete_consumer_groups([group])[group].result(30) is None
    assert group_state(broker, group) is None
    assert admin.delete_groups([group]) == {group: "GroupIdNotFoundError"}
    assert admin.list_group_offsets(group)[group] == {}
    admin.close()
