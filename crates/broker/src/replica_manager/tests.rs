//! The replica manager's chain of events on a manual clock, driven through its domain API
//! (no sockets): when an `acks=all` produce ends in NOT_ENOUGH_REPLICAS_AFTER_APPEND, and
//! when in REQUEST_TIMED_OUT instead.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use replog::test_util::BatchBuilder;

use super::{AppendOrigin, ReplicaManager};
use crate::delayed::ProducePartitionResult;
use crate::partition::TopicPartition;
use crate::request::RequestContext;
use crate::test_util::manual_broker;

const LAG_MS: u64 = 30_000;

/// A manual-clock broker with topic `t` (three replicas, min.insync.replicas 2).
fn broker() -> Arc<ReplicaManager> {
    manual_broker(|_| {}, &[("t", 1, 3)])
}

type Answer = Arc<Mutex<Option<ProducePartitionResult>>>;

/// An `acks=all` produce of one record to `t-0`; the answer lands in the returned cell.
fn produce_all(rm: &ReplicaManager, timeout_ms: u64) -> Answer {
    let answer: Answer = Arc::default();
    let cell = answer.clone();
    rm.append_records(
        &RequestContext::internal("test"),
        timeout_ms,
        -1,
        AppendOrigin::Client,
        vec![(TopicPartition::new("t", 0), BatchBuilder::new(1).bytes())],
        Box::new(move |results| *cell.lock() = results.into_iter().next().map(|(_, r)| r)),
    );
    answer
}

fn acks_one(rm: &ReplicaManager, records: Bytes) {
    rm.append_records(
        &RequestContext::internal("test"),
        1000,
        1,
        AppendOrigin::Client,
        vec![(TopicPartition::new("t", 0), records)],
        Box::new(|_| {}),
    );
}

#[test]
fn not_enough_replicas_after_append_when_the_isr_shrinks_between_hw_advance_and_check() {
    let rm = broker();
    let tp = TopicPartition::new("t", 0);
    let handle = rm.partition("t", 0).unwrap();
    let answer = produce_all(&rm, 60_000);
    assert_eq!(
        rm.produce_purgatory.delayed(),
        1,
        "parked: the HW is 0, it needs 1"
    );

    // A follower-fetch thread records both followers at offset 1: the HW passes the
    // batch. It has released the partition lock but not yet run check_and_complete
    // (here: the test does the partition update by hand and holds the check back).
    let now = rm.now_ms();
    {
        let mut log = handle.lock();
        log.update_follower_fetch(2, 1, now).unwrap();
        log.update_follower_fetch(3, 1, now).unwrap();
        assert_eq!(log.high_watermark(), 1);
    }
    // Meanwhile more data arrives that the followers never fetch, and the ISR check on
    // the timer thread drops both of them: the ISR is the leader alone, below the minimum
    // of 2. The HW does not move, so the ISR check wakes no produce.
    acks_one(&rm, BatchBuilder::new(1).bytes());
    rm.timer.advance_by(LAG_MS + LAG_MS / 2);
    assert_eq!(handle.lock().isr(), vec![1]);
    assert!(answer.lock().is_none(), "still parked");

    // Now the follower-fetch thread runs its check: the HW has passed the batch, but the
    // ISR is too small to call it replicated.
    assert_eq!(rm.produce_purgatory.check_and_complete(&tp), 1);
    let result = answer.lock().clone().expect("answered");
    assert_eq!(
        result.error,
        Some(ResponseError::NotEnoughReplicasAfterAppend)
    );
    assert_eq!(result.base_offset, 0, "the batch was appended");
}

#[test]
fn request_timed_out_when_followers_stop_before_the_hw_passes() {
    let rm = broker();
    let handle = rm.partition("t", 0).unwrap();
    let answer = produce_all(&rm, 60_000);
    // The followers never fetch past offset 0. After replica.lag.time.max.ms they leave
    // the ISR; with the ISR below min.insync.replicas the HW cannot move (KIP-966), so the
    // produce waits out its timeout.
    rm.timer.advance_by(LAG_MS + LAG_MS / 2);
    assert_eq!(handle.lock().isr(), vec![1]);
    assert_eq!(handle.lock().high_watermark(), 0);
    assert!(answer.lock().is_none());
    rm.timer.advance_by(60_000 - (LAG_MS + LAG_MS / 2));
    let result = answer.lock().clone().expect("answered at the timeout");
    assert_eq!(result.error, Some(ResponseError::RequestTimedOut));
    assert_eq!(rm.produce_purgatory.expired(), 1);
    // The next acks=all produce is refused before it is appended.
    let refused = produce_all(&rm, 60_000);
    let result = refused.lock().clone().expect("answered at once");
    assert_eq!(result.error, Some(ResponseError::NotEnoughReplicas));
    assert_eq!(handle.lock().log_end_offset(), 1);
}

#[test]
fn acks_all_completes_when_the_second_follower_fetches_past_the_batch() {
    let rm = broker();
    let answer = produce_all(&rm, 60_000);
    let fetch = |replica: i32, offset: i64| {
        use crate::delayed::FetchParams;
        use crate::replica_manager::FetchPartitionRequest;
        rm.fetch_messages(
            &RequestContext::internal("follower"),
            FetchParams {
                replica_id: replica,
                max_wait_ms: 0,
                min_bytes: 1,
                max_bytes: 1 << 20,
                bound: replog::ReadBound::LogEnd,
            },
            vec![FetchPartitionRequest::new(
                TopicPartition::new("t", 0),
                offset,
                1 << 20,
            )],
            Box::new(|_| {}),
        );
    };
    fetch(2, 1);
    assert!(answer.lock().is_none(), "follower 3 does not have it yet");
    fetch(3, 1);
    let result = answer.lock().clone().expect("answered");
    assert_eq!((result.error, result.base_offset), (None, 0));
}
