//! Kafka semantics this broker once got wrong, each checked over the wire on a manual
//! clock: the minimum ISR in force on small topics, one batch per partition, no
//! auto-creation on Produce, Kafka's DelayedFetch byte counting, and the connection close
//! after a failed `acks=0` produce. Each test failed against the broker before the change
//! it guards (the commit before them is b22a826).
//!
//! On a manual clock a parked request never completes by itself, so "answered at once" is
//! checked by reading with a generous real-time limit: the limit only turns a hang into a
//! failure, it never decides a pass.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{batch, broker_with_topic, create, long_poll, partition_result, produce, wait_until};
use common::{ManualFollower, TestBroker};
use followersim::wire::KafkaConnection;
use kafka_protocol::messages::{
    ApiVersionsRequest, FetchRequest, InitProducerIdRequest, MetadataRequest, ProduceRequest,
};
use kafka_protocol::protocol::Request;
use replog::test_util::BatchBuilder;

const NOT_ENOUGH_REPLICAS: i16 = 19;
const INVALID_RECORD: i16 = 87;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// Reads the next response, failing instead of hanging if the broker parked the request.
async fn answered<Req: Request>(conn: &mut KafkaConnection, version: i16) -> Req::Response {
    tokio::time::timeout(Duration::from_secs(10), conn.read_response::<Req>(version))
        .await
        .expect("answered at once, not parked")
        .expect("a response")
        .1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_works_on_topics_with_one_or_two_replicas() {
    // The broker's min.insync.replicas is 2 (Kafka's common setting); the minimum in force
    // is min(min.insync.replicas, replication factor).
    let (tb, mut conn) = broker_with_topic("rf1", 1, &[]).await;
    create(&mut conn, "rf2", 2, &[]).await;
    create(&mut conn, "rf2-min3", 2, &[("min.insync.replicas", "3")]).await;

    // One replica: the leader is the whole ISR, the HW moves on append, and acks=all is
    // answered at once. (Before: NOT_ENOUGH_REPLICAS, nothing appended.)
    conn.write_request(&produce("rf1", -1, 1000, batch(2, 10, None)), 9)
        .await
        .unwrap();
    let response = answered::<ProduceRequest>(&mut conn, 9).await;
    assert_eq!(partition_result(&response), (0, 0));
    assert_eq!(tb.high_watermark("rf1", 0), 2);

    // Two replicas, with min.insync.replicas 2 and 3: both wait for follower 2, then succeed.
    let mut follower = ManualFollower::connect(tb.addr, 2).await;
    for topic in ["rf2", "rf2-min3"] {
        conn.write_request(&produce(topic, -1, 1000, batch(1, 10, None)), 9)
            .await
            .unwrap();
        wait_until("the produce to be parked", || {
            tb.rm().produce_purgatory.delayed() == 1
        })
        .await;
        let data = follower.fetch(topic, 0, 0).await;
        assert!(data.records.is_some_and(|r| !r.is_empty()));
        follower.fetch(topic, 0, 1).await; // follower 2 now holds offset 0: HW 1
        let response = answered::<ProduceRequest>(&mut conn, 9).await;
        assert_eq!(partition_result(&response), (0, 0), "{topic}");
    }

    // And below the minimum in force it is refused, as in Kafka: follower 2 stops fetching
    // rf2 and leaves its ISR once it has not been caught up for replica.lag.time.max.ms
    // (30 s, checked every 15 s).
    conn.send(&produce("rf2", 1, 1000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    tb.rm().timer.advance_by(45_000);
    assert_eq!(tb.isr("rf2", 0), vec![1]);
    let response = conn
        .send(&produce("rf2", -1, 1000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    assert_eq!(partition_result(&response).0, NOT_ENOUGH_REPLICAS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_takes_exactly_one_batch_per_partition_and_appends_nothing_else() {
    let (tb, mut conn) = broker_with_topic("one-batch", 1, &[]).await;
    let two_batches = Bytes::from([batch(1, 10, None), batch(2, 10, None)].concat());
    let response = conn
        .send(&produce("one-batch", 1, 1000, two_batches), 9)
        .await
        .unwrap();
    assert_eq!(partition_result(&response).0, INVALID_RECORD);
    assert_eq!(tb.log_end_offset("one-batch", 0), 0, "nothing appended");

    let whole = batch(1, 10, None);
    let cut = whole.slice(..whole.len() - 3);
    let response = conn
        .send(&produce("one-batch", 1, 1000, cut), 9)
        .await
        .unwrap();
    assert_eq!(partition_result(&response).0, INVALID_RECORD);
    assert_eq!(tb.log_end_offset("one-batch", 0), 0);

    // An idempotent retry beside a new batch: answering "duplicate" would acknowledge the
    // new batch without appending it. (Before: success, and the new batch was dropped.)
    let init = conn
        .send(
            &InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000),
            4,
        )
        .await
        .unwrap();
    let (pid, epoch) = (init.producer_id.0, init.producer_epoch);
    let first = BatchBuilder::new(1).producer(pid, epoch, 0).bytes();
    let second = BatchBuilder::new(1).producer(pid, epoch, 1).bytes();
    let response = conn
        .send(&produce("one-batch", -1, 1000, first.clone()), 9)
        .await
        .unwrap();
    assert_eq!(partition_result(&response), (0, 0));
    let retry_and_new = Bytes::from([first, second.clone()].concat());
    let response = conn
        .send(&produce("one-batch", -1, 1000, retry_and_new), 9)
        .await
        .unwrap();
    assert_eq!(partition_result(&response).0, INVALID_RECORD);
    assert_eq!(tb.log_end_offset("one-batch", 0), 1);
    // Sent alone, the new batch is appended where it belongs.
    let response = conn
        .send(&produce("one-batch", -1, 1000, second), 9)
        .await
        .unwrap();
    assert_eq!(partition_result(&response), (0, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_to_an_unknown_topic_is_refused_and_creates_nothing() {
    let tb = TestBroker::start_manual(|_| {}).await;
    let mut conn = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    let response = conn
        .send(&produce("nobody-made-me", 1, 1000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    assert_eq!(partition_result(&response).0, UNKNOWN_TOPIC_OR_PARTITION);
    let metadata = conn
        .send(&MetadataRequest::default().with_topics(None), 12)
        .await
        .unwrap();
    assert!(
        metadata.topics.is_empty(),
        "only Metadata auto-creates topics"
    );
    assert!(tb.rm().topic("nobody-made-me").is_none());
}

/// A consumer Fetch of `topic` partition 0 from `offset`.
fn consumer_fetch(
    topic: &str,
    offset: i64,
    min_bytes: i32,
    partition_max_bytes: i32,
    max_bytes: i32,
) -> FetchRequest {
    let mut request = long_poll(topic, -1, offset, 5_000)
        .with_min_bytes(min_bytes)
        .with_max_bytes(max_bytes);
    request.topics[0].partitions[0].partition_max_bytes = partition_max_bytes;
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_fetch_counts_bytes_as_kafka_does() {
    let (tb, mut producer) = broker_with_topic("counted", 1, &[("min.insync.replicas", "1")]).await;
    for _ in 0..3 {
        producer
            .send(&produce("counted", 1, 1000, batch(1, 1000, None)), 9)
            .await
            .unwrap();
    }
    assert_eq!(
        tb.high_watermark("counted", 0),
        3,
        "one replica: the HW follows"
    );
    let mut consumer = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();

    // min_bytes = 0 is answered at once, even with nothing to read.
    // (Before: it waited for one byte, here forever on the manual clock.)
    consumer
        .write_request(&consumer_fetch("counted", 3, 0, 1 << 20, 1 << 20), 12)
        .await
        .unwrap();
    let response = answered::<FetchRequest>(&mut consumer, 12).await;
    let data = &response.responses[0].partitions[0];
    assert_eq!((data.error_code, data.high_watermark), (0, 3));
    assert!(data.records.as_ref().is_none_or(|r| r.is_empty()));

    // About 3 KB are readable from offset 0, but a partition counts at most its
    // partition_max_bytes (and the whole fetch at most max_bytes), so min_bytes = 1500
    // cannot be met: the fetch waits its max_wait_ms. (Before: it was answered at once.)
    for (partition_max_bytes, max_bytes) in [(1000, 1 << 20), (1 << 20, 1000)] {
        consumer
            .write_request(
                &consumer_fetch("counted", 0, 1500, partition_max_bytes, max_bytes),
                12,
            )
            .await
            .unwrap();
        wait_until("the fetch to be parked", || {
            tb.rm().fetch_purgatory.delayed() == 1
        })
        .await;
        tb.rm().timer.advance_by(4_999);
        assert_eq!(tb.rm().fetch_purgatory.delayed(), 1, "still waiting");
        tb.rm().timer.advance_by(1);
        let response = answered::<FetchRequest>(&mut consumer, 12).await;
        let records = response.responses[0].partitions[0].records.clone();
        // At expiry it answers with what there is: the first batch, whole (KIP-74).
        assert!(records.is_some_and(|r| r.len() > 1000 && r.len() < 2000));
    }
    // With min_bytes within the capped count it is answered at once.
    consumer
        .write_request(&consumer_fetch("counted", 0, 900, 1000, 1 << 20), 12)
        .await
        .unwrap();
    answered::<FetchRequest>(&mut consumer, 12).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_acks_zero_produce_closes_the_connection_after_earlier_responses() {
    let (tb, mut conn) = broker_with_topic("quiet", 1, &[]).await;
    // acks=0 that succeeds: no response, the connection stays.
    conn.write_request(&produce("quiet", 0, 1000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    conn.send(&ApiVersionsRequest::default(), 3).await.unwrap();
    assert_eq!(tb.log_end_offset("quiet", 0), 1);

    // acks=0 that fails (unknown topic): the producer cannot be told, so the broker
    // closes the connection — after answering what came before.
    let before = conn
        .write_request(&ApiVersionsRequest::default(), 3)
        .await
        .unwrap();
    conn.write_request(&produce("no-such-topic", 0, 1000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    let _ = conn.write_request(&ApiVersionsRequest::default(), 3).await;
    let (id, _) = tokio::time::timeout(
        Duration::from_secs(10),
        conn.read_response::<ApiVersionsRequest>(3),
    )
    .await
    .expect("answered")
    .expect("the response owed before the failed produce");
    assert_eq!(id, before);
    let after = tokio::time::timeout(
        Duration::from_secs(10),
        conn.read_response::<ApiVersionsRequest>(3),
    )
    .await
    .expect("the broker closes the connection rather than leaving it open");
    assert!(
        after.is_err(),
        "nothing is answered after the failed acks=0 produce"
    );
}
