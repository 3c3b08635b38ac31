//! # Per-partition log configuration
//!
//! The handful of Kafka settings that change how a replicated partition behaves:
//!
//! * `replica.lag.time.max.ms`: how long a follower may go without being *caught up*
//!   (having fetched up to the leader's log end) before the leader drops it from the
//!   in-sync replica set (ISR).
//! * `min.insync.replicas`: how many replicas (leader included) must be in the ISR for
//!   an `acks=all` write to be accepted, and, with KIP-966, for the high watermark to
//!   move at all.
//! * `retention.bytes`: how many bytes a partition may keep before its oldest batches
//!   are deleted (-1 keeps everything).
//! * `message.max.bytes`: the largest record batch a producer may send.

use serde::{Deserialize, Serialize};

/// Settings of one partition's log, named after the Kafka configs they model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LogConfig {
    /// `replica.lag.time.max.ms` (default 30000): a follower that has not been caught
    /// up to the leader's log end offset for longer than this leaves the ISR.
    pub replica_lag_time_max_ms: u64,
    /// `min.insync.replicas` (default 2): minimum ISR size, leader included, for
    /// `acks=all` produces and for the high watermark to advance.
    pub min_insync_replicas: usize,
    /// `retention.bytes` (default -1, unlimited): size above which
    /// [`crate::Partition::enforce_retention`] deletes the oldest replicated batches.
    pub retention_bytes: i64,
    /// `message.max.bytes` (default 1048588): the largest batch `append` accepts.
    pub max_batch_bytes: usize,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            replica_lag_time_max_ms: 30_000,
            min_insync_replicas: 2,
            retention_bytes: -1,
            max_batch_bytes: 1_048_588,
        }
    }
}
