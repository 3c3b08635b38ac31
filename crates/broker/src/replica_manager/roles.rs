//! A partition changing role on this broker, and a follower's side of replication.
//!
//! Kafka's controller tells each broker, for each partition, whether it leads it or
//! follows a given leader in a given leader epoch (`ReplicaManager.becomeLeaderOrFollower`,
//! with its `makeLeaders` and `makeFollowers`). A partition that stops being led here has
//! requests parked on it: they complete at once with NOT_LEADER_OR_FOLLOWER, so that their
//! clients refresh their metadata and retry on the new leader.
//!
//! As a follower, the broker's replica fetcher ([`crate::replica_fetcher`]) hands it what
//! it fetched from the leader: batches to append as they are (offsets and epochs set by
//! the leader), the leader's high watermark and log start offset, and, when the logs have
//! diverged, an offset to truncate to. Those land here, so that the broker's log memory
//! counts a follower's copy like a leader's.

use bytes::Bytes;
use replog::{AppendInfo, FollowerAppendError, RoleError, Truncation};
use tracing::info;

use super::ReplicaManager;
use crate::partition::PartitionHandle;
use crate::request::Cause;

impl ReplicaManager {
    /// This broker leads `handle`'s partition from `leader_epoch` on, with `replicas` and
    /// `isr` as the controller has them (Kafka's `makeLeaders`).
    pub fn make_leader(
        &self,
        handle: &PartitionHandle,
        leader_epoch: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
    ) -> Result<(), RoleError> {
        let now = self.now_ms();
        let change = handle
            .lock()
            .make_leader(leader_epoch, replicas, isr, now)?;
        info!(tp = %handle.tp, leader_epoch, "now the leader");
        self.complete_waiting(&handle.tp, &change, Cause::Unknown);
        Ok(())
    }

    /// This broker follows `leader_id` for `handle`'s partition from `leader_epoch` on
    /// (Kafka's `makeFollowers`). Produces and fetches parked on it complete with
    /// NOT_LEADER_OR_FOLLOWER.
    pub fn make_follower(
        &self,
        handle: &PartitionHandle,
        leader_id: i32,
        leader_epoch: i32,
    ) -> Result<(), RoleError> {
        let now = self.now_ms();
        handle.lock().make_follower(leader_id, leader_epoch, now)?;
        info!(tp = %handle.tp, leader_id, leader_epoch, "now a follower");
        let cause = Cause::Error(kafka_protocol::ResponseError::NotLeaderOrFollower.code());
        self.produce_purgatory
            .check_and_complete_with(&handle.tp, cause);
        self.fetch_purgatory
            .check_and_complete_with(&handle.tp, cause);
        Ok(())
    }

    /// This broker stops, killed or shut down: from now on it leads nothing. Every
    /// partition follows nobody (-1) at the epoch it has, so what was parked on those it
    /// led completes with NOT_LEADER_OR_FOLLOWER, and its ISR checks find no followers.
    /// When it comes back, the controller gives it its roles again.
    pub fn resign_all(&self) {
        for handle in self.topics.partitions() {
            let epoch = handle.lock().leader_epoch();
            if let Err(e) = self.make_follower(&handle, -1, epoch) {
                tracing::warn!(tp = %handle.tp, "cannot step down: {e}");
            }
        }
    }

    /// Appends batches fetched from the leader (Kafka's
    /// `appendRecordsToFollowerOrFutureReplica`), within this broker's log memory: room is
    /// made by evicting replicated batches, as for a leader's append.
    pub fn append_as_follower(
        &self,
        handle: &PartitionHandle,
        records: Bytes,
    ) -> Result<AppendInfo, FollowerAppendError> {
        let partitions = || self.topics.partitions();
        // A follower does not refuse the leader's data for want of memory: what it cannot
        // evict it holds over the cap, as a full disk would still hold what it has.
        let _ = self.log_memory.reserve(records.len(), partitions);
        let now = self.now_ms();
        let appended = handle.lock().append_as_follower(records, now)?;
        self.log_memory.add(appended.bytes);
        Ok(appended)
    }

    /// Takes the leader's high watermark and log start offset, as its last fetch answer
    /// gave them: a follower's HW is the leader's, capped at its own log end.
    pub fn follow_leader_progress(
        &self,
        handle: &PartitionHandle,
        leader_high_watermark: i64,
        leader_log_start_offset: i64,
    ) {
        let mut log = handle.lock();
        if log.is_leader() {
            return;
        }
        if leader_high_watermark >= 0 {
            let _ = log.update_high_watermark_as_follower(leader_high_watermark);
        }
        if leader_log_start_offset >= 0 {
            if let Ok(freed) = log.maybe_increment_log_start_offset(leader_log_start_offset) {
                self.log_memory.release(freed);
            }
        }
    }

    /// Drops this follower's records from `offset` on (its log diverged from the new
    /// leader's), and says which offsets went.
    pub fn truncate(&self, handle: &PartitionHandle, offset: i64) -> Result<Truncation, RoleError> {
        let truncation = handle.lock().truncate_to(offset)?;
        self.log_memory.release(truncation.bytes_dropped);
        if truncation.truncated() {
            self.telemetry.truncated(
                &handle.tp,
                self.now_ms(),
                self.config.broker_id,
                (
                    truncation.old_log_end_offset,
                    truncation.new_log_end_offset,
                    truncation.records_dropped as u64,
                ),
            );
            info!(
                tp = %handle.tp,
                "truncated offsets {}..{} ({} records) to follow the leader's log",
                truncation.new_log_end_offset,
                truncation.old_log_end_offset,
                truncation.records_dropped
            );
        }
        Ok(truncation)
    }

    /// Empties this follower's copy and starts it at `offset` (its fetch offset is outside
    /// the leader's log).
    pub fn truncate_fully_and_start_at(
        &self,
        handle: &PartitionHandle,
        offset: i64,
    ) -> Result<Truncation, RoleError> {
        let truncation = handle.lock().truncate_fully_and_start_at(offset)?;
        self.log_memory.release(truncation.bytes_dropped);
        info!(
            tp = %handle.tp,
            "emptied the copy, which ended at {}; replicating again from offset {offset}",
            truncation.old_log_end_offset
        );
        Ok(truncation)
    }
}
