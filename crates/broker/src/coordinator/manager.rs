//! Kafka's `GroupMetadataManager`, the part of the coordinator that talks to the log:
//! which `__consumer_offsets` partition a group lives in, creating that topic when it is
//! first needed, and appending group metadata and offset commits to it.
//!
//! Appends go through [`ReplicaManager::append_records`] like a producer's, with
//! `AppendOrigin::Coordinator` (only the broker may write to an internal topic),
//! `acks=-1` and `offsets.commit.timeout.ms`. So a commit is parked in the **produce
//! purgatory** as a `DelayedProduce` until the followers replicate it, exactly like an
//! `acks=all` write, and its answer comes back through the callback when the high watermark
//! passes it — or it times out. The append errors become the coordinator's errors as in
//! Kafka (`maybeConvertOffsetCommitError` and `storeGroup`'s mapping).
//!
//! Writes to one partition are answered in order, as Kafka's coordinator runtime answers
//! them: a group request that appends nothing of its own — a heartbeat, a leave, a
//! re-sync, an OffsetFetch with `require_stable` — is answered only once what the
//! coordinator wrote to the group's partition before it is replicated
//! ([`GroupMetadataManager::after_pending_writes`]). With the followers stopped behind an
//! unreplicated commit, a heartbeat therefore waits `offsets.commit.timeout.ms` and fails,
//! which is what Kafka 4.4 answers (the conformance harness measured it).

use std::sync::{Arc, Weak};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use tracing::warn;

use super::records;
use crate::delayed::produce::ProducePartitionStatus;
use crate::delayed::{DelayedProduce, OpMeta, ProducePartitionResult};
use crate::partition::TopicPartition;
use crate::record_batch::wall_clock_ms;
use crate::replica_manager::{AppendOrigin, ReplicaManager};
use crate::request::RequestContext;
use crate::topics::{self, OFFSETS_TOPIC};

/// Where an append's outcome goes: the base offset it landed at, or the error.
pub type AppendCallback = Box<dyn FnOnce(Result<i64, ResponseError>) + Send>;

/// Where [`GroupMetadataManager::after_pending_writes`] calls back: `Ok` once the earlier
/// writes are replicated, or the error that ended the wait (REQUEST_TIMED_OUT, ...).
pub type WaitCallback = Box<dyn FnOnce(Result<(), ResponseError>) + Send>;

/// The log side of the coordinator.
pub struct GroupMetadataManager {
    rm: Weak<ReplicaManager>,
    /// `offsets.topic.num.partitions`.
    pub num_partitions: i32,
    /// `offsets.commit.timeout.ms`.
    pub commit_timeout_ms: u64,
    /// The partition count groups are spread over, fixed the first time the topic is
    /// seen, as Kafka's coordinator fixes it when it starts: partitions added to
    /// `__consumer_offsets` later (CreatePartitions) do not move any group away from the
    /// partition that holds its state. 0 until then; taken again if the topic is found
    /// with fewer partitions (deleted and created anew).
    spread: std::sync::atomic::AtomicI32,
}

impl GroupMetadataManager {
    /// A manager appending through `rm`.
    pub fn new(rm: &Arc<ReplicaManager>) -> Self {
        GroupMetadataManager {
            num_partitions: rm.config.offsets_topic_num_partitions,
            commit_timeout_ms: rm.config.offsets_commit_timeout_ms.max(0) as u64,
            spread: std::sync::atomic::AtomicI32::new(0),
            rm: Arc::downgrade(rm),
        }
    }

    /// The `__consumer_offsets` partition that holds `group`.
    pub fn partition_for(&self, group: &str) -> i32 {
        records::partition_for(group, self.partitions())
    }

    /// The partition count in force: the topic's own once it exists (so a topic created
    /// with another count keeps every group in a partition that exists), as it was when
    /// first seen; else the config.
    fn partitions(&self) -> i32 {
        use std::sync::atomic::Ordering;
        let Some(topic) = self.rm.upgrade().and_then(|rm| rm.topic(OFFSETS_TOPIC)) else {
            return self.num_partitions;
        };
        let now = topic.partitions.len() as i32;
        let fixed = self.spread.load(Ordering::Acquire);
        if fixed > 0 && fixed <= now {
            return fixed;
        }
        self.spread.store(now, Ordering::Release);
        now
    }

    /// `__consumer_offsets-N` for `group`.
    pub fn topic_partition_for(&self, group: &str) -> TopicPartition {
        TopicPartition::new(OFFSETS_TOPIC, self.partition_for(group))
    }

    /// Whether this broker coordinates `group`: it leads the group's `__consumer_offsets`
    /// partition, or that topic does not exist yet (the first group request creates it,
    /// and a single broker leads all of it). NOT_COORDINATOR otherwise, which sends the
    /// client back to FindCoordinator.
    pub fn check_coordinator(&self, group: &str) -> Result<(), ResponseError> {
        let Some(rm) = self.rm.upgrade() else {
            return Err(ResponseError::CoordinatorNotAvailable);
        };
        let Some(topic) = rm.topic(OFFSETS_TOPIC) else {
            return Ok(());
        };
        let index = self.partition_for(group);
        match topic.partitions.get(index as usize) {
            Some(p) if p.lock().is_leader() => Ok(()),
            _ => Err(ResponseError::NotCoordinator),
        }
    }

    /// Creates `__consumer_offsets` unless it exists. The error says why it cannot be
    /// (e.g. `max.partitions`); callers answer COORDINATOR_NOT_AVAILABLE with it.
    pub fn ensure_offsets_topic(&self) -> Result<(), String> {
        let rm = self
            .rm
            .upgrade()
            .ok_or_else(|| "the broker is shutting down".to_string())?;
        if rm.topic(OFFSETS_TOPIC).is_some() {
            return Ok(());
        }
        match rm.create_topic(topics::offsets_topic(&rm.config), false) {
            Ok(_) => Ok(()),
            Err(e) if e.error == ResponseError::TopicAlreadyExists => Ok(()),
            Err(e) => {
                warn!(error = %e.message, "cannot create {OFFSETS_TOPIC}");
                Err(format!("cannot create {OFFSETS_TOPIC}: {}", e.message))
            }
        }
    }

    /// Appends `records` (key, value or tombstone) for `group` with acks=-1, answering
    /// `callback` with the append's own error (callers map it) once the high watermark
    /// passes them, or `offsets.commit.timeout.ms` passes. With `transaction` (producer
    /// id, epoch) they are a transactional batch of that transaction.
    pub fn append(
        &self,
        ctx: &RequestContext,
        group: &str,
        records: &[(Bytes, Option<Bytes>)],
        transaction: Option<(i64, i16)>,
        callback: AppendCallback,
    ) {
        let Some(rm) = self.rm.upgrade() else {
            callback(Err(ResponseError::CoordinatorNotAvailable));
            return;
        };
        if let Err(why) = self.ensure_offsets_topic() {
            warn!(group, %why, "cannot store group state");
            callback(Err(ResponseError::UnknownTopicOrPartition));
            return;
        }
        let batch = match records::batch(records, wall_clock_ms(), transaction) {
            Ok(batch) => batch,
            Err(e) => {
                warn!(group, error = %e, "cannot encode a __consumer_offsets batch");
                callback(Err(ResponseError::UnknownServerError));
                return;
            }
        };
        let tp = self.topic_partition_for(group);
        rm.append_records(
            ctx,
            self.commit_timeout_ms,
            -1,
            AppendOrigin::Coordinator,
            vec![(tp, batch)],
            Box::new(move |results| {
                let outcome = match results.into_iter().next() {
                    Some((_, r)) => match r.error {
                        None => Ok(r.base_offset),
                        Some(e) => Err(e),
                    },
                    None => Err(ResponseError::UnknownServerError),
                };
                callback(outcome);
            }),
        );
    }
}

impl GroupMetadataManager {
    /// Calls `callback` once everything the coordinator has written to `group`'s partition
    /// so far is replicated: at once when its high watermark is at its log end already
    /// (or the partition does not exist yet: nothing was written), else when the high
    /// watermark gets there, or with REQUEST_TIMED_OUT after `offsets.commit.timeout.ms`.
    ///
    /// The wait is a `DelayedProduce` of no records, needing the log end it found, in
    /// the produce purgatory beside the writes it waits behind (Kafka's runtime keeps its
    /// own deferred-event queue, to the same effect). `kind` names it there: `heartbeat`,
    /// `leave-group`, ...
    pub fn after_pending_writes(
        &self,
        ctx: &RequestContext,
        kind: &'static str,
        group: &str,
        callback: WaitCallback,
    ) {
        let Some(rm) = self.rm.upgrade() else {
            callback(Err(ResponseError::CoordinatorNotAvailable));
            return;
        };
        let tp = self.topic_partition_for(group);
        let Some(handle) = rm.partition(&tp.topic, tp.partition) else {
            callback(Ok(()));
            return;
        };
        let pending_until = {
            let log = handle.lock();
            (log.high_watermark() < log.log_end_offset()).then(|| log.log_end_offset())
        };
        let Some(required_offset) = pending_until else {
            callback(Ok(()));
            return;
        };
        let status = ProducePartitionStatus {
            tp,
            awaiting: Some((handle, required_offset)),
            result: ProducePartitionResult {
                error: None,
                message: None,
                base_offset: -1,
                log_start_offset: -1,
            },
        };
        let meta = OpMeta::new(ctx, kind, &rm.timer, self.commit_timeout_ms);
        let op = DelayedProduce::new(
            meta,
            vec![status],
            Box::new(move |results, _ended_by| {
                let error = results.into_iter().find_map(|(_, r)| r.error);
                callback(error.map_or(Ok(()), Err));
            }),
        );
        let keys = op.keys();
        op.log_created(&keys);
        rm.produce_purgatory
            .try_complete_else_watch(op, self.commit_timeout_ms, keys);
    }
}

/// An offset commit's append error as the client sees it (Kafka's
/// `maybeConvertOffsetCommitError`): not replicated in time or not enough replicas means
/// "this coordinator cannot take commits now, find it again and retry".
pub fn offset_commit_error(append: ResponseError) -> ResponseError {
    use ResponseError::*;
    match append {
        UnknownTopicOrPartition
        | NotEnoughReplicas
        | NotEnoughReplicasAfterAppend
        | RequestTimedOut => CoordinatorNotAvailable,
        NotLeaderOrFollower | KafkaStorageError => NotCoordinator,
        MessageTooLarge | RecordListTooLarge | InvalidFetchSize => InvalidCommitOffsetSize,
        other => other,
    }
}

/// A group metadata append error as SyncGroup answers it. Kafka 4.4's coordinator
/// answers a timed-out store COORDINATOR_NOT_AVAILABLE, as it does a commit (the old
/// coordinator's `storeGroup` said REBALANCE_IN_PROGRESS); either way the group then
/// rebalances.
pub fn store_group_error(append: ResponseError) -> ResponseError {
    use ResponseError::*;
    match append {
        UnknownTopicOrPartition
        | NotEnoughReplicas
        | NotEnoughReplicasAfterAppend
        | RequestTimedOut => CoordinatorNotAvailable,
        NotLeaderOrFollower | KafkaStorageError => NotCoordinator,
        MessageTooLarge | RecordListTooLarge | InvalidFetchSize => UnknownServerError,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_errors_map_as_in_kafka() {
        use ResponseError::*;
        for e in [
            NotEnoughReplicas,
            NotEnoughReplicasAfterAppend,
            RequestTimedOut,
            UnknownTopicOrPartition,
        ] {
            assert_eq!(offset_commit_error(e), CoordinatorNotAvailable, "{e:?}");
        }
        assert_eq!(offset_commit_error(NotLeaderOrFollower), NotCoordinator);
        assert_eq!(
            offset_commit_error(MessageTooLarge),
            InvalidCommitOffsetSize
        );
        assert_eq!(store_group_error(RequestTimedOut), CoordinatorNotAvailable);
        assert_eq!(
            store_group_error(NotEnoughReplicas),
            CoordinatorNotAvailable
        );
        assert_eq!(store_group_error(MessageTooLarge), UnknownServerError);
    }
}
