//! `DelayedProduce`: an `acks=all` produce waiting for its records to be replicated.
//!
//! Per partition it needs `high_watermark >= required_offset` (the offset after its last
//! record): then every replica in the ISR has the batch. When that holds for all partitions
//! it completes with NONE — or, for a partition whose ISR had shrunk below the minimum in
//! force by the time the HW was seen to pass, NOT_ENOUGH_REPLICAS_AFTER_APPEND (Kafka's
//! `checkEnoughReplicasReachOffset`). A deleted partition completes with
//! UNKNOWN_TOPIC_OR_PARTITION. If the timeout (the request's `timeout_ms`) fires first,
//! the partitions still waiting answer REQUEST_TIMED_OUT.

use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use replog::ReplicationState;
use timewheel::{Completion, DelayedOperation};

use super::{ended_by, take_results, waiting_keys, Once, OpMeta, PartitionWait};
use crate::partition::TopicPartition;
use crate::request::Cause;

/// The outcome of one partition of a produce (Kafka's `PartitionResponse`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducePartitionResult {
    /// `None` on success.
    pub error: Option<ResponseError>,
    /// Why, in words (Produce v8+ carries it).
    pub message: Option<String>,
    /// Offset of the first appended record (-1 on error).
    pub base_offset: i64,
    /// The partition's log start offset (-1 on the errors Kafka answers without one:
    /// an unknown partition, a corrupt or oversized batch, ...).
    pub log_start_offset: i64,
}

impl ProducePartitionResult {
    /// A failed partition.
    pub fn error(error: ResponseError, message: impl Into<Option<String>>) -> Self {
        ProducePartitionResult {
            error: Some(error),
            message: message.into(),
            base_offset: -1,
            log_start_offset: -1,
        }
    }
}

/// Where a produce's answer goes: one result per partition, in the order they were given.
pub type ProduceCallback = Box<dyn FnOnce(Vec<(TopicPartition, ProducePartitionResult)>) + Send>;

/// Where a parked produce ends: its results, and what ended it (the change that satisfied
/// it, its timeout, or a partition's error). Whoever parked it decides what to do with
/// each: the replica manager tells the request log the cause and the handler the results.
pub type ProduceCompletion =
    Box<dyn FnOnce(Vec<(TopicPartition, ProducePartitionResult)>, Cause) + Send>;

/// One partition of a parked produce (Kafka's `ProducePartitionStatus`): it waits for
/// the high watermark to pass its batch.
pub type ProducePartitionStatus = PartitionWait<ProducePartitionResult>;

/// An `acks=all` produce parked in the produce purgatory.
pub struct DelayedProduce {
    meta: OpMeta,
    partitions: Mutex<Vec<ProducePartitionStatus>>,
    respond: Once<ProduceCompletion>,
}

impl DelayedProduce {
    /// Wraps the per-partition statuses of an appended produce.
    pub fn new(
        meta: OpMeta,
        partitions: Vec<ProducePartitionStatus>,
        respond: ProduceCompletion,
    ) -> Self {
        DelayedProduce {
            meta,
            partitions: Mutex::new(partitions),
            respond: Once::new(respond),
        }
    }

    /// Who asked and when it times out.
    pub fn meta(&self) -> &OpMeta {
        &self.meta
    }

    /// The partitions still waiting for their high watermark.
    pub fn keys(&self) -> Vec<TopicPartition> {
        waiting_keys(&self.partitions)
    }

    /// Traces the operation's creation.
    pub fn log_created(&self, keys: &[TopicPartition]) {
        self.meta.trace_created(
            "DelayedProduce",
            keys,
            &self.waits_for(),
            "acks=all produce parked until the high watermark passes it",
        );
    }

    /// What the operation still needs, in words.
    fn waits_for(&self) -> String {
        let partitions = self.partitions.lock();
        let mut parts = Vec::new();
        for p in partitions.iter() {
            if let Some((handle, required_offset)) = &p.awaiting {
                let (hw, isr) = {
                    let log = handle.lock();
                    (log.high_watermark(), log.isr())
                };
                parts.push(format!(
                    "{}: HW >= {required_offset} (HW now {hw}, ISR {isr:?})",
                    p.tp
                ));
            }
        }
        parts.join("; ")
    }
}

impl DelayedOperation for DelayedProduce {
    /// The change that woke the purgatory: a follower fetch, an append, an ISR shrink.
    type Cause = Cause;

    fn try_complete(&self) -> bool {
        let mut partitions = self.partitions.lock();
        let mut all_done = true;
        for p in partitions.iter_mut() {
            let Some((handle, required_offset)) = &p.awaiting else {
                continue;
            };
            let error = if handle.is_deleted() {
                Some(ResponseError::UnknownTopicOrPartition)
            } else {
                let log = handle.lock();
                match log.replication_state(*required_offset) {
                    // Leadership moved away while the produce waited (Kafka completes
                    // it the same way in makeFollowers): the client retries on the new
                    // leader, which may or may not have the records.
                    _ if !log.is_leader() => Some(ResponseError::NotLeaderOrFollower),
                    ReplicationState::Pending => {
                        all_done = false;
                        continue;
                    }
                    ReplicationState::Replicated => None,
                    ReplicationState::ReplicatedBelowMinIsr => {
                        Some(ResponseError::NotEnoughReplicasAfterAppend)
                    }
                }
            };
            if error.is_some() {
                p.result.error = error;
                p.result.message = error.map(|e| match e {
                    ResponseError::NotEnoughReplicasAfterAppend => "the high watermark passed \
                        the batch, but the ISR had shrunk below min.insync.replicas"
                        .to_string(),
                    ResponseError::NotLeaderOrFollower => {
                        "this broker stopped leading the partition before the high \
                         watermark reached the batch"
                            .to_string()
                    }
                    _ => "the topic was deleted".to_string(),
                });
            }
            p.awaiting = None;
        }
        all_done
    }

    fn on_complete(&self, how: Completion<Cause>) {
        let expired = matches!(how, Completion::Expired);
        // A partition the high watermark has not reached: the timeout fired first, or the
        // operation was completed from outside. Either way Kafka answers REQUEST_TIMED_OUT.
        let results = take_results(&self.partitions, |result| {
            result.error = Some(ResponseError::RequestTimedOut);
            result.message =
                Some("the high watermark did not reach this batch before timeout_ms".into());
        });
        let errors = results.iter().filter(|(_, r)| r.error.is_some()).count();
        let cause = ended_by(how, results.iter().find_map(|(_, r)| r.error));
        let why = if expired {
            "expired: REQUEST_TIMED_OUT"
        } else if errors > 0 {
            "error"
        } else {
            "high watermark reached"
        };
        self.meta.trace_completed("DelayedProduce", why);
        if let Some(respond) = self.respond.take() {
            respond(results, cause);
        }
    }

    fn describe(&self) -> String {
        format!(
            "{} waits for {}{}",
            self.meta.who("DelayedProduce"),
            self.waits_for(),
            self.meta.request_tag()
        )
    }
}
