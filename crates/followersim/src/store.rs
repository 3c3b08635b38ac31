//! Where a follower keeps what it fetches.
//!
//! The fetch loop (`fetcher.rs`) is the same whoever the follower is: it asks the leader
//! for data from its log end offset, checks the batches and appends them. What differs is
//! the log it appends to. A simulated follower keeps its own [`PartitionLog`] (offsets plus
//! a bounded window of batches); a broker that follows a partition keeps the records in its
//! own replicated log, the one it would serve from if it became the leader. So the fetch
//! loop talks to a [`ReplicaLog`] per partition, opened through [`ReplicaLogs`], and
//! [`MemoryLogs`] is the simulated follower's.
//!
//! Besides appending, a log that tracks leader epochs lets the fetcher detect divergence
//! (Fetch v12's `last_fetched_epoch`, answered with a `diverging_epoch`) and truncate, as
//! Kafka's replica fetcher does after a leader change (KIP-320).

use std::sync::Arc;

use bytes::Bytes;

use crate::batch::{check_batches, BatchError, CheckedBatches};
use crate::log::{AppendOutcome, PartitionLog};

/// A follower's copy of one partition, as the fetch loop uses it.
pub trait ReplicaLog: Send + std::fmt::Debug {
    /// The first offset the copy covers.
    fn log_start_offset(&self) -> i64;

    /// One past the last offset held: the next Fetch's `fetch_offset`.
    fn log_end_offset(&self) -> i64;

    /// Checks fetched `records` against the log end offset without changing anything:
    /// whole batches, contiguous from the LEO, intact.
    fn check(&self, records: &Bytes) -> Result<CheckedBatches, BatchError> {
        let leo = self.log_end_offset();
        check_batches(records, leo, leo == self.log_start_offset())
    }

    /// Appends batches [`check`](Self::check) accepted. `shared` says the batches are
    /// slices of a buffer they mostly fill and may be kept without a copy.
    fn commit(
        &mut self,
        checked: CheckedBatches,
        shared: bool,
    ) -> Result<AppendOutcome, BatchError>;

    /// Throws the copy away and starts again, empty, at `offset` (the leader's log start,
    /// after OFFSET_OUT_OF_RANGE).
    fn reset_to(&mut self, offset: i64);

    /// Bytes of record data this copy holds in memory.
    fn retained_bytes(&self) -> usize;

    /// The leader epoch of the last batch held (Fetch's `last_fetched_epoch`), or -1 if
    /// this log does not track epochs (then the leader skips its divergence check).
    fn last_fetched_epoch(&self) -> i32 {
        -1
    }

    /// This log's end offset for `epoch`: the start of the first epoch above it, or the
    /// log end. `None` if the log does not track epochs.
    fn end_offset_for_epoch(&self, _epoch: i32) -> Option<i64> {
        None
    }

    /// Drops every record at or above `offset` (after the leader said the logs diverge).
    /// Returns the new log end offset.
    fn truncate_to(&mut self, offset: i64) -> i64 {
        if offset < self.log_end_offset() {
            self.reset_to(offset);
        }
        self.log_end_offset()
    }

    /// The leader's high watermark and log start offset, as its last answer gave them.
    fn leader_progress(&mut self, _high_watermark: i64, _log_start_offset: i64) {}

    /// A copy of the simulated follower's log, for tests and inspection.
    fn memory_copy(&self) -> Option<PartitionLog> {
        None
    }
}

/// Opens a follower's copy of each partition it starts following.
pub trait ReplicaLogs: Send + Sync {
    /// The copy of `topic`-`partition`, or `None` if this follower keeps none of it (a
    /// broker that is not told it hosts the partition).
    fn open(&self, topic: &str, partition: i32) -> Option<Box<dyn ReplicaLog>>;
}

/// The simulated follower's logs: one [`PartitionLog`] per partition, in memory, keeping
/// at most `retain_bytes` of batches each.
pub struct MemoryLogs {
    retain_bytes: usize,
}

impl MemoryLogs {
    /// Logs that keep at most `retain_bytes` of batches per partition.
    pub fn new(retain_bytes: usize) -> Arc<Self> {
        Arc::new(MemoryLogs { retain_bytes })
    }
}

impl ReplicaLogs for MemoryLogs {
    fn open(&self, _topic: &str, _partition: i32) -> Option<Box<dyn ReplicaLog>> {
        Some(Box::new(PartitionLog::new(self.retain_bytes)))
    }
}

impl ReplicaLog for PartitionLog {
    fn log_start_offset(&self) -> i64 {
        PartitionLog::log_start_offset(self)
    }

    fn log_end_offset(&self) -> i64 {
        PartitionLog::log_end_offset(self)
    }

    fn check(&self, records: &Bytes) -> Result<CheckedBatches, BatchError> {
        PartitionLog::check(self, records)
    }

    fn commit(
        &mut self,
        checked: CheckedBatches,
        shared: bool,
    ) -> Result<AppendOutcome, BatchError> {
        if shared {
            self.commit_shared(checked)
        } else {
            PartitionLog::commit(self, checked)
        }
    }

    fn reset_to(&mut self, offset: i64) {
        PartitionLog::reset_to(self, offset)
    }

    fn retained_bytes(&self) -> usize {
        PartitionLog::retained_bytes(self)
    }

    fn leader_progress(&mut self, _high_watermark: i64, log_start_offset: i64) {
        if log_start_offset >= 0 {
            self.advance_log_start(log_start_offset);
        }
    }

    fn memory_copy(&self) -> Option<PartitionLog> {
        Some(self.clone())
    }
}
