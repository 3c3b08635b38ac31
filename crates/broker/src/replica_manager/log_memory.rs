//! The broker-wide cap on bytes held in partition logs (`log.memory.max.bytes`).
//!
//! Kafka's logs live on disk; ours live in memory, so a producer could exhaust it. Every
//! append first reserves its bytes here. When the cap would be passed, the oldest batches
//! that are *fully replicated* (below their partition's high watermark) are evicted, as
//! retention would delete them; data above a high watermark is never dropped, since it may
//! not be on any other replica yet. If nothing can be evicted, the append is refused with
//! KAFKA_STORAGE_ERROR — a full disk, in Kafka's terms.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::partition::PartitionHandle;

/// Bytes held in all partition logs, against a cap.
pub struct LogMemory {
    cap: usize,
    used: AtomicUsize,
}

impl LogMemory {
    /// Nothing held yet, at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        LogMemory {
            cap,
            used: AtomicUsize::new(0),
        }
    }

    /// Bytes held now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The cap.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// A log grew by `bytes`.
    pub fn add(&self, bytes: usize) {
        if bytes > 0 {
            self.used.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// A log dropped `bytes` (retention, eviction, deletion).
    pub fn release(&self, bytes: usize) {
        if bytes > 0 {
            let _ = self
                .used
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                    Some(b.saturating_sub(bytes))
                });
        }
    }

    fn fits(&self, incoming: usize) -> bool {
        self.used().saturating_add(incoming) <= self.cap
    }

    /// Makes room for `incoming` bytes by evicting the oldest fully replicated batches of
    /// `partitions` (round-robin, one batch each per pass). Returns false if the cap cannot
    /// be met: everything left is above some high watermark.
    pub fn reserve(
        &self,
        incoming: usize,
        partitions: impl Fn() -> Vec<Arc<PartitionHandle>>,
    ) -> bool {
        if self.fits(incoming) {
            return true;
        }
        let partitions = partitions();
        loop {
            let mut progress = false;
            for p in &partitions {
                if self.fits(incoming) {
                    return true;
                }
                let freed = p.lock().evict_oldest_batch();
                if freed > 0 {
                    progress = true;
                    self.release(freed);
                }
            }
            if !progress {
                return self.fits(incoming);
            }
        }
    }
}
