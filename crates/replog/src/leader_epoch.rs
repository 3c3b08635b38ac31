//! # The leader epoch cache: which leader wrote which offsets
//!
//! Every time a partition gets a new leader, the controller bumps its **leader epoch**,
//! and the leader stamps that epoch into every batch it appends
//! (`partitionLeaderEpoch`). Each replica keeps, next to its log, the list of epochs its
//! log holds and the offset at which each one starts (Kafka's `LeaderEpochFileCache`,
//! kept in memory here):
//!
//! ```text
//!   epoch 0 starts at 0, epoch 2 starts at 7, epoch 5 starts at 12     (LEO 15)
//!   offsets  0 1 2 3 4 5 6 | 7 8 9 10 11 | 12 13 14
//!            epoch 0       | epoch 2     | epoch 5
//! ```
//!
//! Both columns strictly increase. An epoch with no batch in the log (a leader that was
//! elected and lost its leadership before anything was written) has no entry.
//!
//! The cache answers the question that makes truncation safe (KIP-101, KIP-279): *where
//! does epoch E end in this log?* For a requested epoch E, the answer is the largest
//! epoch at or below E that the log holds, and the offset where the next epoch starts
//! (the log end offset if that epoch is the latest). A follower that asks its new leader
//! this for its own latest epoch learns exactly how much of its log the leader shares,
//! and truncates the rest: records only it had, written by a leader that lost them.
//!
//! Kafka's answers, which [`LeaderEpochCache::end_offset_for`] reproduces:
//!
//! | requested epoch E                         | answer                                    |
//! |-------------------------------------------|-------------------------------------------|
//! | negative (`UNDEFINED_EPOCH`)              | `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)` |
//! | the latest epoch                          | `(E, log end offset)`                      |
//! | above the latest epoch                    | `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)` |
//! | between two cached epochs (or on one)     | `(largest cached epoch <= E, start of the next cached epoch)` |
//! | below every cached epoch                  | `(E, start of the first cached epoch)`     |
//!
//! The last row is not "undefined": the epochs before the first one were removed with
//! the start of the log (retention, DeleteRecords), and answering the first cached
//! epoch's start offset lets a follower that still has such old records truncate to
//! where the leader's log begins and replicate from there. An empty cache knows nothing
//! and answers undefined for everything.
//!
//! The cache moves with the log: appends add an entry when they bring a newer epoch,
//! truncating the end of the log removes the entries that start at or after the new log
//! end offset, and moving the log start offset removes the entries entirely below it and
//! moves the first remaining one up to it.

use serde::{Deserialize, Serialize};

use crate::partition::{UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};

/// One entry of the cache: leader epoch `epoch` starts at `start_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochEntry {
    /// The leader epoch.
    pub epoch: i32,
    /// The offset of the first record written in that epoch (or the log start offset,
    /// if the start of the epoch has been removed).
    pub start_offset: i64,
}

/// The epochs a log holds and where each starts, strictly increasing in both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// An empty cache.
    pub fn new() -> Self {
        LeaderEpochCache::default()
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The latest entry, if any.
    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// The latest epoch the log holds, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Whether the cache holds no epoch.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Records that `epoch` starts at `start_offset`, if `epoch` is newer than the latest
    /// entry; an epoch already cached or older is left alone (its start is already
    /// known, and a batch of it appended later is just more of the same epoch). Returns
    /// whether an entry was added.
    ///
    /// `start_offset` is the base offset of a batch appended at the log end, so entries
    /// starting at or after it hold no records: they are removed first (after retention
    /// emptied the log, the latest entry starts at the log end), keeping both columns
    /// strictly increasing.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 || self.latest_epoch().is_some_and(|latest| epoch <= latest) {
            return false;
        }
        self.truncate_from_end(start_offset);
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.debug_check();
        true
    }

    /// The end offset of `epoch` in a log whose end offset is `log_end_offset`, as
    /// `(epoch found, end offset)`, by the table in the module documentation.
    pub fn end_offset_for(&self, epoch: i32, log_end_offset: i64) -> (i32, i64) {
        end_offset_in(&self.entries, epoch, log_end_offset)
    }

    /// Removes every entry starting at or after `end_offset`: the log was truncated to
    /// end there (Kafka's `truncateFromEnd`). Returns how many were removed.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> usize {
        let keep = self
            .entries
            .partition_point(|e| e.start_offset < end_offset);
        let removed = self.entries.len() - keep;
        self.entries.truncate(keep);
        removed
    }

    /// The log now starts at `start_offset` (Kafka's `truncateFromStart`): entries whose
    /// epoch ended at or before it go, and the one it falls in (the last starting at or
    /// before it) now starts there. The latest entry always stays, so the epoch of the
    /// records to come is still known after retention empties the log.
    pub fn truncate_from_start(&mut self, start_offset: i64) {
        // Entries starting at or before the new start offset: all but the last of them
        // lie entirely below it.
        let at_or_below = self
            .entries
            .partition_point(|e| e.start_offset <= start_offset);
        if at_or_below == 0 {
            return;
        }
        self.entries.drain(..at_or_below - 1);
        self.entries[0].start_offset = start_offset;
        self.debug_check();
    }

    /// Forgets every epoch (the log was emptied and restarts elsewhere).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    fn debug_check(&self) {
        debug_assert!(
            self.entries
                .windows(2)
                .all(|w| w[0].epoch < w[1].epoch && w[0].start_offset < w[1].start_offset),
            "leader epoch cache not strictly increasing: {:?}",
            self.entries
        );
    }
}

/// The end offset lookup over strictly increasing `entries` (see the module docs). Used
/// by the cache and by a leader whose current epoch has no batch yet (it adds that epoch,
/// starting at its log end offset, before asking).
pub(crate) fn end_offset_in(entries: &[EpochEntry], epoch: i32, log_end_offset: i64) -> (i32, i64) {
    const UNDEFINED: (i32, i64) = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
    let Some(latest) = entries.last() else {
        return UNDEFINED;
    };
    if epoch < 0 || epoch > latest.epoch {
        return UNDEFINED;
    }
    if epoch == latest.epoch {
        return (epoch, log_end_offset);
    }
    // `epoch` is below the latest, so some entry is above it.
    let next = entries.partition_point(|e| e.epoch <= epoch);
    let end_offset = entries[next].start_offset;
    match next.checked_sub(1) {
        Some(floor) => (entries[floor].epoch, end_offset),
        None => (epoch, end_offset),
    }
}
