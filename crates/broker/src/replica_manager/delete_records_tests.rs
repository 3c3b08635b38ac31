//! DeleteRecords on the manual clock: the leader deletes at once, and the answer waits in
//! the DeleteRecords purgatory until both followers report the new log start, or until
//! its timeout when one of them stops fetching.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use replog::test_util::BatchBuilder;

use super::{AppendOrigin, FetchPartitionRequest, ReplicaManager};
use crate::delayed::{DeleteRecordsPartitionResult, FetchParams};
use crate::partition::TopicPartition;
use crate::request::RequestContext;
use crate::test_util::manual_broker;

type Answer = Arc<Mutex<Option<DeleteRecordsPartitionResult>>>;

/// Topic `t` (three replicas) holding three batches of two records, all replicated.
fn replicated_broker() -> Arc<ReplicaManager> {
    let rm = manual_broker(|_| {}, &[("t", 1, 3)]);
    for _ in 0..3 {
        rm.append_records(
            &RequestContext::internal("test"),
            1000,
            1,
            AppendOrigin::Client,
            vec![(TopicPartition::new("t", 0), BatchBuilder::new(2).bytes())],
            Box::new(|_| {}),
        );
    }
    for follower in [2, 3] {
        follower_fetch(&rm, follower, 6, 0);
    }
    assert_eq!(rm.partition("t", 0).unwrap().lock().high_watermark(), 6);
    rm
}

/// A fetch by `replica` of `t-0` at `offset`, reporting `log_start_offset` as its own.
fn follower_fetch(rm: &ReplicaManager, replica: i32, offset: i64, log_start_offset: i64) {
    let mut partition = FetchPartitionRequest::new(TopicPartition::new("t", 0), offset, 1 << 20);
    partition.log_start_offset = log_start_offset;
    rm.fetch_messages(
        &RequestContext::internal("follower"),
        FetchParams {
            replica_id: replica,
            max_wait_ms: 0,
            min_bytes: 1,
            max_bytes: 1 << 20,
            bound: replog::ReadBound::LogEnd,
        },
        vec![partition],
        Box::new(|_| {}),
    );
}

fn delete_records(rm: &ReplicaManager, offset: i64, timeout_ms: u64) -> Answer {
    let answer: Answer = Arc::default();
    let cell = answer.clone();
    rm.delete_records(
        &RequestContext::internal("admin"),
        timeout_ms,
        vec![(TopicPartition::new("t", 0), offset)],
        Box::new(move |results| *cell.lock() = results.into_iter().next().map(|(_, r)| r)),
    );
    answer
}

#[test]
fn completes_when_the_second_follower_reports_the_new_log_start() {
    let rm = replicated_broker();
    let answer = delete_records(&rm, 4, 30_000);
    assert_eq!(rm.partition("t", 0).unwrap().lock().log_start_offset(), 4);
    assert_eq!(rm.delete_records_purgatory.delayed(), 1, "parked");
    // Follower 2 has dropped the records; follower 3 has not heard of it yet.
    follower_fetch(&rm, 2, 6, 4);
    follower_fetch(&rm, 3, 6, 0);
    assert!(
        answer.lock().is_none(),
        "follower 3 still holds offsets 0-3"
    );
    follower_fetch(&rm, 3, 6, 4);
    let result = answer.lock().expect("answered");
    assert_eq!(
        result,
        DeleteRecordsPartitionResult {
            error: None,
            low_watermark: 4
        }
    );
}

#[test]
fn expires_with_request_timed_out_while_a_follower_does_not_fetch() {
    let rm = replicated_broker();
    let answer = delete_records(&rm, -1, 30_000);
    follower_fetch(&rm, 2, 6, 6);
    // Follower 3 is paused: it never reports. The leader's deletion stands.
    rm.timer.advance_by(29_999);
    assert!(answer.lock().is_none());
    rm.timer.advance_by(1);
    let result = answer.lock().expect("answered at the timeout");
    // With the low watermark the deletion left: follower 3 still starts at 0.
    assert_eq!(
        result,
        DeleteRecordsPartitionResult {
            error: Some(ResponseError::RequestTimedOut),
            low_watermark: 0
        }
    );
    assert_eq!(rm.delete_records_purgatory.expired(), 1);
    assert_eq!(rm.partition("t", 0).unwrap().lock().log_start_offset(), 6);
}

#[test]
fn refuses_above_the_high_watermark_and_unknown_partitions_at_once() {
    let rm = replicated_broker();
    let above = delete_records(&rm, 7, 30_000);
    assert_eq!(
        *above.lock(),
        Some(DeleteRecordsPartitionResult::error(
            ResponseError::OffsetOutOfRange
        ))
    );
    let answer: Answer = Arc::default();
    let cell = answer.clone();
    rm.delete_records(
        &RequestContext::internal("admin"),
        30_000,
        vec![(TopicPartition::new("nope", 0), 0)],
        Box::new(move |results| *cell.lock() = results.into_iter().next().map(|(_, r)| r)),
    );
    assert_eq!(
        *answer.lock(),
        Some(DeleteRecordsPartitionResult::error(
            ResponseError::UnknownTopicOrPartition
        ))
    );
    assert_eq!(rm.delete_records_purgatory.delayed(), 0);
}
