//! Reading the log: what a consumer (up to the high watermark) or a follower (up to the
//! log end) may fetch from an offset, and the lookups by timestamp and leader epoch.

use bytes::{Bytes, BytesMut};

use super::{Partition, ReadBound, ReadResult, StoredBatch};
use crate::batch::record_offsets_and_timestamps;
use crate::error::ReadError;
use crate::leader_epoch::{end_offset_in, EpochEntry};

impl Partition {
    /// The offset up to which `bound` lets a reader see.
    fn bound_offset(&self, bound: ReadBound) -> i64 {
        match bound {
            ReadBound::HighWatermark => self.high_watermark,
            ReadBound::LastStable => self.last_stable_offset(),
            ReadBound::LogEnd => self.log_end_offset,
        }
    }

    /// Index range of the stored batches a read at `fetch_offset` may return: from the
    /// batch containing `fetch_offset` up to the last batch entirely below `bound`.
    /// Empty if there is nothing to read or the offset is out of range.
    fn readable_batches(&self, fetch_offset: i64, bound: ReadBound) -> std::ops::Range<usize> {
        if fetch_offset < self.log_start_offset || fetch_offset > self.log_end_offset {
            return 0..0;
        }
        let bound_offset = self.bound_offset(bound);
        if fetch_offset >= bound_offset {
            // A reader that has caught up (the common case for a parked fetch being
            // re-checked): nothing to search for.
            return 0..0;
        }
        let first = self
            .batches
            .partition_point(|b| b.last_offset < fetch_offset);
        let end = self
            .batches
            .partition_point(|b| b.last_offset < bound_offset);
        if first >= end {
            0..0
        } else {
            first..end
        }
    }

    /// Reads whole batches starting with the one that contains `fetch_offset`.
    ///
    /// Returns batches up to `max_bytes` in total, but always at least one if any is
    /// readable, even if larger (KIP-74: a consumer must always make progress). With
    /// [`ReadBound::HighWatermark`] only batches entirely below the HW are returned, and
    /// a fetch offset in `[HW, LEO]` gets no records and no error; with
    /// [`ReadBound::LogEnd`] (followers) the whole log is readable. A fetch offset below
    /// the log start offset or above the LEO is [`ReadError::OffsetOutOfRange`].
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        isolation: ReadBound,
    ) -> Result<ReadResult, ReadError> {
        if fetch_offset < self.log_start_offset || fetch_offset > self.log_end_offset {
            return Err(ReadError::OffsetOutOfRange {
                fetch_offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        let range = self.readable_batches(fetch_offset, isolation);
        let mut taken = range.start..range.start;
        let mut total = 0usize;
        for index in range {
            let len = self.batches[index].data.len();
            if taken.is_empty() || total + len <= max_bytes {
                total += len;
                taken.end = index + 1;
            } else {
                break;
            }
        }
        let records = match taken.len() {
            0 => Bytes::new(),
            1 => self.batches[taken.start].data.clone(),
            _ => {
                let mut joined = BytesMut::with_capacity(total);
                for index in taken {
                    joined.extend_from_slice(&self.batches[index].data);
                }
                joined.freeze()
            }
        };
        Ok(ReadResult {
            records,
            high_watermark: self.high_watermark,
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
            last_stable_offset: self.high_watermark,
        })
    }

    /// How many bytes a read at `fetch_offset` with this bound could return, ignoring
    /// `max_bytes`: what `DelayedFetch` compares with `min_bytes`. O(log n). Zero if the
    /// offset is out of range.
    pub fn bytes_available(&self, fetch_offset: i64, bound: ReadBound) -> usize {
        let range = self.readable_batches(fetch_offset, bound);
        if range.is_empty() {
            return 0;
        }
        let first = &self.batches[range.start];
        let last = &self.batches[range.end - 1];
        let end_position = last.position + last.data.len() as u64;
        usize::try_from(end_position - first.position).unwrap_or(usize::MAX)
    }

    /// The batches a reader with this bound may see: those entirely below it.
    fn visible_batches(&self, bound: ReadBound) -> impl Iterator<Item = &StoredBatch> + '_ {
        let bound_offset = self.bound_offset(bound);
        self.batches
            .iter()
            .take_while(move |b| b.last_offset < bound_offset)
    }

    /// ListOffsets by timestamp: the first record visible under `bound` (below the HW for
    /// a consumer, the whole log for a replica) whose timestamp is at least `timestamp`,
    /// as `(offset, its timestamp)`; `None` if there is none (Kafka then answers offset
    /// -1).
    ///
    /// The batch is found from its `maxTimestamp`. Inside an uncompressed batch the
    /// exact record is found; a compressed batch is not decompressed, so the answer is
    /// its base offset and max timestamp, and the consumer skips the older records
    /// itself. The special timestamps -1 (latest) and -2 (earliest) are the broker's
    /// business: the bound's offset and [`Partition::log_start_offset`].
    pub fn offset_for_timestamp(&self, timestamp: i64, bound: ReadBound) -> Option<(i64, i64)> {
        let batch = self
            .visible_batches(bound)
            .find(|b| b.max_timestamp >= timestamp)?;
        let exact = record_offsets_and_timestamps(&batch.data)
            .and_then(|records| records.into_iter().find(|&(_, t)| t >= timestamp));
        Some(exact.unwrap_or((batch.base_offset, batch.max_timestamp)))
    }

    /// ListOffsets with timestamp -3 (KIP-734): the record with the largest timestamp in
    /// the whole log (the first one, on ties), as `(offset, timestamp)` — if `bound` lets
    /// the reader see it. As in Kafka, a consumer whose largest-timestamp record is still
    /// above the HW finds nothing (`None`), not the largest one below it.
    /// Record-exact for uncompressed batches, the batch's base offset for compressed ones.
    pub fn offset_for_max_timestamp(&self, bound: ReadBound) -> Option<(i64, i64)> {
        // `reduce` keeps the earlier batch on ties.
        let batch = self.batches.iter().reduce(|best, batch| {
            if batch.max_timestamp > best.max_timestamp {
                batch
            } else {
                best
            }
        })?;
        if batch.last_offset >= self.bound_offset(bound) {
            return None;
        }
        let exact = record_offsets_and_timestamps(&batch.data)
            .and_then(|records| records.into_iter().find(|&(_, t)| t == batch.max_timestamp));
        Some(exact.unwrap_or((batch.base_offset, batch.max_timestamp)))
    }

    /// OffsetForLeaderEpoch: the end offset of leader epoch `epoch`, as
    /// `(epoch, end offset)`, from the leader epoch cache by Kafka's rules (see
    /// [`crate::leader_epoch`]): the largest epoch at or below `epoch` that the log holds,
    /// and the start of the next one (the LEO for the latest); `epoch` itself and the
    /// first epoch's start offset if `epoch` is below every epoch held; and
    /// `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)` = `(-1, -1)` for a negative epoch or one
    /// above the latest.
    ///
    /// On the leader, its current epoch counts as held from the moment it is elected,
    /// starting at the LEO of that moment, even before its first batch (Kafka records it
    /// at election): so a new leader answers `(current, LEO)` for its own epoch, and
    /// says where the previous epoch ends.
    pub fn end_offset_for_leader_epoch(&self, epoch: i32) -> (i32, i64) {
        let entries = self.epoch_cache.entries();
        match self.unrecorded_leader_epoch() {
            None => end_offset_in(entries, epoch, self.log_end_offset),
            Some(current) => {
                let mut with_current = Vec::with_capacity(entries.len() + 1);
                with_current.extend_from_slice(entries);
                with_current.push(current);
                end_offset_in(&with_current, epoch, self.log_end_offset)
            }
        }
    }

    /// On the leader, its current epoch starting at the LEO, if no batch of that epoch
    /// has been appended yet (so the cache does not hold it).
    fn unrecorded_leader_epoch(&self) -> Option<EpochEntry> {
        let recorded = self
            .epoch_cache
            .latest_epoch()
            .is_some_and(|latest| latest >= self.leader_epoch);
        (self.is_leader() && !recorded).then_some(EpochEntry {
            epoch: self.leader_epoch,
            start_offset: self.log_end_offset,
        })
    }

    /// The latest leader epoch the log holds: the epoch of its last batch (or of the
    /// last batch it held, if retention removed it), `None` for a log that never held
    /// one. A follower sends it as the `last_fetched_epoch` of its Fetch requests
    /// (-1 for `None`).
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epoch_cache.latest_epoch()
    }
}
