//! The broker-wide cap on bytes held in partition logs (`log.memory.max.bytes`).
//!
//! Kafka's logs live on disk; ours live in memory, so a producer could exhaust it. Every
//! append first reserves its bytes here. When the cap would be passed, the oldest batches
//! that are *fully replicated* (below their partition's high watermark) are evicted, as
//! retention would delete them; data above a high watermark is never dropped, since it may
//! not be on any other replica yet. If nothing can be evicted, the append is refused with
//! KAFKA_STORAGE_ERROR — a full disk, in Kafka's terms.

use std::collections::{HashMap, HashSet};
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

/// The name DescribeLogDirs gives the one log directory: the logs live in this process's
/// memory, under `log.memory.max.bytes`, not in a directory on disk. It is written as an
/// absolute path because Kafka's tools take a log directory for one (an AlterReplicaLogDirs
/// target must be absolute), yet names no real place.
pub const LOG_DIR: &str = "/memory";

/// One hosted partition as DescribeLogDirs reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDirPartition {
    /// Partition index.
    pub partition: i32,
    /// Bytes its log holds in memory.
    pub size_bytes: i64,
    /// Kafka's `getLogEndOffsetLag` for a current (not future) replica: how far the
    /// local high watermark is past the local log end, at least 0. A leader's is 0, and
    /// so is a follower's, whose high watermark never passes its own log end.
    pub offset_lag: i64,
}

/// The log directory as DescribeLogDirs reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDirDescription {
    /// Topics with the partitions asked for, by name.
    pub topics: Vec<(Arc<str>, Vec<LogDirPartition>)>,
    /// `log.memory.max.bytes`.
    pub total_bytes: i64,
    /// What is left of it.
    pub usable_bytes: i64,
}

impl super::ReplicaManager {
    /// DescribeLogDirs: every partition this broker hosts (leading or following), or
    /// only those `filter` names (a topic's partitions that do not exist are left out,
    /// and a topic with none is not listed, as Kafka answers).
    pub fn describe_log_dir(&self, filter: Option<&[(String, Vec<i32>)]>) -> LogDirDescription {
        // A set per topic, so a long filter costs one look-up per hosted partition.
        let asked: Option<HashMap<&str, HashSet<i32>>> = filter.map(|f| {
            let mut asked: HashMap<&str, HashSet<i32>> = HashMap::new();
            for (topic, partitions) in f {
                asked
                    .entry(topic.as_str())
                    .or_default()
                    .extend(partitions.iter().copied());
            }
            asked
        });
        let wanted = |topic: &str, partition: i32| match &asked {
            None => true,
            Some(a) => a.get(topic).is_some_and(|ps| ps.contains(&partition)),
        };
        let topics = self
            .topics()
            .iter()
            .filter_map(|topic| {
                let partitions: Vec<LogDirPartition> = topic
                    .partitions
                    .iter()
                    .filter(|p| wanted(&topic.name, p.tp.partition))
                    .map(|p| {
                        let log = p.lock();
                        LogDirPartition {
                            partition: p.tp.partition,
                            size_bytes: i64::try_from(log.size_bytes()).unwrap_or(i64::MAX),
                            offset_lag: (log.high_watermark() - log.log_end_offset()).max(0),
                        }
                    })
                    .collect();
                (!partitions.is_empty()).then(|| (topic.name.clone(), partitions))
            })
            .collect();
        let cap = self.log_memory.cap();
        LogDirDescription {
            topics,
            total_bytes: i64::try_from(cap).unwrap_or(i64::MAX),
            usable_bytes: i64::try_from(cap.saturating_sub(self.log_memory.used()))
                .unwrap_or(i64::MAX),
        }
    }
}
