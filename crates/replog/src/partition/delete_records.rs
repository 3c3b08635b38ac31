//! DeleteRecords on the leader, and the low watermark that says when it is done.
//!
//! `DeleteRecords(offset)` moves the leader's log start offset up to `offset` (-1 means
//! the high watermark): records below it can no longer be read, and the batches entirely
//! below it are freed. It may not go past the HW (OFFSET_OUT_OF_RANGE), since records
//! above it are not on every in-sync replica yet, and it never moves the start back.
//!
//! The deletion is only complete when every replica has dropped those records too. Each
//! follower learns the leader's new log start from its next fetch response, moves its own
//! ([`Partition::maybe_increment_log_start_offset`]), and reports it in the fetch after
//! that (Fetch's `log_start_offset`). The **low watermark** is the lowest log start offset
//! among the leader and the followers that count (Kafka's `lowWatermarkIfLeader` counts
//! the replicas on live brokers); a `DelayedDeleteRecords` waits until it reaches the
//! requested offset.

use super::Partition;
use crate::error::{DeleteRecordsError, RoleError};

/// What a deletion did on the leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordsDeleted {
    /// The offset the log now starts at, which the low watermark must reach.
    pub log_start_offset: i64,
    /// Bytes freed on the leader.
    pub bytes_freed: usize,
}

/// DeleteRecords' offset meaning "up to the high watermark".
pub const DELETE_UP_TO_HIGH_WATERMARK: i64 = -1;

impl Partition {
    /// Deletes the records below `offset` on the leader (Kafka's `deleteRecordsOnLeader`):
    /// -1 is the high watermark; above the HW, or any other negative offset, is
    /// [`DeleteRecordsError::OffsetOutOfRange`]. An offset below the current log start
    /// deletes nothing and succeeds.
    pub fn delete_records_on_leader(
        &mut self,
        offset: i64,
    ) -> Result<RecordsDeleted, DeleteRecordsError> {
        self.ensure_leader().map_err(DeleteRecordsError::Role)?;
        let target = match offset {
            DELETE_UP_TO_HIGH_WATERMARK => self.high_watermark,
            o if o < 0 || o > self.high_watermark => {
                return Err(DeleteRecordsError::OffsetOutOfRange {
                    offset,
                    high_watermark: self.high_watermark,
                })
            }
            o => o,
        };
        let bytes_freed = self.advance_log_start_offset(target);
        Ok(RecordsDeleted {
            log_start_offset: self.log_start_offset,
            bytes_freed,
        })
    }

    /// Records the log start offset follower `replica_id` reported in its fetch. Returns
    /// whether it changed (then a parked DeleteRecords may be done). Unknown ids and a
    /// negative offset (a fetch version that does not carry one) change nothing.
    pub fn update_follower_log_start_offset(
        &mut self,
        replica_id: i32,
        log_start_offset: i64,
    ) -> Result<bool, RoleError> {
        self.ensure_leader()?;
        if log_start_offset < 0 {
            return Ok(false);
        }
        let Some(follower) = self
            .followers
            .iter_mut()
            .find(|f| f.replica_id == replica_id)
        else {
            return Ok(false);
        };
        let changed = follower.log_start_offset != log_start_offset;
        follower.log_start_offset = log_start_offset;
        Ok(changed)
    }

    /// The lowest log start offset among this leader and the followers `counts` accepts
    /// (Kafka's `lowWatermarkIfLeader`, where the followers on live brokers count). A
    /// follower that has not reported its log start yet holds it at -1.
    pub fn low_watermark(&self, counts: impl Fn(i32) -> bool) -> i64 {
        self.followers
            .iter()
            .filter(|f| counts(f.replica_id))
            .map(|f| f.log_start_offset)
            .fold(self.log_start_offset, i64::min)
    }

    /// Moves the log start offset up to `new_start` (never back): whole batches entirely
    /// below it are dropped, one it falls inside stays (a read from the log start returns
    /// it whole, and the reader skips what lies below), and the leader epoch cache
    /// forgets the epochs below it. Returns the bytes freed.
    pub(super) fn advance_log_start_offset(&mut self, new_start: i64) -> usize {
        if new_start <= self.log_start_offset {
            return 0;
        }
        debug_assert!(new_start <= self.log_end_offset);
        let mut freed = 0;
        while self
            .batches
            .front()
            .is_some_and(|oldest| oldest.last_offset < new_start)
        {
            if let Some(oldest) = self.batches.pop_front() {
                freed += oldest.data.len();
            }
        }
        self.size_bytes -= freed;
        self.log_start_offset = new_start;
        self.epoch_cache.truncate_from_start(new_start);
        self.txns.on_log_start(new_start);
        debug_assert!(self.log_start_offset <= self.high_watermark);
        freed
    }
}
