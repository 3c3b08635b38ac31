//! Kafka's produce and fetch rules, over the wire, on a manual clock: the minimum ISR in
//! force on small topics, one batch per partition, no auto-creation on Produce, how a
//! DelayedFetch counts bytes and when it has expired, the connection closed after a failed
//! `acks=0` produce, and the log start offset of a refused produce.
//!
//! On a manual clock a parked request never completes by itself, so "answered at once" is
//! checked by reading with a generous real-time limit: the limit only turns a hang into a
//! failure, it never decides a pass.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use common::{batch, broker_with_topic, create, long_poll, partition_result, produce, wait_until};
use common::{ManualFollower, TestBroker};
use followersim::wire::KafkaConnection;
use kafka_protocol::messages::{
    ApiVersionsRequest, FetchRequest, InitProducerIdRequest, MetadataRequest, ProduceRequest,
};
use kafka_protocol::protocol::Request;
use purgatory::partition::TopicPartition;
use purgatory::replica_manager::AppendOrigin;
use purgatory::request::RequestContext;
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

/// A fetch whose data arrives in the very millisecond its `max_wait_ms` ends was satisfied,
/// not expired, and is neither counted (`DelayedFetchMetrics.ExpiresPerSec`) nor logged as
/// expired. Before, `DelayedFetch` guessed expiry afterwards from the clock and got this
/// case wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_satisfied_in_its_deadline_millisecond_did_not_expire() {
    let (tb, _conn) = broker_with_topic("edge", 1, &[]).await;
    let rm = tb.rm().clone();
    let deadline = rm.now_ms() + 5_000;
    // Tasks due in the same millisecond run in the order they were scheduled: this append
    // runs before the fetch's own timeout, at its deadline.
    let appender = rm.clone();
    rm.timer.schedule_at(deadline, move || {
        appender.append_records(
            &RequestContext::internal("edge-producer"),
            1_000,
            1,
            AppendOrigin::Client,
            vec![(TopicPartition::new("edge", 0), BatchBuilder::new(1).bytes())],
            Box::new(|_| {}),
        );
    });
    let mut consumer = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    let seq = rm.telemetry.next_request_seq();
    consumer
        .write_request(&consumer_fetch("edge", 0, 1, 1 << 20, 1 << 20), 12)
        .await
        .unwrap();
    wait_until("the fetch to be parked", || {
        rm.fetch_purgatory.delayed() == 1
    })
    .await;

    rm.timer.advance_by(5_000);
    let response = answered::<FetchRequest>(&mut consumer, 12).await;
    let data = &response.responses[0].partitions[0];
    assert_eq!((data.error_code, data.high_watermark), (0, 1));
    assert!(
        data.records.as_ref().is_some_and(|r| !r.is_empty()),
        "the record it waited for"
    );
    assert_eq!(
        rm.telemetry
            .metrics
            .fetch_expired_consumer
            .load(Ordering::Relaxed),
        0,
        "not counted as an expiry"
    );
    let logged = rm
        .telemetry
        .request(seq)
        .expect("the fetch is in the request log");
    assert_eq!(logged.request, "FetchConsumer");
    assert_eq!(
        logged.cause.kind, "append",
        "completed by the append, not expired"
    );
    assert_eq!(rm.fetch_purgatory.expired(), 0);
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

/// Partition 0's (error, log start offset) in a Produce response.
fn error_and_log_start(r: &kafka_protocol::messages::ProduceResponse) -> (i16, i64) {
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.log_start_offset)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_produce_carries_the_log_start_offset_where_kafka_answers_it() {
    // Kafka 4.4 answers the partition's log start offset for what the log refuses (a
    // sequence gap, a fenced epoch, too small an ISR, a batch its validation rejects) and
    // -1 for what is refused before the log or as a bad batch (an unknown partition, two
    // batches, magic 1, too large, a corrupt CRC). (Before: -1 for every error.)
    let (tb, mut conn) = broker_with_topic(
        "lso",
        1,
        &[
            ("min.insync.replicas", "1"),
            ("retention.bytes", "4096"),
            ("max.message.bytes", "2000"),
        ],
    )
    .await;
    for _ in 0..20 {
        let r = conn
            .send(&produce("lso", 1, 1000, batch(1, 500, None)), 9)
            .await
            .unwrap();
        assert_eq!(partition_result(&r).0, 0);
    }
    let log_start = tb
        .rm()
        .partition("lso", 0)
        .unwrap()
        .lock()
        .log_start_offset();
    assert!(log_start > 0, "retention moved the log start");
    let send = |records: Bytes| produce("lso", 1, 1000, records);

    let (pid, epoch) = (4242, 3);
    let first = BatchBuilder::new(1).producer(pid, epoch, 0).bytes();
    let r = conn.send(&send(first), 9).await.unwrap();
    assert_eq!(error_and_log_start(&r), (0, log_start));
    let gap = BatchBuilder::new(1).producer(pid, epoch, 5).bytes();
    let r = conn.send(&send(gap), 9).await.unwrap();
    assert_eq!(
        error_and_log_start(&r),
        (45, log_start),
        "OUT_OF_ORDER_SEQUENCE"
    );
    let fenced = BatchBuilder::new(1).producer(pid, epoch - 1, 1).bytes();
    let r = conn.send(&send(fenced), 9).await.unwrap();
    assert_eq!(
        error_and_log_start(&r),
        (47, log_start),
        "INVALID_PRODUCER_EPOCH"
    );

    let r = conn.send(&send(batch(1, 3000, None)), 9).await.unwrap();
    assert_eq!(error_and_log_start(&r), (10, -1), "MESSAGE_TOO_LARGE");
    let mut corrupt = bytes::BytesMut::from(&batch(1, 10, None)[..]);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let r = conn.send(&send(corrupt.freeze()), 9).await.unwrap();
    assert_eq!(error_and_log_start(&r), (2, -1), "CORRUPT_MESSAGE");
    let mut magic_one = bytes::BytesMut::from(&batch(1, 10, None)[..]);
    magic_one[16] = 1;
    let r = conn.send(&send(magic_one.freeze()), 9).await.unwrap();
    assert_eq!(error_and_log_start(&r), (INVALID_RECORD, -1), "magic 1");
    let two = Bytes::from([batch(1, 10, None), batch(1, 10, None)].concat());
    let r = conn.send(&send(two), 9).await.unwrap();
    assert_eq!(error_and_log_start(&r), (INVALID_RECORD, -1), "two batches");
    let mut unknown = send(batch(1, 10, None));
    unknown.topic_data[0].partition_data[0].index = 7;
    let r = conn.send(&unknown, 9).await.unwrap();
    assert_eq!(error_and_log_start(&r), (UNKNOWN_TOPIC_OR_PARTITION, -1));

    // Too small an ISR: replica 2 never fetches, so it leaves the ISR once the leader has
    // written past it and replica.lag.time.max.ms (30 s, checked every 15 s) has passed.
    create(&mut conn, "lso-rf2", 2, &[]).await;
    conn.send(&produce("lso-rf2", 1, 1000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    tb.rm().timer.advance_by(45_000);
    assert_eq!(tb.isr("lso-rf2", 0), vec![1]);
    let r = conn
        .send(&produce("lso-rf2", -1, 1000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    assert_eq!(error_and_log_start(&r), (NOT_ENOUGH_REPLICAS, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_producer_id_with_an_empty_transactional_id_is_an_invalid_request() {
    // Kafka 4.4 answers INVALID_REQUEST for "" (not null); a real transactional id is
    // still unsupported here. (Before: TRANSACTIONAL_ID_AUTHORIZATION_FAILED for both.)
    let tb = TestBroker::start_manual(|_| {}).await;
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
    assert_eq!(
        named.error_code, 53,
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    );
    let idempotent = conn.send(&ask(None), 4).await.unwrap();
    assert_eq!(idempotent.error_code, 0);
    assert!(idempotent.producer_id.0 >= 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_answered_with_an_error_carries_no_offsets() {
    // Kafka 4.4 answers -1 for the high watermark, last stable offset and log start of a
    // partition answered with an error, OFFSET_OUT_OF_RANGE included. (Before: the
    // partition's real offsets beside OFFSET_OUT_OF_RANGE.)
    let (_tb, mut conn) = broker_with_topic("no-offsets", 1, &[("min.insync.replicas", "1")]).await;
    conn.send(&produce("no-offsets", 1, 1000, batch(3, 10, None)), 9)
        .await
        .unwrap();
    let offsets = |r: &kafka_protocol::messages::FetchResponse| {
        let p = &r.responses[0].partitions[0];
        (
            p.error_code,
            p.high_watermark,
            p.last_stable_offset,
            p.log_start_offset,
        )
    };
    let fetch = |offset: i64| consumer_fetch("no-offsets", offset, 0, 1 << 20, 1 << 20);
    let r = conn.send(&fetch(1), 12).await.unwrap();
    assert_eq!(offsets(&r), (0, 3, 3, 0), "a good answer has them");
    for offset in [4, -1, i64::MAX] {
        let r = conn.send(&fetch(offset), 12).await.unwrap();
        assert_eq!(
            offsets(&r),
            (1, -1, -1, -1),
            "OFFSET_OUT_OF_RANGE at {offset}"
        );
        assert!(r.responses[0].partitions[0].records.is_none());
    }
    let mut unknown = fetch(0);
    unknown.topics[0].partitions[0].partition = 5;
    let r = conn.send(&unknown, 12).await.unwrap();
    assert_eq!(offsets(&r), (UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1));
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
    // Kafka's full list, less the 32 configs this broker does not have.
    assert_eq!(
        names(&r),
        [
            "min.insync.replicas",
            "cleanup.policy",
            "max.message.bytes",
            "message.timestamp.type",
            "retention.bytes"
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
