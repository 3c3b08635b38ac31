//! A follower's side of replication: appending the batches fetched from the leader as
//! they are, and taking the leader's high watermark and log start offset.
//!
//! A follower writes nothing of its own. The leader already assigned every offset and
//! stamped every leader epoch, so the follower stores each batch byte for byte; what it
//! checks is that the batches are whole and intact and that they continue its log
//! exactly where it ends. Its high watermark is the leader's, as far as its own log
//! reaches: it learns it from every fetch response, one fetch late.

use bytes::{Bytes, BytesMut};

use super::{AppendInfo, Partition, PartitionChange, StoredBatch};
use crate::batch::{validate_replicated_batch, BatchFraming, BatchHeader, RecordBatches};
use crate::error::{AppendError, FollowerAppendError, RoleError};
use crate::producer_state::PendingProducerUpdates;

/// One fetched batch, validated and placed.
struct Placed {
    start: usize,
    len: usize,
    header: BatchHeader,
}

impl Partition {
    /// Appends `records` fetched from the leader (Kafka's `appendRecordsToFollower`):
    /// whole v2 batches with their offsets and leader epochs already set.
    ///
    /// Each batch is validated (magic 2, header, CRC, record count; not the client-only
    /// rules, nor `message.max.bytes`, which the leader applied when it accepted the
    /// batch: a limit lowered since must not stop replication) and stored exactly as
    /// received. The batches must continue the log: the first starts at the LEO, each
    /// next one right after the one before, else [`FollowerAppendError::UnexpectedOffset`].
    /// Their leader epochs never decrease and never exceed the epoch this replica
    /// follows. Each new epoch enters the leader epoch cache at its first batch; each
    /// idempotent batch is recorded in the producer state without a sequence check (see
    /// [`crate::producer_state`]), so a promoted follower still recognises retries. If
    /// anything is refused, nothing is appended.
    ///
    /// A fetch response may end with part of a batch (the leader cuts it at the fetch's
    /// `max_bytes`; KIP-74 only promises the first batch whole). The partial batch is not
    /// an error: it is ignored, as Kafka's follower ignores it, and the next fetch, from
    /// the new LEO, gets it whole. Empty `records`, or only a partial batch, append
    /// nothing (`record_count` 0, `base_offset` the LEO, `last_offset` one below).
    ///
    /// One exception to "starts at the LEO", Kafka's too: when the log is empty and its
    /// log start offset lies inside the leader's first batch (the leader's log start
    /// moved into the middle of a batch, by DeleteRecords), the leader sends that whole
    /// batch, which starts below the LEO; it is accepted, and the log start offset stays.
    pub fn append_as_follower(
        &mut self,
        records: Bytes,
        now_ms: u64,
    ) -> Result<AppendInfo, FollowerAppendError> {
        self.ensure_follower()?;
        let placed = self.validate_fetched(&records)?;

        // Producer state, staged: every batch came from the leader, none is refused.
        let mut pending = PendingProducerUpdates::default();
        for p in placed.iter().filter(|p| p.header.is_idempotent()) {
            let h = &p.header;
            pending.stage_replicated(&self.producers, h, h.base_offset, h.last_offset(), now_ms);
        }

        let before = self.marks();
        let Some(first) = placed.first().map(|p| p.header) else {
            return Ok(AppendInfo {
                base_offset: self.log_end_offset,
                last_offset: self.log_end_offset - 1,
                log_start_offset: self.log_start_offset,
                duplicate: false,
                record_count: 0,
                bytes: 0,
                change: PartitionChange::none(before),
            });
        };
        let mut appended_bytes = 0usize;
        let mut next_offset = self.log_end_offset;
        for p in &placed {
            let header = &p.header;
            let mut data = BytesMut::with_capacity(p.len);
            data.extend_from_slice(&records[p.start..p.start + p.len]);
            self.epoch_cache.assign(
                header.partition_leader_epoch,
                header.base_offset.max(self.log_start_offset),
            );
            self.note_transaction(header, header.base_offset, &data);
            self.batches.push_back(StoredBatch {
                base_offset: header.base_offset,
                last_offset: header.last_offset(),
                max_timestamp: header.max_timestamp,
                position: self.next_position,
                data: data.freeze(),
            });
            self.next_position += p.len as u64;
            self.size_bytes += p.len;
            appended_bytes += p.len;
            next_offset = header.next_offset();
        }
        self.producers.commit(pending);
        self.log_end_offset = next_offset;
        debug_assert!(self.high_watermark <= self.log_end_offset);
        Ok(AppendInfo {
            base_offset: first.base_offset,
            last_offset: next_offset - 1,
            log_start_offset: self.log_start_offset,
            duplicate: false,
            record_count: usize::try_from(next_offset - first.base_offset).unwrap_or(0),
            bytes: appended_bytes,
            change: PartitionChange {
                before,
                after: self.marks(),
                new_isr: None,
            },
        })
    }

    /// Splits and validates fetched records, changing nothing: the whole batches, in
    /// order, each continuing the log.
    fn validate_fetched(&self, records: &[u8]) -> Result<Vec<Placed>, FollowerAppendError> {
        let invalid =
            |reason: String| FollowerAppendError::Invalid(AppendError::InvalidRecord { reason });
        let mut placed = Vec::new();
        let mut expected = self.log_end_offset;
        let mut latest_epoch = self.epoch_cache.latest_epoch();
        for batch in RecordBatches::new(records) {
            let batch = match batch {
                Ok(batch) => batch,
                // A trailing partial batch: the next fetch gets it whole.
                Err(BatchFraming::Truncated { .. }) => break,
                Err(bad @ BatchFraming::BadLength { .. }) => return Err(invalid(bad.to_string())),
            };
            let header = validate_replicated_batch(batch.bytes, usize::MAX)?;
            let straddles_log_start = placed.is_empty()
                && self.batches.is_empty()
                && (0..expected).contains(&header.base_offset)
                && header.last_offset() >= expected;
            if header.base_offset != expected && !straddles_log_start {
                return Err(FollowerAppendError::UnexpectedOffset {
                    expected,
                    got: header.base_offset,
                });
            }
            if header.last_offset() == i64::MAX {
                return Err(invalid("offsets would overflow".to_string()));
            }
            let epoch = header.partition_leader_epoch;
            if epoch < 0 {
                return Err(invalid(format!(
                    "batch at offset {} has no leader epoch ({epoch}): no leader wrote it",
                    header.base_offset
                )));
            }
            if let Some(latest) = latest_epoch.filter(|latest| epoch < *latest) {
                return Err(invalid(format!(
                    "batch at offset {} has leader epoch {epoch}, older than epoch {latest} already in the log",
                    header.base_offset
                )));
            }
            if epoch > self.leader_epoch {
                return Err(invalid(format!(
                    "batch at offset {} has leader epoch {epoch}, newer than the epoch {} this replica follows",
                    header.base_offset, self.leader_epoch
                )));
            }
            latest_epoch = Some(epoch);
            expected = header.next_offset();
            placed.push(Placed {
                start: batch.start,
                len: batch.bytes.len(),
                header,
            });
        }
        Ok(placed)
    }

    /// Takes the leader's high watermark from a fetch response (Kafka's
    /// `maybeUpdateHighWatermark` on a follower): the HW becomes
    /// `min(leader_high_watermark, LEO)`, since the follower cannot vouch for records it
    /// does not have, and never moves backwards.
    pub fn update_high_watermark_as_follower(
        &mut self,
        leader_high_watermark: i64,
    ) -> Result<PartitionChange, RoleError> {
        self.ensure_follower()?;
        let before = self.marks();
        let candidate = leader_high_watermark.min(self.log_end_offset);
        if candidate > self.high_watermark {
            self.high_watermark = candidate;
            self.txns.on_high_watermark(candidate);
        }
        Ok(PartitionChange {
            before,
            after: self.marks(),
            new_isr: None,
        })
    }

    /// Takes the leader's log start offset from a fetch response (Kafka's
    /// `maybeIncrementLogStartOffset` on a follower, for retention and DeleteRecords on
    /// the leader): the log start offset moves up to `leader_log_start_offset`, but not
    /// past the follower's HW (Kafka refuses that: take the response's HW first), and
    /// never back. Whole batches entirely below it are dropped; one it falls inside stays
    /// (reads from the log start return it whole). The leader epoch cache forgets the
    /// epochs below it. Returns the bytes freed.
    pub fn maybe_increment_log_start_offset(
        &mut self,
        leader_log_start_offset: i64,
    ) -> Result<usize, RoleError> {
        self.ensure_follower()?;
        Ok(self.advance_log_start_offset(leader_log_start_offset.min(self.high_watermark)))
    }
}
