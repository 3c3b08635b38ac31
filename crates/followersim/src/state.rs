//! What a follower's fetch task and its handles share: the knobs the handle turns
//! ([`Control`]), the replica's data and counters ([`ReplicaState`]), and the two together
//! ([`Shared`]). The fetch loop (`fetcher.rs`) writes the data and reads the knobs; the
//! handle (`follower.rs`) does the opposite. Neither imports the other.

use std::collections::BTreeMap;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::config::FollowerConfig;
use crate::store::{ReplicaLog, ReplicaLogs};
use std::sync::Arc;

/// What the follower has been told to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Desired {
    /// Fetch.
    Running,
    /// Keep the connection, do not fetch.
    Paused,
    /// No connection, no data, until restarted.
    Crashed,
    /// Stop for good.
    Shutdown,
}

/// The knobs a [`FollowerHandle`](crate::follower::FollowerHandle) turns; the fetch task watches them.
#[derive(Debug, Clone)]
pub(crate) struct Control {
    pub desired: Desired,
    /// Bumped whenever the current connection must be dropped (crash, restart, shutdown).
    pub session: u64,
    pub fetch_delay_ms: u64,
    pub lag_ms: u64,
    pub max_bytes: i32,
    /// Bumped by [`FollowerHandle::refresh_metadata`](crate::follower::FollowerHandle::refresh_metadata).
    pub metadata_nudges: u64,
}

/// A topic partition, ordered by topic then partition.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// One followed partition: the local log plus what the leader last told us about it.
#[derive(Debug)]
pub(crate) struct PartitionState {
    pub log: Box<dyn ReplicaLog>,
    pub topic_id: u128,
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub leader_high_watermark_seen: i64,
    pub leader_log_start_seen: i64,
    /// Last error code logged for this partition, so a repeating error is logged once.
    pub last_error_code: i16,
}

/// What a follower has done since it started: kept by the fetch task, shown as is in
/// its status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FollowerCounters {
    /// Fetch requests sent since start.
    pub fetches_sent: u64,
    /// Bytes of record data received since start.
    pub bytes_fetched: u64,
    /// Record batches appended since start.
    pub batches_appended: u64,
    /// Partition responses rejected (gap, corruption) since start.
    pub rejected_responses: u64,
    /// Connections opened to the leader since start.
    pub connections: u64,
    /// When the last Fetch was sent (milliseconds since the Unix epoch).
    pub last_fetch_unix_ms: Option<u64>,
}

/// Everything the fetch task and the handle share about the replica's data.
#[derive(Debug, Default)]
pub(crate) struct ReplicaState {
    /// Bumped by a crash: whatever a task computed from older state must be thrown away.
    pub wipe_epoch: u64,
    pub connected: bool,
    pub finished: bool,
    /// A Fetch is sent and what it brings is not appended yet.
    pub fetch_in_flight: bool,
    pub partitions: BTreeMap<TopicPartition, PartitionState>,
    pub counters: FollowerCounters,
    pub last_error: Option<String>,
}

/// State shared by a follower's task and all clones of its handle.
pub(crate) struct Shared {
    pub config: FollowerConfig,
    /// Where fetched data goes: the follower's own logs, or a broker's.
    pub logs: Arc<dyn ReplicaLogs>,
    pub control: watch::Sender<Control>,
    pub replica: Mutex<ReplicaState>,
    pub done: watch::Sender<bool>,
}
