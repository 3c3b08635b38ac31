//! # A replicated partition, as its leader or one of its followers keeps it
//!
//! A Kafka partition is an append-only log of record batches, numbered by **offset**.
//! Every replica keeps a copy; one, the **leader**, takes the writes and the others,
//! **followers**, copy its log. On the leader, a few offsets describe where things stand:
//!
//! ```text
//!   log start offset          high watermark (HW)           log end offset (LEO)
//!         |                          |                               |
//!         v                          v                               v
//!         [ batch ][ batch ][ batch ][ batch ][ batch ][ batch ]
//!         <-- replicated to the whole ISR --><-- only on some replicas -->
//!         <---- consumers may read ---------->
//! ```
//!
//! * **Log start offset**: the first offset still stored. Retention moves it forward;
//!   fetching below it is `OFFSET_OUT_OF_RANGE`.
//! * **Log end offset (LEO)**: the offset the next appended record will get.
//! * **In-sync replicas (ISR)**: the leader plus the followers that keep up (see
//!   [`crate::replica`]). A follower leaves the ISR when it has not been caught up for
//!   `replica.lag.time.max.ms`, and rejoins as soon as its LEO reaches the HW.
//! * **High watermark (HW)**: the minimum LEO over the ISR, leader included: every
//!   offset below it is on every in-sync replica, so it survives the loss of the leader.
//!   Consumers only see records below the HW, and an `acks=all` produce is answered
//!   once the HW has passed its records. The HW never moves backwards and, as in
//!   KIP-966, does not advance while the ISR is smaller than the minimum in force.
//! * **Minimum ISR in force**: `min(min.insync.replicas, replication factor)`, as
//!   Kafka's `effectiveMinIsr`. A topic with one replica takes `acks=all` writes even
//!   though the broker's `min.insync.replicas` is 2: no ISR could ever be larger.
//!
//! Everything here is synchronous and takes the current time as an argument, so the
//! broker can drive it from its clock and tests from a manual one.
//!
//! # Roles
//!
//! A [`Partition`] is in one [`Role`]: it starts as the leader (leader epoch 0), and
//! [`Partition::make_leader`] and [`Partition::make_follower`] switch it, each with the
//! new leader epoch, which never goes back. As a follower it appends what it fetched
//! from the leader, offsets and epochs included ([`Partition::append_as_follower`]),
//! takes its high watermark and log start offset from the leader's, and truncates what
//! the leader does not have ([`Partition::truncate_to`]). The log, its offsets, the
//! [`crate::leader_epoch`] cache and the producer state are kept across every switch; the
//! followers' progress exists only on the leader.
//!
//! Why truncation is needed (KIP-101): a leader appends records before its followers
//! have them. If it fails, a follower that did not get its last records becomes leader
//! and writes other records at the same offsets. When the old leader comes back as a
//! follower, its log holds records no other replica has, above what the new leader
//! shares with it; it asks the new leader where its last epoch ends (OffsetForLeaderEpoch,
//! or the diverging epoch of a Fetch v12+ response) and truncates there. Everything below
//! the high watermark is on the new leader, so it is never truncated.
//!
//! # Files
//!
//! This file holds the partition's state and the numbers above. The rest is one file per
//! job: `append.rs` (the leader's writes), `read.rs` (consumer and follower reads, offset
//! lookups), `replication.rs` (follower fetches, the ISR, the high watermark),
//! `retention.rs` (dropping old batches), `roles.rs` (becoming leader or follower),
//! `follower.rs` (a follower's appends and offsets), `truncation.rs` (truncating a
//! follower's log, diverging epochs) and `snapshot.rs` (the picture for the APIs).

use std::collections::VecDeque;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::config::LogConfig;
use crate::leader_epoch::{EpochEntry, LeaderEpochCache};
use crate::producer_state::{ProducerStateEntry, ProducerStateManager};
use crate::replica::FollowerState;
use crate::transactions::TxnIndex;

mod append;
mod delete_records;
mod follower;
mod markers;
mod read;
mod replication;
mod retention;
mod roles;
mod snapshot;
mod truncation;

pub use delete_records::{RecordsDeleted, DELETE_UP_TO_HIGH_WATERMARK};
pub use replication::{FollowerUpdate, IsrShrink};
pub use snapshot::{FollowerSnapshot, PartitionSnapshot};
pub use truncation::{Truncation, TruncationTarget};

/// `UNDEFINED_EPOCH` of the OffsetForLeaderEpoch API.
pub const UNDEFINED_EPOCH: i32 = -1;
/// `UNDEFINED_EPOCH_OFFSET` of the OffsetForLeaderEpoch API.
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// What this broker is for a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Role {
    /// It takes the writes and tracks the followers, the ISR and the high watermark.
    #[default]
    Leader,
    /// It copies the log of broker `leader_id`.
    Follower {
        /// The broker it fetches from.
        leader_id: i32,
    },
}

/// Up to which offset a read may return data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ReadBound {
    /// Consumers: only batches entirely below the high watermark.
    HighWatermark,
    /// `read_committed` consumers: only batches entirely below the last stable offset.
    LastStable,
    /// Followers: everything up to the log end offset.
    LogEnd,
}

/// How far an `acks=all` write has got: Kafka's `checkEnoughReplicasReachOffset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ReplicationState {
    /// The high watermark is still below the required offset: keep waiting.
    Pending,
    /// The high watermark reached the required offset and the ISR has at least the
    /// minimum in force: every in-sync replica holds the records.
    Replicated,
    /// The high watermark reached the required offset, but by the time it was checked
    /// the ISR had shrunk below the minimum in force (`NOT_ENOUGH_REPLICAS_AFTER_APPEND`):
    /// the records are on every replica that *is* in sync, just not on enough of them.
    ReplicatedBelowMinIsr,
}

/// A partition's log end offset, high watermark and last stable offset at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Marks {
    /// The offset the next record will get.
    pub log_end_offset: i64,
    /// The offset below which every in-sync replica holds the records.
    pub high_watermark: i64,
    /// The offset below which no transaction is undecided: the first offset of the oldest
    /// open transaction, or the high watermark.
    pub last_stable_offset: i64,
}

/// What one change (an append, a follower fetch, an ISR check) did to a partition:
/// its log end offset and high watermark before and after, and the ISR if it changed.
/// Whoever waits on the partition is woken from this, and the live view is told it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionChange {
    /// Before the change.
    pub before: Marks,
    /// After it.
    pub after: Marks,
    /// The ISR after the change, if the change moved a replica in or out of it.
    pub new_isr: Option<Vec<i32>>,
}

impl PartitionChange {
    /// No change at all, at `marks`.
    pub fn none(marks: Marks) -> Self {
        PartitionChange {
            before: marks,
            after: marks,
            new_isr: None,
        }
    }

    /// The log grew: parked follower fetches may be able to read more.
    pub fn log_grew(&self) -> bool {
        self.after.log_end_offset > self.before.log_end_offset
    }

    /// The high watermark moved forward: `acks=all` produces and consumer fetches may
    /// complete.
    pub fn high_watermark_advanced(&self) -> bool {
        self.after.high_watermark > self.before.high_watermark
    }

    /// The last stable offset moved forward: `read_committed` fetches may complete.
    pub fn last_stable_offset_advanced(&self) -> bool {
        self.after.last_stable_offset > self.before.last_stable_offset
    }
}

/// Where an append landed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AppendInfo {
    /// Offset of the first appended record (for a duplicate: of the original batch).
    pub base_offset: i64,
    /// Offset of the last appended record (for a duplicate: of the original batch).
    pub last_offset: i64,
    /// The log start offset after the append.
    pub log_start_offset: i64,
    /// True if this was an idempotent producer's retry of a batch the log already
    /// holds: nothing was appended and the offsets are the original batch's.
    pub duplicate: bool,
    /// Number of records appended (for a duplicate: in the original batch).
    pub record_count: usize,
    /// Bytes appended to the log (0 for a duplicate).
    pub bytes: usize,
    /// What the append did to the partition. The HW moves on an append only when the ISR
    /// is the leader alone and `min.insync.replicas <= 1`.
    pub change: PartitionChange,
}

/// The outcome of a read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    /// Whole stored batches, concatenated (possibly empty).
    pub records: Bytes,
    /// The partition's high watermark.
    pub high_watermark: i64,
    /// The partition's log start offset.
    pub log_start_offset: i64,
    /// The partition's log end offset.
    pub log_end_offset: i64,
    /// The partition's last stable offset.
    pub last_stable_offset: i64,
}

/// A batch as stored: its bytes (with offset and epoch set) and what reads need.
#[derive(Debug, Clone)]
struct StoredBatch {
    base_offset: i64,
    last_offset: i64,
    max_timestamp: i64,
    /// Bytes appended to this partition before this batch, ever (like a file
    /// position): the bytes between two batches are a subtraction away.
    position: u64,
    data: Bytes,
}

/// One broker's copy of one replicated partition: its log, its role, its leader epoch
/// cache, the high watermark and the idempotent producers' state, and, on the leader,
/// the followers' progress and the ISR.
#[derive(Debug)]
pub struct Partition {
    topic: String,
    partition: i32,
    /// This broker's id: the leader's at creation.
    local_id: i32,
    role: Role,
    /// When the partition took its current role (creation time at first).
    role_since_ms: u64,
    leader_epoch: i32,
    epoch_cache: LeaderEpochCache,
    replicas: Vec<i32>,
    config: LogConfig,
    batches: VecDeque<StoredBatch>,
    log_start_offset: i64,
    log_end_offset: i64,
    high_watermark: i64,
    size_bytes: usize,
    next_position: u64,
    followers: Vec<FollowerState>,
    producers: ProducerStateManager,
    txns: TxnIndex,
}

impl Partition {
    /// Creates an empty partition led by `leader_id`, which is this broker: the partition
    /// starts as the leader. `replicas` lists every replica, leader first; the leader is
    /// put first if it is elsewhere or missing, and repeated ids are ignored. All replicas
    /// start in the ISR with LEO 0 and caught up at `now_ms`; the leader epoch is 0.
    ///
    /// A `min_insync_replicas` above the number of replicas is capped by it (see
    /// [`Partition::effective_min_isr`]).
    pub fn new(
        topic: &str,
        partition: i32,
        leader_id: i32,
        replicas: Vec<i32>,
        config: LogConfig,
        now_ms: u64,
    ) -> Self {
        let mut all = vec![leader_id];
        for id in replicas {
            if !all.contains(&id) {
                all.push(id);
            }
        }
        let followers = all[1..]
            .iter()
            .map(|&id| FollowerState::new(id, now_ms))
            .collect();
        let mut partition = Partition {
            topic: topic.to_string(),
            partition,
            local_id: leader_id,
            role: Role::Leader,
            role_since_ms: now_ms,
            leader_epoch: 0,
            epoch_cache: LeaderEpochCache::new(),
            replicas: all,
            config,
            batches: VecDeque::new(),
            log_start_offset: 0,
            log_end_offset: 0,
            high_watermark: 0,
            size_bytes: 0,
            next_position: 0,
            followers,
            producers: ProducerStateManager::default(),
            txns: TxnIndex::default(),
        };
        partition.maybe_advance_high_watermark();
        partition
    }

    /// The high watermark: records below it are on every in-sync replica.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// The log end offset (the leader's LEO): the offset of the next record.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// The first offset still stored.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    /// The last stable offset: a `read_committed` reader sees the records below it. The
    /// first offset of the oldest transaction still undecided (open, or its marker not yet
    /// below the HW), or the HW if there is none.
    pub fn last_stable_offset(&self) -> i64 {
        self.txns.last_stable_offset(self.high_watermark)
    }

    /// The idempotent and transactional producers this partition remembers, by id.
    pub fn producers(&self) -> Vec<&ProducerStateEntry> {
        let mut all: Vec<&ProducerStateEntry> = self.producers.producers().collect();
        all.sort_by_key(|p| p.producer_id);
        all
    }

    /// The transactions open on this partition, oldest first.
    pub fn open_transactions(&self) -> Vec<crate::OpenTxn> {
        self.txns.open()
    }

    /// The aborted transactions a read of `fetch_offset..upper_bound` overlaps, which a
    /// `read_committed` Fetch answer lists so the consumer can drop their records.
    pub fn aborted_transactions(
        &self,
        fetch_offset: i64,
        upper_bound: i64,
    ) -> Vec<crate::AbortedTxn> {
        self.txns.aborted_in(fetch_offset, upper_bound)
    }

    /// The current leader epoch: 0 at creation, then the epoch of the last
    /// [`Partition::make_leader`] or [`Partition::make_follower`].
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    /// Broker id of the leader: this broker while it leads, the broker it follows
    /// otherwise.
    pub fn leader_id(&self) -> i32 {
        match self.role {
            Role::Leader => self.local_id,
            Role::Follower { leader_id } => leader_id,
        }
    }

    /// This broker's id (the leader's given to [`Partition::new`]).
    pub fn local_id(&self) -> i32 {
        self.local_id
    }

    /// Whether this broker leads the partition or follows another.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Whether this broker is the partition's leader.
    pub fn is_leader(&self) -> bool {
        self.role == Role::Leader
    }

    /// When the partition took its current role (`now_ms` of the switch, or of
    /// creation).
    pub fn role_since_ms(&self) -> u64 {
        self.role_since_ms
    }

    /// The leader epoch cache: every epoch the log holds and the offset it starts at,
    /// oldest first (see [`crate::leader_epoch`]).
    pub fn epoch_cache(&self) -> &[EpochEntry] {
        self.epoch_cache.entries()
    }

    /// Topic name.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Partition index.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// The log configuration.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Runs with `config` from now on (its topic's configs were altered). A lower
    /// `min.insync.replicas` may let the high watermark move at once (KIP-966 holds it
    /// while the ISR is below the minimum); a higher one refuses the next `acks=all`
    /// append if the ISR is too small. `retention.bytes` is applied by the next
    /// [`enforce_retention`](Self::enforce_retention), `max.message.bytes` by the next
    /// append.
    pub fn set_config(&mut self, config: LogConfig) -> PartitionChange {
        let before = self.marks();
        self.config = config;
        self.maybe_advance_high_watermark();
        PartitionChange {
            before,
            after: self.marks(),
            new_isr: None,
        }
    }

    /// All replicas; this broker first (so, while it leads, the leader first).
    pub fn replicas(&self) -> &[i32] {
        &self.replicas
    }

    /// The state of an idempotent producer on this partition, if known.
    pub fn producer_state(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.producers.producer(producer_id)
    }

    /// Number of idempotent producers with state on this partition.
    pub fn producer_count(&self) -> usize {
        self.producers.len()
    }

    /// Bytes of stored batches.
    pub fn size_bytes(&self) -> usize {
        self.size_bytes
    }

    /// Number of stored batches.
    pub fn batch_count(&self) -> usize {
        self.batches.len()
    }
}
