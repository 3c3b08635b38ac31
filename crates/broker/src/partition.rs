//! The broker's handle on one partition: the key delayed operations watch
//! ([`TopicPartition`]) and the lock around the partition's replicated log
//! ([`PartitionHandle`]).
//!
//! The log itself — LEO, high watermark, ISR, producer state — is [`replog::Partition`],
//! pure and clock-injected. This module adds only what a running broker needs around it:
//! a mutex (each partition has its own, so traffic to different partitions never
//! contends) and a "deleted" flag that operations parked on a deleted topic's partitions
//! read when the purgatory re-checks them.
//!
//! Locking rule, everywhere in the broker: never hold a partition lock while calling into
//! a purgatory, because a purgatory calls `try_complete`, which takes partition locks.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use replog::Partition;

/// A topic-partition: the key every delayed operation watches.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: Arc<str>,
    /// Partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// Builds a key.
    pub fn new(topic: &str, partition: i32) -> Self {
        TopicPartition {
            topic: Arc::from(topic),
            partition,
        }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

impl fmt::Debug for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// One partition's log plus what the broker needs around it.
pub struct PartitionHandle {
    /// Which partition this is.
    pub tp: TopicPartition,
    log: Mutex<Partition>,
    deleted: AtomicBool,
}

impl PartitionHandle {
    /// Wraps a new partition log.
    pub fn new(tp: TopicPartition, log: Partition) -> Self {
        PartitionHandle {
            tp,
            log: Mutex::new(log),
            deleted: AtomicBool::new(false),
        }
    }

    /// Locks the partition's log. Never hold this across a purgatory call.
    pub fn lock(&self) -> MutexGuard<'_, Partition> {
        self.log.lock()
    }

    /// True once the topic has been deleted; parked operations then complete with an error.
    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }

    /// Marks the partition deleted (its topic was removed from the registry).
    pub fn mark_deleted(&self) {
        self.deleted.store(true, Ordering::Release);
    }
}
