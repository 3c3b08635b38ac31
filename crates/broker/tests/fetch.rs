//! Fetch over the wire, on a manual clock: what a parked consumer fetch waits for (the HW)
//! and a follower's (an append), how a DelayedFetch counts bytes and when it has expired,
//! and that a fetch answered with an error carries no offsets.
//!
//! On a manual clock a parked request never completes by itself, so "answered at once" is
//! checked by reading with a generous real-time limit: the limit only turns a hang into a
//! failure, it never decides a pass.

mod common;

use std::sync::atomic::Ordering;

use common::*;
use followersim::wire::KafkaConnection;
use kafka_protocol::messages::FetchRequest;
use purgatory::partition::TopicPartition;
use purgatory::replica_manager::AppendOrigin;
use purgatory::request::RequestContext;
use replog::test_util::BatchBuilder;

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
async fn a_parked_consumer_fetch_completes_on_hw_advance_not_on_append() {
    let (tb, mut conn) = broker_with_topic("longpoll", 3, &[]).await;
    let mut consumer = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    let fetch_id = consumer
        .write_request(&long_poll("longpoll", -1, 0, 10_000), 12)
        .await
        .unwrap();
    wait_until("the consumer fetch to be parked", || {
        tb.rm().fetch_purgatory.delayed() == 1
    })
    .await;

    // acks=1: appended (LEO 1) but not replicated (HW 0). A consumer may not see it yet.
    let r = conn
        .send(&produce("longpoll", 1, 1000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    assert_eq!(partition_result(&r), (0, 0));
    assert_eq!(
        tb.rm().fetch_purgatory.delayed(),
        1,
        "an append alone must not wake a consumer fetch"
    );

    // Followers replicate it: the HW moves to 1 and the parked consumer fetch completes.
    let mut f2 = ManualFollower::connect(tb.addr, 2).await;
    let mut f3 = ManualFollower::connect(tb.addr, 3).await;
    f2.fetch("longpoll", 0, 1).await;
    f3.fetch("longpoll", 0, 1).await;
    let (id, response) = consumer.read_response::<FetchRequest>(12).await.unwrap();
    assert_eq!(id, fetch_id);
    let data = &response.responses[0].partitions[0];
    assert_eq!(data.high_watermark, 1);
    assert!(
        data.records.as_ref().is_some_and(|r| !r.is_empty()),
        "the record, now below the HW"
    );
    assert_eq!(tb.rm().fetch_purgatory.delayed(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_follower_fetch_completes_on_append_and_an_idle_one_on_timeout() {
    let (tb, mut conn) = broker_with_topic("replicate", 3, &[]).await;
    let mut follower = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    follower
        .write_request(&long_poll("replicate", 2, 0, 500), 12)
        .await
        .unwrap();
    wait_until("the follower fetch to be parked", || {
        tb.rm().fetch_purgatory.delayed() == 1
    })
    .await;
    conn.send(&produce("replicate", 1, 1000, batch(2, 10, None)), 9)
        .await
        .unwrap();
    let (_, response) = follower.read_response::<FetchRequest>(12).await.unwrap();
    let data = &response.responses[0].partitions[0];
    assert!(
        data.records.as_ref().is_some_and(|r| !r.is_empty()),
        "a follower reads up to the log end"
    );
    assert_eq!(data.high_watermark, 0, "not replicated yet");

    // Nothing new: the next long poll waits max_wait_ms on the broker clock, then answers empty.
    follower
        .write_request(&long_poll("replicate", 2, 2, 500), 12)
        .await
        .unwrap();
    wait_until("the follower fetch to be parked", || {
        tb.rm().fetch_purgatory.delayed() == 1
    })
    .await;
    tb.rm().timer.advance_by(499);
    assert_eq!(tb.rm().fetch_purgatory.delayed(), 1);
    tb.rm().timer.advance_by(1);
    let (_, response) = follower.read_response::<FetchRequest>(12).await.unwrap();
    assert!(response.responses[0].partitions[0]
        .records
        .as_ref()
        .is_none_or(|r| r.is_empty()));
    assert_eq!(tb.rm().fetch_purgatory.expired(), 1);
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
        // An empty record set, never a null one (librdkafka refuses a whole answer holding
        // a null set, and fetches again at once).
        assert_eq!(
            r.responses[0].partitions[0].records,
            Some(bytes::Bytes::new())
        );
    }
    let mut unknown = fetch(0);
    unknown.topics[0].partitions[0].partition = 5;
    let r = conn.send(&unknown, 12).await.unwrap();
    assert_eq!(offsets(&r), (UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1));
}

/// The Fetch v12 answer's first partition for `request` (answered at once).
async fn fetched(
    conn: &mut KafkaConnection,
    request: &FetchRequest,
) -> kafka_protocol::messages::fetch_response::PartitionData {
    conn.write_request(request, 12).await.unwrap();
    answered::<FetchRequest>(conn, 12).await.responses[0].partitions[0].clone()
}

/// A Fetch of `topic` partition 0 from `offset` naming the two epochs.
fn fetch_with_epochs(
    topic: &str,
    replica_id: i32,
    offset: i64,
    current_leader_epoch: i32,
    last_fetched_epoch: i32,
) -> FetchRequest {
    let mut request = long_poll(topic, replica_id, offset, 5_000);
    let p = &mut request.topics[0].partitions[0];
    p.current_leader_epoch = current_leader_epoch;
    p.last_fetched_epoch = last_fetched_epoch;
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_names_the_leader_epoch_it_believes_in_and_is_refused_when_it_is_not_ours() {
    const UNKNOWN_LEADER_EPOCH: i16 = 75;
    const OFFSET_OUT_OF_RANGE: i16 = 1;
    let (tb, mut producer) = broker_with_topic("epochs", 1, &[]).await;
    producer
        .send(&produce("epochs", 1, 1000, batch(3, 10, None)), 9)
        .await
        .unwrap();
    let mut consumer = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();

    // The partition is in leader epoch 0: naming it, or naming none (-1), reads.
    for current in [0, -1] {
        let p = fetched(
            &mut consumer,
            &fetch_with_epochs("epochs", -1, 0, current, -1),
        )
        .await;
        assert_eq!(p.error_code, 0, "current_leader_epoch {current}");
        assert!(p.records.is_some_and(|r| !r.is_empty()));
    }
    // A newer epoch than ours: our metadata is the stale one. Answered at once, with no
    // offsets, so the client refreshes its metadata instead of waiting.
    let p = fetched(&mut consumer, &fetch_with_epochs("epochs", -1, 0, 5, -1)).await;
    assert_eq!((p.error_code, p.high_watermark), (UNKNOWN_LEADER_EPOCH, -1));
    assert!(p.records.is_none_or(|r| r.is_empty()));
    // A last fetched epoch this log has never had is out of range, as Kafka 4.4 answers.
    let p = fetched(&mut consumer, &fetch_with_epochs("epochs", -1, 3, -1, 4)).await;
    assert_eq!((p.error_code, p.high_watermark), (OFFSET_OUT_OF_RANGE, -1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_whose_log_diverged_is_told_where_to_truncate_and_moves_nothing() {
    let (tb, mut producer) =
        broker_with_topic("diverged", 3, &[("min.insync.replicas", "1")]).await;
    producer
        .send(&produce("diverged", 1, 1000, batch(3, 10, None)), 9)
        .await
        .unwrap();
    let mut follower = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    // In step with the leader: epoch 0 holds offsets 0..3 here too, so it reads (and its
    // fetch offset is taken as its log end).
    let p = fetched(&mut follower, &fetch_with_epochs("diverged", 2, 0, 0, 0)).await;
    assert_eq!(p.diverging_epoch.epoch, -1, "no divergence");
    assert!(p.records.is_some_and(|r| !r.is_empty()));
    let leo_of_2 = || {
        tb.rm()
            .partition("diverged", 0)
            .expect("partition")
            .lock()
            .follower(2)
            .map(|f| f.log_end_offset)
    };
    assert_eq!(leo_of_2(), Some(0));

    // It says it holds epoch 0 up to offset 5, but epoch 0 ends at 3 here: its last two
    // records were never the leader's. The answer says so, at once and without records,
    // and offset 5 is not taken as its log end offset.
    let p = fetched(&mut follower, &fetch_with_epochs("diverged", 2, 5, 0, 0)).await;
    assert_eq!(p.error_code, 0);
    assert_eq!(
        (p.diverging_epoch.epoch, p.diverging_epoch.end_offset),
        (0, 3)
    );
    assert!(p.records.is_none_or(|r| r.is_empty()));
    assert_eq!(
        leo_of_2(),
        Some(0),
        "a diverged fetch moves no log end offset"
    );
}
