//! `delete_records`: DeleteRecords below the handler (Kafka's `ReplicaManager.deleteRecords`).
//!
//! Each partition's leader moves its log start offset at once
//! ([`replog::Partition::delete_records_on_leader`]) and frees what lies below it. The
//! answer waits for the followers: a [`DelayedDeleteRecords`] is parked until every
//! partition's low watermark reaches the new log start, woken by the follower fetches
//! that report their own log start ([`ReplicaManager::follower_log_start_moved`]), or
//! until `timeout_ms` passes.
//!
//! ```text
//!   DeleteRecords ──► leader: log start = offset ──► follower fetch answer carries it
//!        │                                              └──► follower drops its records
//!        └──► DeleteRecords purgatory ◄── next follower fetch reports its log start
//! ```

use std::sync::Arc;

use kafka_protocol::ResponseError;

use super::ReplicaManager;
use crate::delayed::delete_records::counts;
use crate::delayed::{
    DelayedDeleteRecords, DeleteRecordsCallback, DeleteRecordsCompletion,
    DeleteRecordsPartitionResult, DeleteRecordsPartitionStatus, LiveBrokers, OpMeta,
};
use crate::partition::TopicPartition;
use crate::request::{Cause, RequestContext};
use crate::telemetry::{Park, PartitionNote};

/// Longest a DeleteRecords may wait for its followers, whatever `timeout_ms` asks for.
pub const MAX_DELETE_RECORDS_TIMEOUT_MS: u64 = 300_000;

impl ReplicaManager {
    /// Deletes the records below each `(partition, offset)` and answers through `respond`
    /// once every replica has followed, or when `timeout_ms` passes. Results come back in
    /// the order of `partitions`.
    pub fn delete_records(
        &self,
        ctx: &RequestContext,
        timeout_ms: u64,
        partitions: Vec<(TopicPartition, i64)>,
        respond: DeleteRecordsCallback,
    ) {
        let live_brokers = self.live_brokers();
        let live = live_brokers();
        let statuses: Vec<DeleteRecordsPartitionStatus> = dedup_last_wins(partitions)
            .into_iter()
            .map(|(tp, offset)| self.delete_on_leader(tp, offset, &live))
            .collect();
        if statuses.iter().all(|s| s.awaiting.is_none()) {
            // Every partition failed: nothing to wait for.
            self.telemetry
                .note_parked(ctx.trace, statuses.iter().map(note_of), None);
            respond(statuses.into_iter().map(|s| (s.tp, s.result)).collect());
            return;
        }
        let timeout_ms = timeout_ms.min(MAX_DELETE_RECORDS_TIMEOUT_MS);
        let meta = OpMeta::new(ctx, "delete-records", &self.timer, timeout_ms);
        let park = Park {
            purgatory: "DeleteRecords",
            created_ms: meta.created_ms,
            deadline_ms: meta.deadline_ms,
        };
        self.telemetry
            .note_parked(ctx.trace, statuses.iter().map(note_of), Some(park));
        let telemetry = self.telemetry.clone();
        let trace = ctx.trace;
        let completion: DeleteRecordsCompletion = Box::new(move |results, cause| {
            let errors = results.iter().map(|(_, r)| r.error.map(|e| e.code()));
            telemetry.completed(trace, cause, errors);
            respond(results);
        });
        let op = DelayedDeleteRecords::new(meta, live_brokers, statuses, completion);
        let keys = op.keys();
        op.log_created(&keys);
        // Completes at once if every replica is already there (no follower counts, or a
        // deletion below the current log start).
        self.delete_records_purgatory
            .try_complete_else_watch(op, timeout_ms, keys);
    }

    /// One partition's deletion on the leader. Its answer so far is the low watermark right
    /// after it, which a timeout answers with REQUEST_TIMED_OUT, as Kafka's does.
    fn delete_on_leader(
        &self,
        tp: TopicPartition,
        offset: i64,
        live: &Option<Vec<i32>>,
    ) -> DeleteRecordsPartitionStatus {
        let failed = |tp, error| DeleteRecordsPartitionStatus {
            tp,
            awaiting: None,
            result: DeleteRecordsPartitionResult::error(error),
        };
        let Some(handle) = self.partition(&tp.topic, tp.partition) else {
            return failed(tp, ResponseError::UnknownTopicOrPartition);
        };
        if self.topic(&tp.topic).is_some_and(|t| t.internal) {
            // Kafka: "Cannot delete records of internal topic".
            return failed(tp, ResponseError::InvalidTopicException);
        }
        let deleted = self.update_partition(&handle, |log| {
            let deleted = log.delete_records_on_leader(offset)?;
            Ok::<_, replog::DeleteRecordsError>((deleted, log.low_watermark(|id| counts(live, id))))
        });
        match deleted {
            Ok((deleted, low_watermark)) => {
                self.log_memory.release(deleted.bytes_freed);
                DeleteRecordsPartitionStatus {
                    tp,
                    awaiting: Some((handle, deleted.log_start_offset)),
                    result: DeleteRecordsPartitionResult {
                        error: None,
                        low_watermark,
                    },
                }
            }
            Err(e) => failed(tp, e.error()),
        }
    }

    /// The brokers whose followers hold a DeleteRecords: in a cluster the live ones (as
    /// Kafka counts the replicas on live brokers), with simulated followers all of them.
    fn live_brokers(&self) -> LiveBrokers {
        let rm = self.cluster.get().cloned();
        Arc::new(move || {
            let cluster = rm.as_ref()?.upgrade()?;
            Some(cluster.brokers().into_iter().map(|(id, _, _)| id).collect())
        })
    }

    /// A follower's fetch reported a new log start offset for `tp`: a parked
    /// DeleteRecords may now be done.
    pub(super) fn follower_log_start_moved(&self, tp: &TopicPartition, cause: Cause) {
        self.delete_records_purgatory
            .check_and_complete_with(tp, cause);
    }
}

/// A partition named twice in one request is deleted once, at the last offset given, as
/// Kafka's handler collects the request into a map. The order is the first mention's.
fn dedup_last_wins(partitions: Vec<(TopicPartition, i64)>) -> Vec<(TopicPartition, i64)> {
    let mut out: Vec<(TopicPartition, i64)> = Vec::with_capacity(partitions.len());
    let mut index: std::collections::HashMap<TopicPartition, usize> =
        std::collections::HashMap::with_capacity(partitions.len());
    for (tp, offset) in partitions {
        match index.get(&tp) {
            Some(&i) => out[i].1 = offset,
            None => {
                index.insert(tp.clone(), out.len());
                out.push((tp, offset));
            }
        }
    }
    out
}

/// What the request log keeps of one partition of a DeleteRecords.
fn note_of(s: &DeleteRecordsPartitionStatus) -> PartitionNote {
    PartitionNote {
        tp: s.tp.clone(),
        offset: s.result.low_watermark,
        last_offset: s.result.low_watermark,
        required: s.awaiting.as_ref().map(|(_, required)| *required),
        error: s.result.error.map(|e| e.code()),
    }
}
