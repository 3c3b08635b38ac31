//! Truncation: how a follower whose log diverged from its leader's gets back in step
//! (KIP-101, KIP-279, and KIP-320's diverging epoch in Fetch v12+).
//!
//! Three steps, split between the two brokers:
//!
//! 1. **The leader detects it.** A follower's fetch names the epoch of its last batch
//!    (`last_fetched_epoch`) and its fetch offset. If the leader's log holds that epoch
//!    only up to a lower offset, or does not hold it at all, the follower has records the
//!    leader does not: [`Partition::diverging_epoch`] answers the epoch and end offset the
//!    follower must go back to, and the fetch returns no records.
//! 2. **The follower picks the offset.** The leader's answer is in the leader's terms.
//!    The follower looks up where *its* log holds that epoch up to, and truncates to the
//!    lower of the two ([`Partition::follower_truncation_target`]). If it does not hold
//!    the epoch the leader named at all, it truncates to the end of its last older epoch
//!    and asks again.
//! 3. **The follower truncates** ([`Partition::truncate_to`]), whole batches at a time,
//!    and fetches from its new log end offset. If its log is entirely behind the
//!    leader's log start, it empties it and starts over there
//!    ([`Partition::truncate_fully_and_start_at`]).
//!
//! Truncation is the one place the high watermark may move back: it is capped at the
//! new log end offset. Truncating correctly never goes below the HW the *leader* had,
//! because every record below it is on every in-sync replica, the new leader included.

use serde::Serialize;

use super::{Partition, PartitionChange, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};
use crate::batch::BatchHeader;
use crate::error::{ReadError, RoleError};
use crate::transactions::{control_type, ControlType, TxnIndex};

/// What a truncation removed. The broker logs "truncated offsets
/// `new_log_end_offset`..`old_log_end_offset`".
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Truncation {
    /// The log end offset before.
    pub old_log_end_offset: i64,
    /// The log end offset after.
    pub new_log_end_offset: i64,
    /// Whole batches removed.
    pub batches_dropped: usize,
    /// Records in them.
    pub records_dropped: usize,
    /// Their bytes, now freed.
    pub bytes_dropped: usize,
    /// The log start, end and HW before and after (the HW is capped at the new end).
    pub change: PartitionChange,
}

impl Truncation {
    /// Whether anything was removed.
    pub fn truncated(&self) -> bool {
        self.batches_dropped > 0 || self.new_log_end_offset != self.old_log_end_offset
    }
}

/// Where a follower truncates after its leader named a diverging epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TruncationTarget {
    /// The offset to pass to [`Partition::truncate_to`].
    pub offset: i64,
    /// False if the follower did not know the epoch the leader answered, so this offset
    /// is only a step: after truncating, it fetches (or asks OffsetForLeaderEpoch) again
    /// with its new latest epoch, and the leader answers again.
    pub complete: bool,
}

impl Partition {
    /// Leader side of KIP-320 (Fetch v12+): whether a follower whose last batch has
    /// leader epoch `last_fetched_epoch` and which fetches from `fetch_offset` has
    /// diverged from this log, Kafka's `validateFetchOffsetAndMaybeGetDivergingEpoch`.
    ///
    /// The end of `last_fetched_epoch` here is looked up
    /// ([`Partition::end_offset_for_leader_epoch`]). If the epoch found is the one asked
    /// and it ends at or after `fetch_offset`, the logs agree: `Ok(None)`. If it ends
    /// before `fetch_offset`, or the epoch found is an older one (this log never held
    /// `last_fetched_epoch`), the follower has records this log does not:
    /// `Ok(Some((epoch, end_offset)))`, which the fetch response carries as its
    /// `diverging_epoch` instead of records. If no epoch at or below the one asked is
    /// known here (it is newer than this log's latest), Kafka answers
    /// `OFFSET_OUT_OF_RANGE`: [`ReadError::OffsetOutOfRange`].
    ///
    /// A negative `last_fetched_epoch` (a fetch that names none: consumers, old
    /// followers) is not checked: `Ok(None)`.
    pub fn diverging_epoch(
        &self,
        last_fetched_epoch: i32,
        fetch_offset: i64,
    ) -> Result<Option<(i32, i64)>, ReadError> {
        if last_fetched_epoch < 0 {
            return Ok(None);
        }
        let (epoch, end_offset) = self.end_offset_for_leader_epoch(last_fetched_epoch);
        if epoch == UNDEFINED_EPOCH || end_offset == UNDEFINED_EPOCH_OFFSET {
            return Err(ReadError::OffsetOutOfRange {
                fetch_offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        if epoch < last_fetched_epoch || end_offset < fetch_offset {
            Ok(Some((epoch, end_offset)))
        } else {
            Ok(None)
        }
    }

    /// Follower side: where to truncate, given the leader's answer `(leader_epoch,
    /// leader_end_offset)` (a diverging epoch, or an OffsetForLeaderEpoch response),
    /// Kafka's rules (`getOffsetTruncationState`, KIP-279):
    ///
    /// * the leader knows no end offset (`UNDEFINED_EPOCH_OFFSET`): truncate to the HW,
    ///   the one offset known to be on the leader;
    /// * the leader names no epoch (`UNDEFINED_EPOCH`, an old leader): truncate to its
    ///   end offset;
    /// * else this log's own end of `leader_epoch` is looked up. If this log holds that
    ///   epoch, truncate to the lower of the two ends: both logs hold the same records up
    ///   to there. If it does not, but an older one, truncate to the end of that older
    ///   epoch here, and ask again (`complete: false`). If it holds nothing at or below
    ///   it, truncate to the leader's end offset.
    ///
    /// Never above the LEO. Nothing is changed: pass the offset to
    /// [`Partition::truncate_to`].
    pub fn follower_truncation_target(
        &self,
        leader_epoch: i32,
        leader_end_offset: i64,
    ) -> TruncationTarget {
        let leo = self.log_end_offset;
        let done = |offset: i64| TruncationTarget {
            offset: offset.min(leo),
            complete: true,
        };
        if leader_end_offset == UNDEFINED_EPOCH_OFFSET {
            return done(self.high_watermark);
        }
        if leader_epoch == UNDEFINED_EPOCH {
            return done(leader_end_offset);
        }
        match self.end_offset_for_leader_epoch(leader_epoch) {
            (UNDEFINED_EPOCH, _) => done(leader_end_offset),
            (own_epoch, own_end) if own_epoch == leader_epoch => {
                done(own_end.min(leader_end_offset))
            }
            (_, own_end) => TruncationTarget {
                offset: own_end.min(leo),
                complete: false,
            },
        }
    }

    /// Truncates the log so that it ends at or below `offset` (Kafka's `truncateTo`), on
    /// a follower.
    ///
    /// Every batch whose last offset is at or above `offset` is dropped, so a batch that
    /// contains `offset` goes whole and the LEO becomes its base offset, below `offset`.
    /// Truncation happens at batch boundaries because a batch is the unit the log
    /// stores, replicates and checksums: keeping part of one would mean rewriting it
    /// (its record count, last offset delta and CRC), and a leader never cuts a batch
    /// either, so the follower refetches it whole. In practice the offset is a boundary:
    /// an epoch's end offset is where the next epoch's first batch starts.
    ///
    /// Then the HW is capped at the new LEO, the leader epoch cache loses the epochs that
    /// start at or after it, and the producer state is rebuilt from the headers of the
    /// remaining batches, so a retry of a dropped batch is appended again. An `offset` at
    /// or above the LEO changes nothing; one below the log start offset empties the log
    /// and starts it at `offset`, as [`Partition::truncate_fully_and_start_at`]. If the
    /// log start offset lies inside a dropped batch, the LEO stops at the log start.
    ///
    /// Refused on the leader ([`RoleError::NotFollower`]): a leader's log is the one the
    /// others follow, and its followers' LEOs would be past its end.
    pub fn truncate_to(&mut self, offset: i64) -> Result<Truncation, RoleError> {
        self.ensure_follower()?;
        if offset < self.log_start_offset {
            return self.truncate_fully_and_start_at(offset);
        }
        let before = self.marks();
        let old_log_end_offset = self.log_end_offset;
        let keep = self.batches.partition_point(|b| b.last_offset < offset);
        if keep == self.batches.len() {
            return Ok(Truncation {
                old_log_end_offset,
                new_log_end_offset: old_log_end_offset,
                batches_dropped: 0,
                records_dropped: 0,
                bytes_dropped: 0,
                change: PartitionChange::none(before),
            });
        }
        let dropped: Vec<_> = self.batches.drain(keep..).collect();
        let first_dropped = &dropped[0];
        let bytes_dropped: usize = dropped.iter().map(|b| b.data.len()).sum();
        let records_dropped = dropped
            .iter()
            .map(|b| usize::try_from(b.last_offset - b.base_offset + 1).unwrap_or(0))
            .sum();
        self.next_position = first_dropped.position;
        self.size_bytes -= bytes_dropped;
        self.log_end_offset = first_dropped.base_offset.max(self.log_start_offset);
        self.high_watermark = self.high_watermark.min(self.log_end_offset);
        self.epoch_cache.truncate_from_end(self.log_end_offset);
        self.rebuild_producer_state();
        self.debug_check_offsets();
        Ok(Truncation {
            old_log_end_offset,
            new_log_end_offset: self.log_end_offset,
            batches_dropped: dropped.len(),
            records_dropped,
            bytes_dropped,
            change: PartitionChange {
                before,
                after: self.marks(),
                new_isr: None,
            },
        })
    }

    /// Empties the log and restarts it at `offset` (Kafka's `truncateFullyAndStartAt`),
    /// on a follower: for when its log is entirely off, typically when the leader's log
    /// start offset is above this log's end (the follower's fetch is out of range at the
    /// low end, so nothing it has is useful). The log start offset, LEO and HW all
    /// become `offset`; the leader epoch cache and the producer state are cleared (no
    /// batch is left to hold an epoch or a producer). Refused on the leader.
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<Truncation, RoleError> {
        self.ensure_follower()?;
        let before = self.marks();
        let old_log_end_offset = self.log_end_offset;
        let batches_dropped = self.batches.len();
        let records_dropped = self
            .batches
            .iter()
            .map(|b| usize::try_from(b.last_offset - b.base_offset + 1).unwrap_or(0))
            .sum();
        let bytes_dropped = self.size_bytes;
        if let Some(first) = self.batches.front() {
            self.next_position = first.position;
        }
        self.batches.clear();
        self.size_bytes = 0;
        self.log_start_offset = offset;
        self.log_end_offset = offset;
        self.high_watermark = offset;
        self.epoch_cache.clear();
        self.rebuild_producer_state();
        self.debug_check_offsets();
        Ok(Truncation {
            old_log_end_offset,
            new_log_end_offset: offset,
            batches_dropped,
            records_dropped,
            bytes_dropped,
            change: PartitionChange {
                before,
                after: self.marks(),
                new_isr: None,
            },
        })
    }

    /// Replaces the producer state and the transaction index by the ones the stored
    /// batches imply, re-reading their headers (and their markers).
    fn rebuild_producer_state(&mut self) {
        let headers: Vec<(BatchHeader, Option<ControlType>)> = self
            .batches
            .iter()
            .filter_map(|b| {
                let header = BatchHeader::parse(&b.data)?;
                Some((header, control_type(&b.data, &header)))
            })
            .collect();
        self.producers = self.producers.rebuilt_from(headers.iter().map(|(h, _)| *h));
        for (header, marker) in &headers {
            if marker.is_some() {
                self.producers
                    .on_marker(header.producer_id, header.producer_epoch);
            }
        }
        self.txns = TxnIndex::rebuilt_from(
            headers.iter().map(|(h, m)| (h, *m)),
            self.high_watermark,
            self.log_start_offset,
        );
    }

    /// The offsets' invariants, after a change that moves them in unusual ways.
    fn debug_check_offsets(&self) {
        debug_assert!(self.log_start_offset <= self.high_watermark);
        debug_assert!(self.high_watermark <= self.log_end_offset);
        debug_assert_eq!(
            self.size_bytes,
            self.batches.iter().map(|b| b.data.len()).sum::<usize>()
        );
        debug_assert!(self
            .batches
            .back()
            .is_none_or(|last| last.last_offset + 1 == self.log_end_offset));
        debug_assert!(self
            .epoch_cache
            .latest()
            .is_none_or(|e| e.start_offset < self.log_end_offset || self.batches.is_empty()));
    }
}
