//! Retention: the oldest batches go when the log is over `retention.bytes`, or when the
//! broker needs memory back, but never a batch the whole ISR does not have yet. The
//! leader epoch cache forgets the epochs that go with them.

use super::Partition;

impl Partition {
    /// Drops the oldest batch if it lies entirely below the HW, advancing the log start
    /// offset past it. Returns the bytes freed.
    fn drop_oldest_replicated_batch(&mut self) -> usize {
        match self.batches.front() {
            Some(oldest) if oldest.last_offset < self.high_watermark => {}
            _ => return 0,
        }
        let Some(oldest) = self.batches.pop_front() else {
            return 0;
        };
        self.log_start_offset = oldest.last_offset + 1;
        self.size_bytes -= oldest.data.len();
        self.epoch_cache.truncate_from_start(self.log_start_offset);
        self.txns.on_log_start(self.log_start_offset);
        oldest.data.len()
    }

    /// Applies `retention.bytes`: while the partition holds more bytes than allowed,
    /// deletes its oldest batch, but only batches entirely below the HW, so data not
    /// yet on every in-sync replica is never lost. (Kafka deletes whole segments, also
    /// only below the HW.) Moves the log start offset. Returns the bytes freed.
    pub fn enforce_retention(&mut self) -> usize {
        let Ok(limit) = usize::try_from(self.config.retention_bytes) else {
            return 0; // negative: unlimited
        };
        let mut freed = 0;
        while self.size_bytes > limit {
            let dropped = self.drop_oldest_replicated_batch();
            if dropped == 0 {
                break;
            }
            freed += dropped;
        }
        freed
    }

    /// For a broker-wide memory cap: drops the oldest batch if it lies entirely below
    /// the HW. Returns the bytes freed, 0 if there was no such batch.
    pub fn evict_oldest_batch(&mut self) -> usize {
        self.drop_oldest_replicated_batch()
    }
}
