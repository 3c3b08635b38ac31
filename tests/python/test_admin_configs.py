"""Topic and broker configs through real admin clients: confluent-kafka's AdminClient
(incremental_alter_configs, alter_configs, describe_configs) and kafka-python's
(describe_configs with include_synonyms), on one broker and on a three-broker cluster.
What an operator sees: a SET shows as a topic config, DELETE goes back to the default,
APPEND/SUBTRACT edit cleanup.policy, bad values are INVALID_CONFIG, validate_only changes
nothing, and a raised min.insync.replicas refuses acks=all produces at once.
"""

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from conftest import Broker, Cluster, wait_for


@pytest.fixture(scope="module")
def lagging_broker():
    # Followers that stop fetching leave the ISR after half a second, not 30.
    b = Broker(extra_args=("--replica-lag-time-max-ms", "500"))
    yield b
    b.stop()


def admin_for(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def create(admin, name, partitions=1, replication=3, config=None):
    for f in admin.create_topics([NewTopic(name, partitions, replication, config=config or {})]).values():
        f.result(timeout=30)


def describe_topic(admin, name):
    [f] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)]).values()
    return f.result(timeout=30)


def incremental(admin, name, *ops, validate_only=False):
    """ops: (config, AlterConfigOpType, value). Raises KafkaException on an error."""
    resource = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[ConfigEntry(k, v, incremental_operation=op) for k, op, v in ops],
    )
    [f] = admin.incremental_alter_configs([resource], validate_only=validate_only).values()
    return f.result(timeout=30)


def error_of(call):
    with pytest.raises(KafkaException) as raised:
        call()
    return raised.value.args[0].code()


def partition_state(broker, topic):
    return next(p for p in broker.state()["partitions"] if p["topic"] == topic)


def test_set_shows_as_a_topic_config_and_delete_returns_to_the_default(broker):
    admin = admin_for(broker.bootstrap)
    create(admin, "cfg-set")
    before = describe_topic(admin, "cfg-set")
    assert len(before) == 37, sorted(before)
    assert before["retention.bytes"].source == ConfigSource.DEFAULT_CONFIG.value

    incremental(
        admin, "cfg-set",
        ("retention.bytes", AlterConfigOpType.SET, "4096"),
        ("segment.ms", AlterConfigOpType.SET, "60000"),
    )
    after = describe_topic(admin, "cfg-set")
    assert after["retention.bytes"].value == "4096"
    assert after["retention.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not after["retention.bytes"].is_read_only
    assert after["segment.ms"].value == "60000"
    synonyms = {s.name: (s.value, s.source) for s in after["retention.bytes"].synonyms.values()}
    assert synonyms["log.retention.bytes"] == ("-1", ConfigSource.DEFAULT_CONFIG.value)
    # The live view shows it too, and the partition log runs with it.
    p = partition_state(broker, "cfg-set")
    assert p["configs"]["retention.bytes"] == "4096"

    incremental(admin, "cfg-set", ("retention.bytes", AlterConfigOpType.DELETE, None))
    again = describe_topic(admin, "cfg-set")
    assert again["retention.bytes"].value == "-1"
    assert again["retention.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert again["segment.ms"].value == "60000", "DELETE of one key keeps the others"


def test_append_and_subtract_edit_cleanup_policy(broker):
    admin = admin_for(broker.bootstrap)
    create(admin, "cfg-list")
    incremental(admin, "cfg-list", ("cleanup.policy", AlterConfigOpType.APPEND, "compact"))
    assert describe_topic(admin, "cfg-list")["cleanup.policy"].value == "delete,compact"
    incremental(admin, "cfg-list", ("cleanup.policy", AlterConfigOpType.SUBTRACT, "delete"))
    assert describe_topic(admin, "cfg-list")["cleanup.policy"].value == "compact"
    # APPEND to a config that is not a list is refused, as Kafka refuses it.
    code = error_of(lambda: incremental(admin, "cfg-list", ("retention.ms", AlterConfigOpType.APPEND, "5")))
    assert code == KafkaError.INVALID_CONFIG


def test_bad_values_unknown_names_and_topics_are_refused_and_validate_only_changes_nothing(broker):
    admin = admin_for(broker.bootstrap)
    create(admin, "cfg-bad")
    for key, value in [
        ("min.insync.replicas", "abc"),
        ("min.insync.replicas", "0"),
        ("no.such.config", "1"),
        ("message.timestamp.type", "Now"),
        ("remote.storage.enable", "true"),
    ]:
        code = error_of(lambda: incremental(admin, "cfg-bad", (key, AlterConfigOpType.SET, value)))
        assert code == KafkaError.INVALID_CONFIG, (key, value)
    code = error_of(lambda: incremental(admin, "cfg-never", ("retention.ms", AlterConfigOpType.SET, "1")))
    assert code == KafkaError.UNKNOWN_TOPIC_OR_PART

    incremental(admin, "cfg-bad", ("retention.bytes", AlterConfigOpType.SET, "12345"), validate_only=True)
    assert describe_topic(admin, "cfg-bad")["retention.bytes"].value == "-1"
    code = error_of(lambda: incremental(
        admin, "cfg-bad", ("retention.bytes", AlterConfigOpType.SET, "x"), validate_only=True
    ))
    assert code == KafkaError.INVALID_CONFIG


def test_alter_configs_replaces_the_whole_override_set(broker):
    admin = admin_for(broker.bootstrap)
    create(admin, "cfg-legacy", config={"retention.ms": "1000", "min.insync.replicas": "1"})
    resource = ConfigResource(ResourceType.TOPIC, "cfg-legacy", set_config={"retention.bytes": "5000"})
    [f] = admin.alter_configs([resource]).values()
    f.result(timeout=30)
    configs = describe_topic(admin, "cfg-legacy")
    assert configs["retention.bytes"].value == "5000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["min.insync.replicas"].source == ConfigSource.DEFAULT_CONFIG.value


def test_broker_configs_are_described_read_only_and_cannot_be_altered(broker):
    admin = admin_for(broker.bootstrap)
    [f] = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")]).values()
    configs = f.result(timeout=30)
    assert configs["broker.id"].value == "1"
    assert configs["broker.id"].is_read_only
    assert configs["log.retention.bytes"].value == "-1"
    assert configs["num.partitions"].value == "1"
    assert all(c.is_read_only for c in configs.values())

    resource = ConfigResource(
        ResourceType.BROKER, "1",
        incremental_configs=[ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)],
    )
    [f] = admin.incremental_alter_configs([resource]).values()
    with pytest.raises(KafkaException) as raised:
        f.result(timeout=30)
    assert raised.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically" in raised.value.args[0].str()


def test_kafka_python_describes_with_synonyms(broker):
    from kafka.admin import ConfigResource as KpResource, ConfigResourceType, KafkaAdminClient

    create(admin_for(broker.bootstrap), "cfg-kp", config={"max.message.bytes": "2048"})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        described = admin.describe_configs(
            [KpResource(ConfigResourceType.TOPIC, "cfg-kp")], include_synonyms=True, config_filter="all"
        )
        entry = described["topic"]["cfg-kp"]["max.message.bytes"]
        assert entry["value"] == "2048"
        assert entry["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert [(s["name"], s["source"]) for s in entry["synonyms"]] == [
            ("max.message.bytes", "DYNAMIC_TOPIC_CONFIG"),
            ("message.max.bytes", "DEFAULT_CONFIG"),
        ]
        broker_configs = admin.describe_configs(
            [KpResource(ConfigResourceType.BROKER, "1")], include_synonyms=True, config_filter="all"
        )["broker"]["1"]
        assert broker_configs["min.insync.replicas"]["value"] == "2"
        assert broker_configs["min.insync.replicas"]["read_only"]
    finally:
        admin.close()


def test_a_raised_min_insync_replicas_refuses_acks_all_at_once(lagging_broker):
    b = lagging_broker
    admin = admin_for(b.bootstrap)
    create(admin, "cfg-minisr", config={"min.insync.replicas": "1"})
    producer = Producer({
        "bootstrap.servers": b.bootstrap, "acks": "all", "retries": 0,
        "enable.idempotence": False, "message.timeout.ms": 30000,
    })
    outcomes = []

    def send():
        producer.produce("cfg-minisr", b"v", on_delivery=lambda err, msg: outcomes.append(err))
        producer.flush(30)
        return outcomes.pop()

    b.follower(2, "pause")
    b.follower(3, "pause")
    try:
        assert send() is None, "the leader alone satisfies min.insync.replicas=1"
        wait_for("the paused followers to leave the ISR",
                 lambda: partition_state(b, "cfg-minisr")["isr"] == [1])
        incremental(admin, "cfg-minisr", ("min.insync.replicas", AlterConfigOpType.SET, "2"))
        assert partition_state(b, "cfg-minisr")["min_insync_replicas"] == 2
        assert partition_state(b, "cfg-minisr")["configs"]["min.insync.replicas"] == "2"
        err = send()
        assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS, err
    finally:
        b.follower(2, "resume")
        b.follower(3, "resume")


def test_in_a_cluster_every_leader_takes_the_change():
    c = Cluster(3)
    try:
        admin = admin_for(c.bootstrap)
        create(admin, "cfg-cluster", partitions=3)
        wait_for("every partition to have a leader",
                 lambda: all(c.partition("cfg-cluster", i) for i in range(3)))
        incremental(
            admin, "cfg-cluster",
            ("min.insync.replicas", AlterConfigOpType.SET, "3"),
            ("retention.bytes", AlterConfigOpType.SET, "65536"),
        )
        # Each partition is shown by its leader: brokers 1, 2 and 3 each lead one.
        leaders = set()
        for i in range(3):
            p = c.partition("cfg-cluster", i)
            leaders.add(p["leader"])
            assert p["min_insync_replicas"] == 3, p
            assert p["configs"]["retention.bytes"] == "65536", p
        assert leaders == {1, 2, 3}
        # Every broker describes the change: DescribeConfigs sent to each in turn (a
        # kafka-python request to one node id; its admin client would pick any broker).
        from kafka.admin import KafkaAdminClient
        from kafka.protocol.admin import DescribeConfigsRequest

        kp = KafkaAdminClient(bootstrap_servers=c.bootstrap)
        try:
            for broker_id in c.listeners:
                request = DescribeConfigsRequest(
                    resources=[(2, "cfg-cluster", ["min.insync.replicas"])],
                    include_synonyms=False, min_version=1,
                )
                response = kp._manager.run(kp._manager.send, request, broker_id)
                [result] = response.results
                [entry] = result.configs
                assert (entry.value, entry.config_source) == ("3", 1), broker_id
        finally:
            kp.close()
    finally:
        c.stop()
