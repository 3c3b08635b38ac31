//! Shared test support: start a broker on an ephemeral port, drive follower replicas by
//! hand over the wire, and wait for conditions on the broker's state.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use followersim::wire::KafkaConnection;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::messages::{CreateTopicsRequest, ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::{Request, StrBytes};
use purgatory::config::{BrokerConfig, ClockMode};
use purgatory::replica_manager::ReplicaManager;
use purgatory::Broker;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord};
use replog::test_util::BatchBuilder;

/// A broker listening on 127.0.0.1 with an OS-chosen port.
pub struct TestBroker {
    pub broker: Broker,
    pub addr: SocketAddr,
}

impl TestBroker {
    pub async fn start(configure: impl FnOnce(&mut BrokerConfig)) -> TestBroker {
        let mut config = BrokerConfig {
            listen: "127.0.0.1:0".into(),
            ..BrokerConfig::default()
        };
        configure(&mut config);
        let broker = Broker::start(config).await.expect("broker starts");
        let addr = broker.local_addr();
        TestBroker { broker, addr }
    }

    /// A broker whose clock only moves when the test advances it.
    pub async fn start_manual(configure: impl FnOnce(&mut BrokerConfig)) -> TestBroker {
        Self::start(|c| {
            c.clock = ClockMode::Manual;
            configure(c)
        })
        .await
    }

    pub fn rm(&self) -> &Arc<ReplicaManager> {
        self.broker.replica_manager()
    }

    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }

    pub fn high_watermark(&self, topic: &str, partition: i32) -> i64 {
        self.rm()
            .partition(topic, partition)
            .expect("partition exists")
            .lock()
            .high_watermark()
    }

    pub fn log_end_offset(&self, topic: &str, partition: i32) -> i64 {
        self.rm()
            .partition(topic, partition)
            .expect("partition exists")
            .lock()
            .log_end_offset()
    }

    pub fn isr(&self, topic: &str, partition: i32) -> Vec<i32> {
        self.rm()
            .partition(topic, partition)
            .expect("partition exists")
            .lock()
            .isr()
    }
}

/// A follower replica driven step by step by the test: each `fetch` is one Fetch request
/// with the follower's replica id, exactly what a Kafka follower sends.
pub struct ManualFollower {
    pub replica_id: i32,
    conn: KafkaConnection,
}

impl ManualFollower {
    pub async fn connect(addr: SocketAddr, replica_id: i32) -> ManualFollower {
        let conn = KafkaConnection::connect(&addr.to_string())
            .await
            .expect("follower connects");
        ManualFollower { replica_id, conn }
    }

    /// Fetches `topic`/`partition` from `offset` (= this follower's LEO), without waiting.
    pub async fn fetch(&mut self, topic: &str, partition: i32, offset: i64) -> PartitionData {
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(self.replica_id))
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20)])]);
        let response = self.conn.send(&request, 12).await.expect("fetch answered");
        response.responses[0].partitions[0].clone()
    }
}

/// Polls `condition` until it holds (the workspace's one `wait_until`).
#[allow(unused_imports)] // not every test binary that includes this module waits
pub use followersim::test_util::wait_until;

/// A librdkafka producer with acks=all and no batching delay; `extra` overrides.
pub fn producer(bootstrap: &str, extra: &[(&str, &str)]) -> FutureProducer {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("linger.ms", "0")
        .set("enable.idempotence", "false")
        .set("message.timeout.ms", "60000");
    for (k, v) in extra {
        config.set(*k, *v);
    }
    config.create().expect("producer")
}

pub async fn create_topic(bootstrap: &str, name: &str, partitions: i32, replication: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client");
    let results = admin
        .create_topics(
            &[NewTopic::new(
                name,
                partitions,
                TopicReplication::Fixed(replication),
            )],
            &AdminOptions::new(),
        )
        .await
        .expect("CreateTopics answered");
    for r in results {
        r.expect("topic created");
    }
}

/// Enqueues one message now (so messages keep their send order) and returns a task that
/// resolves to its delivery report.
pub fn spawn_send(
    producer: &FutureProducer,
    topic: &str,
    payload: &str,
) -> tokio::task::JoinHandle<Result<(i32, i64), KafkaError>> {
    let delivery = producer
        .send_result(FutureRecord::<(), _>::to(topic).payload(payload))
        .map_err(|(e, _)| e);
    tokio::spawn(async move {
        let delivery = delivery?;
        match delivery.await {
            Ok(Ok(d)) => Ok((d.partition, d.offset)),
            Ok(Err((e, _))) => Err(e),
            Err(_) => Err(KafkaError::Canceled),
        }
    })
}

// ---------------------------------------------------------------------------------------
// Hand-built requests

/// A topic name for a request.
pub fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// One v2 record batch of `count` records of `size` bytes each, optionally idempotent
/// (producer id, epoch, first sequence).
pub fn batch(count: usize, size: usize, producer: Option<(i64, i16, i32)>) -> Bytes {
    let builder = BatchBuilder::with_values(&vec![vec![b'x'; size]; count]);
    match producer {
        Some((id, epoch, sequence)) => builder.producer(id, epoch, sequence).bytes(),
        None => builder.bytes(),
    }
}

/// A Produce request for partition 0 of `topic`.
pub fn produce(topic: &str, acks: i16, timeout_ms: i32, records: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])])
}

/// (error code, base offset) of the first partition of a Produce response.
pub fn partition_result(r: &ProduceResponse) -> (i16, i64) {
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

pub async fn create(
    conn: &mut KafkaConnection,
    topic: &str,
    replication: i16,
    configs: &[(&str, &str)],
) {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(1)
            .with_replication_factor(replication)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(StrBytes::from_string(k.to_string()))
                            .with_value(Some(StrBytes::from_string(v.to_string())))
                    })
                    .collect(),
            )]);
    let response = conn.send(&request, 5).await.expect("CreateTopics answered");
    assert_eq!(
        response.topics[0].error_code, 0,
        "{:?}",
        response.topics[0].error_message
    );
}

/// A broker on a manual clock with one topic, and a connection to it.
pub async fn broker_with_topic(
    topic: &str,
    replication: i16,
    configs: &[(&str, &str)],
) -> (TestBroker, KafkaConnection) {
    let tb = TestBroker::start_manual(|_| {}).await;
    let mut conn = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    create(&mut conn, topic, replication, configs).await;
    (tb, conn)
}

/// A Fetch of partition 0 of `topic` from `offset`, waiting up to `max_wait_ms` for 1 byte.
pub fn long_poll(topic: &str, replica_id: i32, offset: i64, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(replica_id.into())
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])])
}

/// Kafka error codes the tests expect.
pub const NOT_ENOUGH_REPLICAS: i16 = 19;

pub const INVALID_RECORD: i16 = 87;

pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// Reads the next response, failing instead of hanging if the broker parked the request.
pub async fn answered<Req: Request>(conn: &mut KafkaConnection, version: i16) -> Req::Response {
    tokio::time::timeout(Duration::from_secs(10), conn.read_response::<Req>(version))
        .await
        .expect("answered at once, not parked")
        .expect("a response")
        .1
}
