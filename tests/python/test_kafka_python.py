"""kafka-python 3.x — an independent, pure-Python implementation of the Kafka protocol —
against the real broker binary with its embedded followers."""

import kafka
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from conftest import wait_for


def read_back(bootstrap, topic, count):
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        consumer_timeout_ms=10000,
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    records = []
    for message in consumer:
        records.append((message.offset, message.value))
        if len(records) >= count:
            break
    consumer.close()
    return records


def test_version_is_3():
    assert kafka.__version__.startswith("3."), kafka.__version__


def test_default_producer_is_acks_all_and_idempotent_and_reads_back(broker):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    # kafka-python 3's defaults: acks=all with idempotence on.
    assert producer.config["acks"] in ("all", -1)
    assert producer.config["enable_idempotence"] is True
    futures = [producer.send("py-defaults", f"message {i}".encode()) for i in range(100)]
    producer.flush(timeout=30)
    offsets = [f.get(timeout=30).offset for f in futures]
    assert offsets == list(range(100))
    producer.close()

    records = read_back(broker.bootstrap, "py-defaults", 100)
    assert records == [(i, f"message {i}".encode()) for i in range(100)]

    state = broker.state()
    partition = next(p for p in state["partitions"] if p["topic"] == "py-defaults")
    assert partition["isr"] == [1, 2, 3]
    assert partition["high_watermark"] == 100


def test_acks_all_waits_for_a_paused_follower(broker):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
    producer.send("py-paused", b"warm-up").get(timeout=30)
    broker.follower(3, "pause")
    try:
        future = producer.send("py-paused", b"held back")
        wait_for(
            "the produce to be parked in the produce purgatory",
            lambda: broker.state()["purgatories"]["produce"]["delayed"] == 1,
        )
        assert not future.is_done, "acks=all must wait for follower 3"
    finally:
        broker.follower(3, "resume")
    metadata = future.get(timeout=30)
    assert metadata.offset == 1
    producer.close()


def test_admin_creates_describes_and_deletes_a_topic(broker):
    # kafka-python's admin client reads the configs a CreateTopics (v5+) response carries,
    # and refuses the whole response if a config's source is a code it does not know.
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        created = admin.create_topics(
            [NewTopic("py-admin", 2, 3, topic_configs={"min.insync.replicas": "1"})]
        )
        [topic] = created["topics"]
        assert topic["error_code"] == 0
        assert topic["num_partitions"] == 2
        assert topic["configs"]["min.insync.replicas"]["value"] == "1"
        assert topic["configs"]["min.insync.replicas"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        # config/broker.toml leaves retention.bytes at its default (-1), which Kafka
        # reports as DEFAULT_CONFIG, as it does for a setting server.properties leaves out.
        assert topic["configs"]["retention.bytes"]["config_source"] == "DEFAULT_CONFIG"

        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "py-admin")]
        )
        assert described["topic"]["py-admin"]["min.insync.replicas"]["value"] == "1"

        partitions = [p for p in broker.state()["partitions"] if p["topic"] == "py-admin"]
        assert sorted(p["partition"] for p in partitions) == [0, 1]

        deleted = admin.delete_topics(["py-admin"])
        assert [t["error_code"] for t in deleted["topics"]] == [0]
        assert not [p for p in broker.state()["partitions"] if p["topic"] == "py-admin"]
    finally:
        admin.close()
