//! Appending a producer's batches as the leader: validation, offsets and epochs
//! assigned, the idempotent producer's sequence check, the leader epoch cache told
//! when the first batch of a new epoch lands, and the log end offset moved on.

use bytes::{Bytes, BytesMut};

use super::{AppendInfo, Partition, PartitionChange, StoredBatch};
use crate::batch::{
    set_offset_and_epoch, split_and_validate, split_trusted, validate_replicated_batch, BatchSpan,
};
use crate::error::AppendError;
use crate::producer_state::{PendingProducerUpdates, SequenceCheck};

impl Partition {
    /// Appends a producer's `records` as the leader, Kafka's `appendRecordsToLeader`:
    /// with `required_acks == -1` (`acks=all`) the write is refused with
    /// [`AppendError::NotEnoughReplicas`] if the ISR is already smaller than the minimum
    /// in force, and nothing is appended; otherwise it is [`Partition::append`].
    ///
    /// On a follower nothing is appended and the answer is the refusal of
    /// [`Partition::append`]; the broker asks [`Partition::ensure_leader`] first, to
    /// answer `NOT_LEADER_OR_FOLLOWER`.
    pub fn append_as_leader(
        &mut self,
        records: Bytes,
        required_acks: i16,
        now_ms: u64,
    ) -> Result<AppendInfo, AppendError> {
        self.append_checked(records, required_acks, now_ms, split_and_validate)
    }

    /// Appends batches the broker's own coordinators wrote (group metadata and offsets,
    /// a transaction's offsets, transaction state), as the leader, with the same
    /// `required_acks` rule as [`append_as_leader`](Self::append_as_leader). They are
    /// checked as a follower checks its leader's batches, not as a client's: a
    /// transaction's offsets carry its producer id with no sequence, which a client's
    /// batch may not (Kafka skips the sequence check for the coordinator's appends too).
    pub fn append_as_coordinator(
        &mut self,
        records: Bytes,
        required_acks: i16,
        now_ms: u64,
    ) -> Result<AppendInfo, AppendError> {
        self.append_checked(records, required_acks, now_ms, split_trusted)
    }

    /// The leader's append: leader, min ISR for acks=-1, then every batch `split` finds,
    /// or nothing.
    fn append_checked(
        &mut self,
        records: Bytes,
        required_acks: i16,
        now_ms: u64,
        split: fn(&[u8], usize) -> Result<Vec<BatchSpan>, AppendError>,
    ) -> Result<AppendInfo, AppendError> {
        self.refuse_append_unless_leader()?;
        self.refuse_acks_all_below_min_isr(required_acks)?;
        let spans = split(&records, self.config.max_batch_bytes)?;
        self.append_spans(&records, &spans, now_ms)
    }

    /// Appends the `records` of one produce partition: one or more v2 record batches.
    ///
    /// Every batch is validated first (complete, magic 2, CRC, size, consistent header,
    /// producer sequence); if any fails, nothing is appended. Each batch is then stored
    /// as received except for its `baseOffset` (set to the next offset) and
    /// `partitionLeaderEpoch`, both outside the CRC. The LEO advances past the new
    /// records; the HW moves only if the ISR is the leader alone (and
    /// `min.insync.replicas <= 1`), otherwise it waits for follower fetches.
    ///
    /// If an idempotent batch is a retry of one already appended, nothing is appended
    /// and the original offsets are returned with `duplicate: true`. A retry must come
    /// alone: a duplicate among several batches is refused as `INVALID_RECORD`, so the
    /// batches beside it are never acknowledged without being appended.
    ///
    /// Each batch is copied into its own buffer, so the log never keeps alive the
    /// request buffer `records` was cut from and [`Partition::size_bytes`] is the
    /// memory really held. The first batch of a new leader epoch starts that epoch in
    /// the leader epoch cache.
    ///
    /// Only the leader appends this way. On a follower nothing is appended and the
    /// answer is an [`AppendError::InvalidRecord`] whose reason is the
    /// [`crate::RoleError::NotLeader`] message: `AppendError` has no variant of its own
    /// for it yet, because the broker matches it exhaustively. Ask
    /// [`Partition::ensure_leader`] first to get the `NOT_LEADER_OR_FOLLOWER` answer.
    pub fn append(&mut self, records: Bytes, now_ms: u64) -> Result<AppendInfo, AppendError> {
        self.refuse_append_unless_leader()?;
        let spans = split_and_validate(&records, self.config.max_batch_bytes)?;
        self.append_spans(&records, &spans, now_ms)
    }

    /// Appends one batch the broker itself wrote (a transaction marker), as the leader:
    /// checked as a follower checks what its leader sent, since the rules for clients
    /// (no control batches) do not apply to it.
    pub(super) fn append_trusted(
        &mut self,
        batch: Bytes,
        now_ms: u64,
    ) -> Result<AppendInfo, AppendError> {
        let header = validate_replicated_batch(&batch, usize::MAX)?;
        let span = BatchSpan {
            start: 0,
            len: batch.len(),
            header,
        };
        self.append_spans(&batch, &[span], now_ms)
    }

    /// Appends the validated `spans` of `records`: offsets and epochs assigned, producer
    /// sequences checked, then stored, or nothing at all.
    fn append_spans(
        &mut self,
        records: &Bytes,
        spans: &[BatchSpan],
        now_ms: u64,
    ) -> Result<AppendInfo, AppendError> {
        // Pass 1: assign offsets and check producer sequences, changing nothing.
        let mut pending = PendingProducerUpdates::default();
        let mut next_offset = self.log_end_offset;
        let mut placed = Vec::with_capacity(spans.len());
        for span in spans {
            let header = &span.header;
            let base_offset = next_offset;
            let last_offset = base_offset
                .checked_add(i64::from(header.last_offset_delta))
                .filter(|last| *last < i64::MAX)
                .ok_or_else(|| AppendError::InvalidRecord {
                    reason: "offsets would overflow".to_string(),
                })?;
            next_offset = last_offset + 1;
            if header.is_idempotent() {
                let check = pending.check_and_stage(
                    &self.producers,
                    header,
                    base_offset,
                    last_offset,
                    now_ms,
                )?;
                if let SequenceCheck::Duplicate(original) = check {
                    if spans.len() > 1 {
                        return Err(AppendError::InvalidRecord {
                            reason: format!(
                                "batch {} of {} is a retry of offsets {}..={} and a retry must come alone",
                                placed.len() + 1,
                                spans.len(),
                                original.base_offset,
                                original.last_offset
                            ),
                        });
                    }
                    return Ok(AppendInfo {
                        base_offset: original.base_offset,
                        last_offset: original.last_offset,
                        log_start_offset: self.log_start_offset,
                        duplicate: true,
                        record_count: usize::try_from(
                            original.last_offset - original.base_offset + 1,
                        )
                        .unwrap_or(0),
                        bytes: 0,
                        change: PartitionChange::none(self.marks()),
                    });
                }
            }
            placed.push((span, base_offset, last_offset));
        }

        // Pass 2: everything is valid; store the batches.
        let mut appended_bytes = 0usize;
        for (span, base_offset, last_offset) in placed {
            let mut data = BytesMut::with_capacity(span.len);
            data.extend_from_slice(&records[span.start..span.start + span.len]);
            set_offset_and_epoch(&mut data, base_offset, self.leader_epoch);
            self.note_transaction(&span.header, base_offset, &data);
            self.batches.push_back(StoredBatch {
                base_offset,
                last_offset,
                max_timestamp: span.header.max_timestamp,
                position: self.next_position,
                data: data.freeze(),
            });
            self.next_position += span.len as u64;
            self.size_bytes += span.len;
            appended_bytes += span.len;
        }
        self.producers.commit(pending);
        let before = self.marks();
        let base_offset = self.log_end_offset;
        self.epoch_cache.assign(self.leader_epoch, base_offset);
        self.log_end_offset = next_offset;
        self.maybe_advance_high_watermark();
        Ok(AppendInfo {
            base_offset,
            last_offset: next_offset - 1,
            log_start_offset: self.log_start_offset,
            duplicate: false,
            record_count: usize::try_from(next_offset - base_offset).unwrap_or(0),
            bytes: appended_bytes,
            change: PartitionChange {
                before,
                after: self.marks(),
                new_isr: None,
            },
        })
    }

    /// The refusal of an acks=-1 append while the ISR is below the min ISR in force
    /// (NOT_ENOUGH_REPLICAS): nothing is appended.
    fn refuse_acks_all_below_min_isr(&self, required_acks: i16) -> Result<(), AppendError> {
        if required_acks == -1 && !self.has_min_insync_replicas() {
            return Err(AppendError::NotEnoughReplicas {
                isr_size: self.isr_len(),
                min_isr: self.effective_min_isr(),
            });
        }
        Ok(())
    }

    /// The refusal of a leader-only append on a follower, as an [`AppendError`].
    pub(super) fn refuse_append_unless_leader(&self) -> Result<(), AppendError> {
        self.ensure_leader()
            .map_err(AppendError::NotLeaderOrFollower)
    }
}
