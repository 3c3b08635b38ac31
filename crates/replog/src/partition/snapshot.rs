//! A serializable picture of a partition, for the broker's state API and the live view
//! (and read back from that JSON by `purgatory ctl`).

use serde::{Deserialize, Serialize};

use super::{Partition, Role};
use crate::leader_epoch::EpochEntry;
use crate::replica::UNKNOWN_OFFSET;
use crate::transactions::OpenTxn;

/// One follower in a [`PartitionSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FollowerSnapshot {
    /// Broker id.
    pub id: i32,
    /// The follower's LEO (-1 until its first fetch since this broker became leader).
    pub log_end_offset: i64,
    /// How many offsets it is behind: leader LEO minus its LEO (minus the log start
    /// offset while its LEO is unknown).
    pub lag: i64,
    /// When it last fetched.
    pub last_fetch_time_ms: Option<u64>,
    /// Kafka's `lastCaughtUpTimeMs`.
    pub last_caught_up_time_ms: u64,
    /// Whether it is in the ISR.
    pub in_isr: bool,
    /// Its log start offset, as its last fetch reported it (-1 before one did). Absent
    /// from older brokers' snapshots, read as unknown.
    #[serde(default = "unknown_offset")]
    pub log_start_offset: i64,
}

fn unknown_offset() -> i64 {
    UNKNOWN_OFFSET
}

/// A serializable picture of a partition, for the state API and the web view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionSnapshot {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Broker id of the leader.
    pub leader: i32,
    /// Current leader epoch.
    pub leader_epoch: i32,
    /// Whether this broker leads the partition or follows `leader` (absent from JSON
    /// written before roles existed: the leader).
    #[serde(default)]
    pub role: Role,
    /// When it took that role.
    #[serde(default)]
    pub role_since_ms: u64,
    /// The leader epoch cache: each epoch the log holds and its start offset, oldest
    /// first.
    #[serde(default)]
    pub epoch_cache: Vec<EpochEntry>,
    /// All replicas, this broker first (so the leader first, while it leads).
    pub replicas: Vec<i32>,
    /// The in-sync replicas, leader first (empty on a follower).
    pub isr: Vec<i32>,
    /// `min.insync.replicas` as configured.
    pub min_insync_replicas: usize,
    /// The minimum in force: `min(min.insync.replicas, replication factor)`.
    pub effective_min_isr: usize,
    /// First offset still stored.
    pub log_start_offset: i64,
    /// Next offset to be assigned.
    pub log_end_offset: i64,
    /// Offset below which every record is on the whole ISR.
    pub high_watermark: i64,
    /// Offset below which no transaction is undecided: what `read_committed` reads to.
    /// Absent from older brokers' snapshots, read as unknown.
    #[serde(default = "unknown_offset")]
    pub last_stable_offset: i64,
    /// The transactions open on the partition, oldest first.
    #[serde(default)]
    pub open_transactions: Vec<OpenTxn>,
    /// Bytes of stored batches.
    pub size_bytes: usize,
    /// Number of stored batches.
    pub batch_count: usize,
    /// Number of idempotent producers with state on this partition.
    pub producer_count: usize,
    /// The followers, in replica order (none on a follower).
    pub followers: Vec<FollowerSnapshot>,
}

impl Partition {
    /// A serializable picture of the partition.
    pub fn snapshot(&self) -> PartitionSnapshot {
        PartitionSnapshot {
            topic: self.topic.clone(),
            partition: self.partition,
            leader: self.leader_id(),
            leader_epoch: self.leader_epoch,
            role: self.role,
            role_since_ms: self.role_since_ms,
            epoch_cache: self.epoch_cache.entries().to_vec(),
            replicas: self.replicas.clone(),
            isr: self.isr(),
            min_insync_replicas: self.config.min_insync_replicas,
            effective_min_isr: self.effective_min_isr(),
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
            high_watermark: self.high_watermark,
            last_stable_offset: self.last_stable_offset(),
            open_transactions: self.open_transactions(),
            size_bytes: self.size_bytes,
            batch_count: self.batches.len(),
            producer_count: self.producers.len(),
            followers: self
                .followers
                .iter()
                .map(|f| FollowerSnapshot {
                    id: f.replica_id,
                    log_end_offset: f.log_end_offset,
                    lag: if f.log_end_offset == UNKNOWN_OFFSET {
                        self.log_end_offset - self.log_start_offset
                    } else {
                        self.log_end_offset - f.log_end_offset
                    },
                    last_fetch_time_ms: f.last_fetch_time_ms,
                    last_caught_up_time_ms: f.last_caught_up_time_ms,
                    in_isr: f.in_isr,
                    log_start_offset: f.log_start_offset,
                })
                .collect(),
        }
    }
}
