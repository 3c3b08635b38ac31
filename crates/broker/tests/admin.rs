//! The admin APIs over the wire: CreateTopics (a name twice, the partition cap),
//! CreatePartitions (the simulated followers replicate what it adds),
//! DescribeConfigs (Kafka's order, this broker only), ListOffsets (replicas read the whole
//! log) and InitProducerId's refusal of an empty transactional id.
//!
//! On a manual clock a parked request never completes by itself, so "answered at once" is
//! checked by reading with a generous real-time limit: the limit only turns a hang into a
//! failure, it never decides a pass.

mod common;

use common::*;
use followersim::wire::KafkaConnection;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{CreateTopicsRequest, InitProducerIdRequest};
use replog::test_util::BatchBuilder;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_naming_a_topic_twice_refuses_it_once_and_creates_the_others() {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::CreateTopicsRequest;
    // Kafka 4.4: one INVALID_REQUEST for the repeated name, after the other answers, and
    // nothing of that name is created. (Before: the first was created, the second got
    // TOPIC_ALREADY_EXISTS.)
    let tb = TestBroker::start_manual(|_| {}).await;
    let mut conn = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    let topic = |name: &str| {
        CreatableTopic::default()
            .with_name(common::name(name))
            .with_num_partitions(1)
            .with_replication_factor(1)
    };
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![topic("twice"), topic("once"), topic("twice")]);
    let response = conn.send(&request, 7).await.unwrap();
    let answers: Vec<(&str, i16)> = response
        .topics
        .iter()
        .map(|t| (t.name.0.as_str(), t.error_code))
        .collect();
    assert_eq!(
        answers,
        [("once", 0), ("twice", 42)],
        "INVALID_REQUEST last"
    );
    assert!(tb.rm().topic("twice").is_none());
    assert!(tb.rm().topic("once").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_creation_is_capped_by_max_partitions() {
    let tb = TestBroker::start_manual(|c| c.max_partitions = 10).await;
    let mut conn = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name("huge"))
        .with_num_partitions(11)
        .with_replication_factor(3)]);
    let response = conn.send(&request, 5).await.unwrap();
    assert_eq!(response.topics[0].error_code, 44, "POLICY_VIOLATION");
    assert!(tb.rm().topics().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_configs_answers_in_kafkas_order_and_only_for_this_broker() {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::DescribeConfigsRequest;
    use kafka_protocol::protocol::StrBytes;
    // Kafka 4.4 answers in its java.util.HashMap's order, also for the keys asked for
    // (retention.bytes, cleanup.policy came back cleanup.policy first), and refuses a
    // broker resource that is not this broker's id with INVALID_REQUEST. (Before: the
    // table's order, and any broker name answered with this broker's configs.)
    let (_tb, mut conn) = broker_with_topic("dc", 1, &[]).await;
    let describe = |resource_type: i8, name: &str, keys: Option<&[&str]>| {
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from_string(name.into()))
            .with_configuration_keys(keys.map(|keys| {
                keys.iter()
                    .map(|k| StrBytes::from_string(k.to_string()))
                    .collect()
            }))])
    };
    let names = |r: &kafka_protocol::messages::DescribeConfigsResponse| -> Vec<String> {
        r.results[0]
            .configs
            .iter()
            .map(|e| e.name.to_string())
            .collect()
    };
    let asked = describe(2, "dc", Some(&["retention.bytes", "cleanup.policy"]));
    let r = conn.send(&asked, 4).await.unwrap();
    assert_eq!(names(&r), ["cleanup.policy", "retention.bytes"]);
    let r = conn.send(&describe(2, "dc", None), 4).await.unwrap();
    // Kafka's full list, in the order Kafka 4.4 answered it.
    assert_eq!(
        names(&r),
        [
            "compression.type",
            "errors.deadletterqueue.group.enable",
            "remote.copy.lag.bytes",
            "remote.log.delete.on.disable",
            "leader.replication.throttled.replicas",
            "remote.storage.enable",
            "min.insync.replicas",
            "segment.jitter.ms",
            "remote.log.copy.disable",
            "local.retention.ms",
            "cleanup.policy",
            "flush.ms",
            "follower.replication.throttled.replicas",
            "compression.lz4.level",
            "segment.bytes",
            "retention.ms",
            "compression.gzip.level",
            "remote.copy.lag.ms",
            "flush.messages",
            "compression.zstd.level",
            "max.compaction.lag.ms",
            "file.delete.delay.ms",
            "max.message.bytes",
            "min.compaction.lag.ms",
            "message.timestamp.type",
            "local.retention.bytes",
            "preallocate",
            "index.interval.bytes",
            "min.cleanable.dirty.ratio",
            "unclean.leader.election.enable",
            "retention.bytes",
            "delete.retention.ms",
            "message.timestamp.after.max.ms",
            "max.decompressed.message.bytes",
            "message.timestamp.before.max.ms",
            "segment.ms",
            "segment.index.bytes"
        ]
    );
    for (name, error) in [
        ("1", 0),
        ("01", 0),
        ("", 0),
        ("2", 42),
        ("-1", 42),
        ("one", 42),
    ] {
        let r = conn
            .send(&describe(4, name, Some(&["min.insync.replicas"])), 4)
            .await
            .unwrap();
        assert_eq!(r.results[0].error_code, error, "broker resource {name:?}");
        assert_eq!(
            r.results[0].configs.len(),
            usize::from(error == 0),
            "{name:?}"
        );
    }
}

/// ListOffsets of partition 0 of `topic`: (error, offset, timestamp, leader epoch).
async fn list_offset(
    conn: &mut KafkaConnection,
    topic: &str,
    replica_id: i32,
    isolation: i8,
    timestamp: i64,
) -> (i16, i64, i64, i32) {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::ListOffsetsRequest;
    let request = ListOffsetsRequest::default()
        .with_replica_id(replica_id.into())
        .with_isolation_level(isolation)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(common::name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_current_leader_epoch(-1)
                .with_timestamp(timestamp)])]);
    let r = conn.send(&request, 7).await.unwrap();
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.offset, p.timestamp, p.leader_epoch)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_reads_the_whole_log_for_replicas_and_answers_no_epoch_when_nothing_is_found()
{
    // Kafka 4.4: any replica id but -1 gets the log end for "latest" and lookups over the
    // whole log, whatever isolation level it names; a lookup that finds nothing answers
    // leader epoch -1. (Before: the high watermark for everyone, and epoch 0.)
    let (_tb, mut conn) = broker_with_topic("lo", 3, &[]).await;
    // No follower fetches: the record stays above the high watermark (0); the log end is 1.
    let record = BatchBuilder::new(1).timestamp(9_000).bytes();
    conn.send(&produce("lo", 1, 1000, record), 9).await.unwrap();
    let c = &mut conn;
    for isolation in [0, 1] {
        assert_eq!(list_offset(c, "lo", -1, isolation, -1).await, (0, 0, -1, 0));
        // The only record, with the largest timestamp, is not committed: nothing found.
        assert_eq!(
            list_offset(c, "lo", -1, isolation, -3).await,
            (0, -1, -1, -1)
        );
        assert_eq!(
            list_offset(c, "lo", -1, isolation, 5_000).await,
            (0, -1, -1, -1)
        );
    }
    for (replica_id, isolation) in [(-2, 0), (-2, 1), (2, 0)] {
        let (r, i) = (replica_id, isolation);
        assert_eq!(
            list_offset(c, "lo", r, i, -1).await,
            (0, 1, -1, 0),
            "log end"
        );
        assert_eq!(list_offset(c, "lo", r, i, -3).await, (0, 0, 9_000, 0));
        assert_eq!(list_offset(c, "lo", r, i, 5_000).await, (0, 0, 9_000, 0));
    }
    // Earliest is found for everyone; a timestamp above every record by no one.
    assert_eq!(list_offset(c, "lo", -1, 0, -2).await, (0, 0, -1, 0));
    assert_eq!(list_offset(c, "lo", -2, 0, 10_000).await, (0, -1, -1, -1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_producer_id_with_an_empty_transactional_id_is_an_invalid_request() {
    // Kafka 4.4 answers INVALID_REQUEST for "" (not null); a real transactional id gets a
    // producer id and epoch 0 from the transaction coordinator, a second init epoch 1.
    // This broker has no followers, so `__transaction_state` has only its leader (with
    // three replicas its first write would wait for followers that never come).
    let tb = TestBroker::start_manual(|c| c.transaction_state_log_replication_factor = 1).await;
    let mut conn = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    let ask = |id: Option<&str>| {
        InitProducerIdRequest::default()
            .with_transactional_id(
                id.map(|s| kafka_protocol::protocol::StrBytes::from_string(s.into()).into()),
            )
            .with_transaction_timeout_ms(60_000)
    };
    let empty = conn.send(&ask(Some("")), 4).await.unwrap();
    assert_eq!(
        (empty.error_code, empty.producer_id.0),
        (42, -1),
        "INVALID_REQUEST"
    );
    let named = conn.send(&ask(Some("tx")), 4).await.unwrap();
    assert_eq!((named.error_code, named.producer_epoch), (0, 0));
    let again = conn.send(&ask(Some("tx")), 4).await.unwrap();
    assert_eq!(
        (again.error_code, again.producer_id, again.producer_epoch),
        (0, named.producer_id, 1),
        "the same producer id, the next epoch"
    );
    let idempotent = conn.send(&ask(None), 4).await.unwrap();
    assert_eq!(idempotent.error_code, 0);
    assert!(idempotent.producer_id.0 >= 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_added_to_a_single_broker_are_replicated_by_its_simulated_followers() {
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
    use kafka_protocol::messages::CreatePartitionsRequest;
    // The embedded followers (replicas 2 and 3) learn of the new partitions from the
    // registry's change counter, so an acks=all produce to one is answered. Their own
    // metadata refresh is set far beyond the producer's patience: only the counter can
    // tell them in time.
    let tb = TestBroker::start(|_| {}).await;
    let template = followersim::FollowerConfig {
        fetch_max_wait_ms: 500,
        metadata_refresh_ms: 600_000,
        ..followersim::FollowerConfig::default()
    };
    let followers = purgatory::followers::EmbeddedFollowers::start_for(
        tb.rm(),
        &tb.bootstrap(),
        &[2, 3],
        &template,
    );
    create_topic(&tb.bootstrap(), "grown", 1, 3).await;
    let mut conn = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(name("grown"))
            .with_count(3)
            .with_assignments(None)]);
    let response = conn.send(&request, 3).await.unwrap();
    assert_eq!(response.results[0].error_code, 0, "{response:?}");
    let p = producer(&tb.bootstrap(), &[]);
    p.send(
        rdkafka::producer::FutureRecord::<(), _>::to("grown")
            .partition(2)
            .payload("new"),
        std::time::Duration::from_secs(30),
    )
    .await
    .unwrap_or_else(|(e, _)| panic!("not acknowledged: {e}"));
    assert_eq!(tb.high_watermark("grown", 2), 1);
    assert_eq!(tb.isr("grown", 2), vec![1, 2, 3]);
    drop(p);
    followers.shutdown().await;
}
