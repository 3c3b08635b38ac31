//! `DelayedDeleteRecords`: a DeleteRecords waiting for every replica to drop the records.
//!
//! The leader moved its log start at once. Per partition the operation then needs the
//! partition's **low watermark** (the lowest log start offset among the leader and the
//! followers on live brokers) to reach the offset the leader now starts at: each follower
//! drops the records when a fetch response tells it the new log start, and says so in its
//! next fetch. When every partition is there it completes, answering each partition's low
//! watermark. A partition that stopped being led here answers NOT_LEADER_OR_FOLLOWER, a
//! deleted one UNKNOWN_TOPIC_OR_PARTITION. If the timeout (the request's `timeout_ms`)
//! fires first, the partitions still waiting answer REQUEST_TIMED_OUT with the low
//! watermark the deletion left (what the followers had then), as Kafka's do.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use timewheel::{Completion, DelayedOperation};

use super::{ended_by, take_results, waiting_keys, Once, OpMeta, PartitionWait};
use crate::partition::TopicPartition;
use crate::request::Cause;

/// Kafka's `DeleteRecordsResponse.INVALID_LOW_WATERMARK`: the answer of a failed partition.
pub const INVALID_LOW_WATERMARK: i64 = -1;

/// The outcome of one partition of a DeleteRecords.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeleteRecordsPartitionResult {
    /// `None` on success.
    pub error: Option<ResponseError>,
    /// The partition's low watermark once every replica followed (-1 on error).
    pub low_watermark: i64,
}

impl DeleteRecordsPartitionResult {
    /// A failed partition.
    pub fn error(error: ResponseError) -> Self {
        DeleteRecordsPartitionResult {
            error: Some(error),
            low_watermark: INVALID_LOW_WATERMARK,
        }
    }
}

/// The live brokers, whose followers hold the low watermark (Kafka counts the replicas on
/// live brokers); `None` when every follower counts (a broker with simulated followers).
/// Asked before any partition lock is taken, since the answer may need the controller's.
pub type LiveBrokers = Arc<dyn Fn() -> Option<Vec<i32>> + Send + Sync>;

/// Whether follower `id` counts, given [`LiveBrokers`]' answer.
pub fn counts(live: &Option<Vec<i32>>, id: i32) -> bool {
    live.as_ref().is_none_or(|ids| ids.contains(&id))
}

/// Where a DeleteRecords' answer goes: one result per partition, in request order.
pub type DeleteRecordsCallback =
    Box<dyn FnOnce(Vec<(TopicPartition, DeleteRecordsPartitionResult)>) + Send>;

/// Where a parked DeleteRecords ends: its results, and what ended it.
pub type DeleteRecordsCompletion =
    Box<dyn FnOnce(Vec<(TopicPartition, DeleteRecordsPartitionResult)>, Cause) + Send>;

/// One partition of a DeleteRecords (Kafka's `DeleteRecordsPartitionStatus`): it waits
/// for the low watermark, every replica's log start, to reach the new one. Its result
/// is an error found on the leader, or the low watermark reached.
pub type DeleteRecordsPartitionStatus = PartitionWait<DeleteRecordsPartitionResult>;

/// A DeleteRecords parked in the DeleteRecords purgatory.
pub struct DelayedDeleteRecords {
    meta: OpMeta,
    live: LiveBrokers,
    partitions: Mutex<Vec<DeleteRecordsPartitionStatus>>,
    respond: Once<DeleteRecordsCompletion>,
}

impl DelayedDeleteRecords {
    /// Wraps the per-partition statuses of a deletion done on the leader.
    pub fn new(
        meta: OpMeta,
        live: LiveBrokers,
        partitions: Vec<DeleteRecordsPartitionStatus>,
        respond: DeleteRecordsCompletion,
    ) -> Self {
        DelayedDeleteRecords {
            meta,
            live,
            partitions: Mutex::new(partitions),
            respond: Once::new(respond),
        }
    }

    /// The partitions still waiting for their low watermark.
    pub fn keys(&self) -> Vec<TopicPartition> {
        waiting_keys(&self.partitions)
    }

    /// Traces the operation's creation.
    pub fn log_created(&self, keys: &[TopicPartition]) {
        self.meta.trace_created(
            "DelayedDeleteRecords",
            keys,
            &self.waits_for(),
            "DeleteRecords parked until every replica's log start reaches it",
        );
    }

    /// What the operation still needs, in words.
    fn waits_for(&self) -> String {
        let live = (self.live)();
        let partitions = self.partitions.lock();
        let mut parts = Vec::new();
        for p in partitions.iter() {
            if let Some((handle, required)) = &p.awaiting {
                let log = handle.lock();
                let starts: Vec<String> = log
                    .followers()
                    .iter()
                    .filter(|f| counts(&live, f.replica_id))
                    .map(|f| format!("{}: {}", f.replica_id, f.log_start_offset))
                    .collect();
                parts.push(format!(
                    "{}: low watermark >= {required} (now {}; follower log starts {{{}}})",
                    p.tp,
                    log.low_watermark(|id| counts(&live, id)),
                    starts.join(", ")
                ));
            }
        }
        parts.join("; ")
    }
}

impl DelayedOperation for DelayedDeleteRecords {
    /// The change that woke the purgatory: a follower fetch reporting its log start.
    type Cause = Cause;

    fn try_complete(&self) -> bool {
        let live = (self.live)();
        let mut partitions = self.partitions.lock();
        let mut all_done = true;
        for p in partitions.iter_mut() {
            let Some((handle, required)) = &p.awaiting else {
                continue;
            };
            p.result = if handle.is_deleted() {
                DeleteRecordsPartitionResult::error(ResponseError::UnknownTopicOrPartition)
            } else {
                let log = handle.lock();
                let low_watermark = log.low_watermark(|id| counts(&live, id));
                if !log.is_leader() {
                    DeleteRecordsPartitionResult::error(ResponseError::NotLeaderOrFollower)
                } else if low_watermark >= *required {
                    DeleteRecordsPartitionResult {
                        error: None,
                        low_watermark,
                    }
                } else {
                    all_done = false;
                    continue;
                }
            };
            p.awaiting = None;
        }
        all_done
    }

    fn on_complete(&self, how: Completion<Cause>) {
        let expired = matches!(how, Completion::Expired);
        // Still waiting: the timeout fired first (or it was completed from outside). Kafka
        // answers the low watermark the deletion left, with the error.
        let results = take_results(&self.partitions, |result| {
            result.error = Some(ResponseError::RequestTimedOut);
        });
        let cause = ended_by(how, results.iter().find_map(|(_, r)| r.error));
        let why = if expired {
            "expired: REQUEST_TIMED_OUT"
        } else {
            "low watermark reached"
        };
        self.meta.trace_completed("DelayedDeleteRecords", why);
        if let Some(respond) = self.respond.take() {
            respond(results, cause);
        }
    }

    fn describe(&self) -> String {
        format!(
            "{} waits for {}{}",
            self.meta.who("DelayedDeleteRecords"),
            self.waits_for(),
            self.meta.request_tag()
        )
    }
}
