//! A follower's own copy of one partition.
//!
//! # The Kafka concept
//!
//! Every replica of a partition keeps a log, and the most important number about it is the
//! **log end offset (LEO)**: the offset the *next* record will get, i.e. one past the last
//! record the replica holds. A follower asks the leader for data *starting at its LEO*, so
//! the `fetch_offset` in its Fetch request doubles as a report: "I have everything below
//! this offset". The leader records that as the follower's LEO, and sets the partition's
//! **high watermark** to the smallest LEO among the in-sync replicas. That is why an
//! `acks=all` produce is answered only after every in-sync follower has fetched *past* it:
//! the follower's *next* fetch, not the one that carried the data, is what moves the HW.
//!
//! This module is that log, reduced to what a simulator needs: the offsets (start and end)
//! and, for inspection, a bounded window of the most recent batches. Memory stays bounded
//! by `retain_bytes`; the oldest batches are dropped first (like retention, but it never
//! changes the offsets the follower reports).

use crate::batch::{check_batches, BatchError, CheckedBatches};
use bytes::Bytes;
use std::collections::VecDeque;

/// Default cap on the batches a follower keeps per partition: 64 MiB.
pub const DEFAULT_RETAIN_BYTES: usize = 64 * 1024 * 1024;

/// What an append did to the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendOutcome {
    /// Number of whole batches appended.
    pub batches: usize,
    /// Bytes of whole batches appended.
    pub bytes: usize,
    /// Bytes of a trailing partial batch that were dropped (KIP-74), to be fetched again.
    pub partial_tail_bytes: usize,
    /// The log end offset before the append.
    pub old_log_end_offset: i64,
    /// The log end offset after the append.
    pub new_log_end_offset: i64,
}

/// One partition as a follower holds it: offsets plus a bounded window of batches.
#[derive(Debug, Clone)]
pub struct PartitionLog {
    log_start_offset: i64,
    log_end_offset: i64,
    batches: VecDeque<Bytes>,
    retained_bytes: usize,
    retain_bytes: usize,
}

impl PartitionLog {
    /// An empty log starting at offset 0 that keeps at most `retain_bytes` of batches
    /// (0 keeps only the offsets).
    pub fn new(retain_bytes: usize) -> Self {
        PartitionLog {
            log_start_offset: 0,
            log_end_offset: 0,
            batches: VecDeque::new(),
            retained_bytes: 0,
            retain_bytes,
        }
    }

    /// The first offset this replica's log logically covers.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    /// One past the last offset held: the fetch offset of the next Fetch request.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// Bytes of batches currently kept in memory.
    pub fn retained_bytes(&self) -> usize {
        self.retained_bytes
    }

    /// The batches currently kept in memory, oldest first (byte-for-byte as the leader sent
    /// them). Older batches may have been dropped to honour `retain_bytes`.
    pub fn retained_batches(&self) -> impl Iterator<Item = &Bytes> {
        self.batches.iter()
    }

    /// True if nothing has been appended since the log was created or last reset.
    pub fn is_empty(&self) -> bool {
        self.log_end_offset == self.log_start_offset
    }

    /// Checks the `records` of a Fetch response against this log without changing it.
    ///
    /// A straddling first batch (starting before the LEO but containing it) is accepted only
    /// while the log is empty, which is the case right after a reset to the leader's log
    /// start offset.
    pub fn check(&self, records: &Bytes) -> Result<CheckedBatches, BatchError> {
        check_batches(records, self.log_end_offset, self.is_empty())
    }

    /// Appends batches that [`check`](Self::check) accepted.
    ///
    /// Fails with [`BatchError::Gap`] if the log end moved since the check (the batches are
    /// then stale and must be fetched again).
    pub fn commit(&mut self, checked: CheckedBatches) -> Result<AppendOutcome, BatchError> {
        self.commit_inner(checked, true)
    }

    /// Like [`commit`](Self::commit), but keeps the batches as they are instead of copying
    /// them: for the caller that knows they are slices of a buffer they mostly fill (a large
    /// Fetch response read into an allocation of its own), where a copy would only cost a
    /// pass over the data and fresh pages, and pins at most that buffer's small remainder.
    pub fn commit_shared(&mut self, checked: CheckedBatches) -> Result<AppendOutcome, BatchError> {
        self.commit_inner(checked, false)
    }

    fn commit_inner(
        &mut self,
        checked: CheckedBatches,
        copy: bool,
    ) -> Result<AppendOutcome, BatchError> {
        let old = self.log_end_offset;
        if checked.expected_offset != old {
            return Err(BatchError::Gap {
                expected: old,
                found: checked.expected_offset,
            });
        }
        let count = checked.batches.len();
        for b in checked.batches {
            if self.retain_bytes > 0 {
                // Copy, so a kept batch does not pin the whole response frame in memory.
                let b = if copy { Bytes::copy_from_slice(&b) } else { b };
                self.retained_bytes += b.len();
                self.batches.push_back(b);
            }
        }
        while self.retained_bytes > self.retain_bytes {
            match self.batches.pop_front() {
                Some(b) => self.retained_bytes -= b.len(),
                None => break,
            }
        }
        self.log_end_offset = checked.next_offset;
        Ok(AppendOutcome {
            batches: count,
            bytes: checked.batch_bytes,
            partial_tail_bytes: checked.partial_tail_bytes,
            old_log_end_offset: old,
            new_log_end_offset: self.log_end_offset,
        })
    }

    /// Checks and appends in one step.
    pub fn append(&mut self, records: &Bytes) -> Result<AppendOutcome, BatchError> {
        let checked = self.check(records)?;
        self.commit(checked)
    }

    /// Takes the leader's log start offset (retention or DeleteRecords moved it): the copy
    /// starts there too, up to its own log end, and drops the kept batches entirely below
    /// it. Its next fetch reports the new start, which is what a DeleteRecords waits for.
    pub fn advance_log_start(&mut self, leader_log_start_offset: i64) {
        let new_start = leader_log_start_offset.min(self.log_end_offset);
        if new_start <= self.log_start_offset {
            return;
        }
        while self
            .batches
            .front()
            .is_some_and(|b| batch_last_offset(b).is_some_and(|last| last < new_start))
        {
            if let Some(b) = self.batches.pop_front() {
                self.retained_bytes -= b.len();
            }
        }
        self.log_start_offset = new_start;
    }

    /// Throws the whole copy away and restarts the log at `offset`.
    ///
    /// This is what a follower does on `OFFSET_OUT_OF_RANGE`: its fetch offset is outside
    /// the leader's log (retention moved the leader's log start past it, or the leader lost
    /// data and is now shorter), so it truncates fully and refetches from the leader's log
    /// start.
    pub fn reset_to(&mut self, offset: i64) {
        self.batches.clear();
        self.retained_bytes = 0;
        self.log_start_offset = offset;
        self.log_end_offset = offset;
    }
}

/// The last offset of a v2 batch: `baseOffset` (bytes 0-7) plus `lastOffsetDelta` (bytes
/// 23-26). `None` for a batch too short to hold them (kept batches were checked whole).
fn batch_last_offset(batch: &[u8]) -> Option<i64> {
    let base = i64::from_be_bytes(batch.get(0..8)?.try_into().ok()?);
    let delta = i32::from_be_bytes(batch.get(23..27)?.try_into().ok()?);
    Some(base + i64::from(delta))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::testing::{batch, concat};

    #[test]
    fn appends_move_the_log_end_offset() {
        let mut log = PartitionLog::new(DEFAULT_RETAIN_BYTES);
        assert_eq!(log.log_end_offset(), 0);
        let out = log.append(&concat(&[batch(0, 3)])).expect("append");
        assert_eq!(out.batches, 1);
        assert_eq!(out.old_log_end_offset, 0);
        assert_eq!(out.new_log_end_offset, 3);
        log.append(&concat(&[batch(3, 2), batch(5, 1)]))
            .expect("append");
        assert_eq!(log.log_end_offset(), 6);
        assert_eq!(log.retained_batches().count(), 3);
    }

    #[test]
    fn a_gap_leaves_the_log_untouched() {
        let mut log = PartitionLog::new(DEFAULT_RETAIN_BYTES);
        log.append(&concat(&[batch(0, 3)])).expect("append");
        let err = log.append(&concat(&[batch(4, 1)])).unwrap_err();
        assert_eq!(
            err,
            BatchError::Gap {
                expected: 3,
                found: 4
            }
        );
        assert_eq!(log.log_end_offset(), 3);
        assert_eq!(log.retained_batches().count(), 1);
    }

    #[test]
    fn corruption_in_a_later_batch_rejects_the_whole_response() {
        let mut log = PartitionLog::new(DEFAULT_RETAIN_BYTES);
        let mut bad = batch(2, 2);
        bad[70] ^= 1;
        let err = log.append(&concat(&[batch(0, 2), bad])).unwrap_err();
        assert!(matches!(
            err,
            BatchError::CrcMismatch { base_offset: 2, .. }
        ));
        assert_eq!(log.log_end_offset(), 0, "all or nothing");
        assert_eq!(log.retained_bytes(), 0);
    }

    #[test]
    fn partial_tail_is_not_appended() {
        let mut log = PartitionLog::new(DEFAULT_RETAIN_BYTES);
        let mut bytes = batch(0, 2);
        bytes.extend_from_slice(&batch(2, 2)[..20]);
        let out = log.append(&Bytes::from(bytes)).expect("append");
        assert_eq!(out.partial_tail_bytes, 20);
        assert_eq!(log.log_end_offset(), 2);
        // The next fetch (from offset 2) brings the whole batch.
        log.append(&concat(&[batch(2, 2)])).expect("append");
        assert_eq!(log.log_end_offset(), 4);
    }

    #[test]
    fn stale_check_cannot_be_committed() {
        let mut log = PartitionLog::new(DEFAULT_RETAIN_BYTES);
        let checked = log.check(&concat(&[batch(0, 2)])).expect("check");
        log.append(&concat(&[batch(0, 1)])).expect("append");
        assert!(log.commit(checked).is_err());
        assert_eq!(log.log_end_offset(), 1);
    }

    #[test]
    fn memory_is_bounded_but_offsets_are_not_affected() {
        let one = batch(0, 1).len();
        let mut log = PartitionLog::new(one * 3);
        for i in 0..10 {
            log.append(&concat(&[batch(i, 1)])).expect("append");
        }
        assert_eq!(log.log_end_offset(), 10);
        assert_eq!(log.log_start_offset(), 0);
        assert_eq!(log.retained_batches().count(), 3);
        assert_eq!(log.retained_bytes(), one * 3);
        let first = log.retained_batches().next().expect("kept");
        assert_eq!(
            replog::batch::BatchHeader::parse(first).map(|h| h.base_offset),
            Some(7)
        );

        let mut offsets_only = PartitionLog::new(0);
        offsets_only
            .append(&concat(&[batch(0, 5)]))
            .expect("append");
        assert_eq!(offsets_only.log_end_offset(), 5);
        assert_eq!(offsets_only.retained_bytes(), 0);
    }

    #[test]
    fn the_leaders_log_start_drops_whole_batches_below_it() {
        let mut log = PartitionLog::new(DEFAULT_RETAIN_BYTES);
        log.append(&concat(&[batch(0, 3), batch(3, 3), batch(6, 3)]))
            .expect("append");
        let each = log.retained_bytes() / 3;
        // Offset 4 falls inside the second batch: only the first goes.
        log.advance_log_start(4);
        assert_eq!(
            (log.log_start_offset(), log.retained_bytes()),
            (4, 2 * each)
        );
        // Never back, and never past the copy's own end.
        log.advance_log_start(2);
        assert_eq!(log.log_start_offset(), 4);
        log.advance_log_start(50);
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (9, 9));
        assert_eq!(log.retained_bytes(), 0);
    }

    #[test]
    fn reset_restarts_at_the_leaders_log_start() {
        let mut log = PartitionLog::new(DEFAULT_RETAIN_BYTES);
        log.append(&concat(&[batch(0, 3)])).expect("append");
        log.reset_to(100);
        assert_eq!(log.log_start_offset(), 100);
        assert_eq!(log.log_end_offset(), 100);
        assert_eq!(log.retained_bytes(), 0);
        // Right after a reset, a batch containing the start offset is accepted.
        log.append(&concat(&[batch(98, 4)])).expect("straddle");
        assert_eq!(log.log_end_offset(), 102);
        // But not later.
        assert!(log.append(&concat(&[batch(101, 4)])).is_err());
    }
}
