//! A simulated follower replica and the handle that controls it while it runs.
//!
//! # The Kafka concept
//!
//! In Kafka, each broker that holds a follower replica runs a *replica fetcher*: a loop
//! that sends the leader one Fetch request for all the partitions it follows, appends what
//! comes back to its own log, and fetches again from its new log end offset (LEO). The
//! leader takes each fetch offset as that follower's LEO, keeps the follower in the
//! **in-sync replica set (ISR)** while it keeps up, and advances the **high watermark**
//! (HW) to the lowest LEO in the ISR. `acks=all` produce requests wait in the leader's
//! purgatory until the HW passes them.
//!
//! So the pace of the followers decides when produces are answered. A [`Follower`] is that
//! fetcher, running as a tokio task, and a [`FollowerHandle`] lets you make it misbehave
//! while it runs: slow it down, cap its fetch size, pause it (its connection stays open but
//! it stops fetching, so the leader sees its LEO freeze), crash it (connection and data
//! gone), restart it, or make it trail the leader by a fixed time.
//!
//! The fetch loop itself lives in [`crate::fetcher`]; what the two share, in
//! [`crate::state`].

use crate::config::FollowerConfig;
use crate::log::PartitionLog;
pub use crate::state::FollowerCounters;
use crate::state::{Control, Desired, ReplicaState, Shared, TopicPartition};
use crate::store::{MemoryLogs, ReplicaLogs};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tokio::sync::watch;
use tracing::{info, Instrument};

/// Spawns simulated followers.
pub struct Follower;

impl Follower {
    /// Starts a follower as a tokio task on the current runtime and returns its handle.
    ///
    /// The follower connects to `config.bootstrap` (retrying with backoff while the leader
    /// is not up), learns its partitions from Metadata and starts fetching. It runs until
    /// [`FollowerHandle::shutdown`]; dropping handles does not stop it.
    ///
    /// # Panics
    ///
    /// If called outside a tokio runtime.
    pub fn spawn(config: FollowerConfig) -> FollowerHandle {
        let logs = MemoryLogs::new(config.retain_bytes);
        Self::spawn_with_logs(config, logs)
    }

    /// Like [`spawn`](Self::spawn), with the fetched data going to `logs` instead of the
    /// follower's own in-memory copies: how a broker follows a leader into its own log.
    pub fn spawn_with_logs(config: FollowerConfig, logs: Arc<dyn ReplicaLogs>) -> FollowerHandle {
        let control = Control {
            desired: Desired::Running,
            session: 0,
            fetch_delay_ms: config.fetch_delay_ms,
            lag_ms: config.lag_ms,
            max_bytes: config.fetch_max_bytes,
            metadata_nudges: 0,
        };
        let replica_id = config.replica_id;
        let shared = Arc::new(Shared {
            config,
            logs,
            control: watch::Sender::new(control),
            replica: Mutex::new(ReplicaState::default()),
            done: watch::Sender::new(false),
        });
        let span = tracing::info_span!("follower", id = replica_id);
        tokio::spawn(crate::fetcher::run(shared.clone()).instrument(span));
        FollowerHandle { shared }
    }
}

/// Controls a running follower. Cheap to clone; all clones control the same follower.
///
/// Every method takes effect at once (the fetch task is woken), and logs what it does.
#[derive(Clone)]
pub struct FollowerHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for FollowerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FollowerHandle")
            .field("replica_id", &self.replica_id())
            .finish_non_exhaustive()
    }
}

impl FollowerHandle {
    /// This follower's replica (broker) id.
    pub fn replica_id(&self) -> i32 {
        self.shared.config.replica_id
    }

    /// The config it was started with (knobs changed since are in [`status`](Self::status)).
    pub fn config(&self) -> &FollowerConfig {
        &self.shared.config
    }

    /// Stops fetching but keeps the TCP connection open (it still re-reads Metadata, which
    /// the leader does not count as progress). A Fetch already in flight is finished. The leader sees this follower's LEO freeze: the HW stops at it, so every
    /// `acks=all` produce waits, until the leader drops the follower from the ISR after
    /// `replica.lag.time.max.ms`. No effect on a crashed follower (restart it instead).
    pub fn pause(&self) {
        let id = self.replica_id();
        self.shared.control.send_modify(|c| match c.desired {
            Desired::Running => {
                c.desired = Desired::Paused;
                info!(follower = id, "paused: the connection stays open but no more fetches are sent, so the leader sees this follower's log end offset stand still");
            }
            Desired::Paused => info!(follower = id, "already paused"),
            Desired::Crashed | Desired::Shutdown => {
                info!(follower = id, "pause ignored: the follower is not running")
            }
        });
    }

    /// Starts fetching again after [`pause`](Self::pause), from the log end offset it had.
    pub fn resume(&self) {
        let id = self.replica_id();
        self.shared.control.send_modify(|c| match c.desired {
            Desired::Paused => {
                c.desired = Desired::Running;
                info!(
                    follower = id,
                    "resumed: fetching again from its log end offset"
                );
            }
            Desired::Running => info!(follower = id, "already running"),
            Desired::Crashed | Desired::Shutdown => {
                info!(
                    follower = id,
                    "resume ignored: the follower is crashed or stopped (use restart)"
                )
            }
        });
    }

    /// Moves to `desired` in a new session (the fetcher drops its current connection),
    /// unless the follower has been shut down. Returns whether it did.
    fn begin_session(&self, desired: Desired) -> bool {
        let mut changed = false;
        self.shared.control.send_modify(|c| {
            if c.desired != Desired::Shutdown {
                c.desired = desired;
                c.session += 1;
                changed = true;
            }
        });
        changed
    }

    /// Drops the connection (abandoning any Fetch in flight) and all replicated data: every
    /// log end offset goes back to 0. The follower stays down until
    /// [`restart`](Self::restart).
    pub fn crash(&self) {
        let id = self.replica_id();
        if !self.begin_session(Desired::Crashed) {
            info!(follower = id, "crash ignored: the follower is stopped");
            return;
        }
        let mut st = self.shared.replica.lock();
        let partitions = st.partitions.len();
        st.wipe_epoch += 1;
        st.partitions.clear();
        st.connected = false;
        drop(st);
        info!(follower = id, partitions, "crashed: connection dropped and its copy of {partitions} partition(s) lost; it stays down until restarted");
    }

    /// Reconnects (dropping the current connection, if any) and resumes fetching from its
    /// own log end offsets: where it was, or from 0 after a crash. Also clears a pause.
    pub fn restart(&self) {
        let id = self.replica_id();
        if self.begin_session(Desired::Running) {
            info!(follower = id, "restarting: reconnecting to the leader and catching up from its own log end offsets");
        } else {
            info!(follower = id, "restart ignored: the follower is stopped");
        }
    }

    /// Sets the extra sleep before each Fetch ("slow follower"). Every `acks=all` produce
    /// then waits about this much longer, since the HW moves only when this follower's
    /// next Fetch reports its new LEO.
    pub fn set_fetch_delay_ms(&self, ms: u64) {
        self.shared.control.send_modify(|c| c.fetch_delay_ms = ms);
        info!(follower = self.replica_id(), "fetch delay set to {ms} ms");
    }

    /// Sets `max_bytes` of each Fetch (the leader still returns at least one whole batch,
    /// KIP-74). Values below 1 are raised to 1.
    pub fn set_max_bytes(&self, bytes: i32) {
        let bytes = bytes.max(1);
        self.shared.control.send_modify(|c| c.max_bytes = bytes);
        info!(
            follower = self.replica_id(),
            "fetch max bytes set to {bytes}"
        );
    }

    /// Sets "stay N ms behind" mode (0 turns it off); see [`FollowerConfig::lag_ms`].
    pub fn set_lag_ms(&self, ms: u64) {
        self.shared.control.send_modify(|c| c.lag_ms = ms);
        info!(
            follower = self.replica_id(),
            "replication lag set to {ms} ms"
        );
    }

    /// Re-reads Metadata now instead of at the next periodic refresh.
    ///
    /// In Kafka the controller *tells* a broker it has become a follower of a partition
    /// (LeaderAndIsr); a simulator only polls Metadata. A broker embedding followers can
    /// call this right after creating a topic so they start fetching it at once. A Fetch
    /// already parked at the leader is not interrupted (nor is it in Kafka): the new
    /// partition joins the next one.
    pub fn refresh_metadata(&self) {
        self.shared
            .control
            .send_modify(|c| c.metadata_nudges = c.metadata_nudges.wrapping_add(1));
    }

    /// A snapshot of the follower: its state, knobs, counters and per-partition offsets.
    pub fn status(&self) -> FollowerStatus {
        let c = self.shared.control.borrow().clone();
        let st = self.shared.replica.lock();
        let state = if st.finished {
            FollowerState::Stopped
        } else {
            match c.desired {
                Desired::Shutdown => FollowerState::Stopped,
                Desired::Crashed => FollowerState::Crashed,
                Desired::Paused => FollowerState::Paused,
                Desired::Running if st.connected => FollowerState::Running,
                Desired::Running => FollowerState::Connecting,
            }
        };
        let id = self.replica_id();
        FollowerStatus {
            replica_id: id,
            state,
            bootstrap: self.shared.config.bootstrap.clone(),
            connected: st.connected,
            fetch_in_flight: st.fetch_in_flight,
            fetch_delay_ms: c.fetch_delay_ms,
            lag_ms: c.lag_ms,
            max_bytes: c.max_bytes,
            counters: st.counters.clone(),
            last_error: st.last_error.clone(),
            partitions: st
                .partitions
                .iter()
                .map(|(tp, p)| PartitionStatus {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    log_start_offset: p.log.log_start_offset(),
                    log_end_offset: p.log.log_end_offset(),
                    leader_high_watermark_seen: p.leader_high_watermark_seen,
                    leader_log_start_offset_seen: p.leader_log_start_seen,
                    in_isr_seen: p.isr.contains(&id),
                    retained_bytes: p.log.retained_bytes() as u64,
                })
                .collect(),
        }
    }

    /// A copy of this follower's log of one partition (offsets and retained batches; the
    /// batches are reference-counted, so this is cheap). `None` if it does not follow it,
    /// or keeps it in a broker's log rather than its own.
    pub fn partition_log(&self, topic: &str, partition: i32) -> Option<PartitionLog> {
        let key = TopicPartition {
            topic: topic.to_owned(),
            partition,
        };
        self.shared
            .replica
            .lock()
            .partitions
            .get(&key)
            .and_then(|p| p.log.memory_copy())
    }

    /// Tells the follower to stop for good without waiting (usable from `Drop`).
    pub fn signal_shutdown(&self) {
        self.shared.control.send_modify(|c| {
            c.desired = Desired::Shutdown;
            c.session += 1;
        });
    }

    /// Stops the follower for good and waits until its task has closed the connection.
    pub async fn shutdown(&self) {
        self.signal_shutdown();
        let mut done = self.shared.done.subscribe();
        // The sender lives in `shared`, which we hold, so this cannot fail.
        let _ = done.wait_for(|d| *d).await;
    }
}

/// What a follower is doing, as reported by [`FollowerHandle::status`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FollowerState {
    /// Connected and fetching.
    Running,
    /// Told to pause: not fetching (the connection is kept, or re-opened if it dropped).
    Paused,
    /// Crashed: no connection, no data, until restarted.
    Crashed,
    /// Trying to reach the leader (not up yet, or the connection dropped).
    Connecting,
    /// Shut down.
    Stopped,
}

/// A snapshot of one follower. Serializes to JSON for the broker's admin API (and
/// `purgatory ctl` reads it back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FollowerStatus {
    /// The follower's replica id.
    pub replica_id: i32,
    /// What it is doing.
    pub state: FollowerState,
    /// The leader address it fetches from.
    pub bootstrap: String,
    /// Whether a connection to the leader is open right now.
    pub connected: bool,
    /// Whether a Fetch is under way (sent, and its records not appended yet). A pause
    /// lets it finish: a paused follower has stopped once this is false.
    #[serde(default)]
    pub fetch_in_flight: bool,
    /// Extra sleep before each Fetch.
    pub fetch_delay_ms: u64,
    /// "Stay N ms behind" setting (0 = off).
    pub lag_ms: u64,
    /// `max_bytes` of each Fetch.
    pub max_bytes: i32,
    /// What it has done since start.
    #[serde(flatten)]
    pub counters: FollowerCounters,
    /// The most recent problem (connection, protocol or data), if any.
    pub last_error: Option<String>,
    /// The partitions it follows.
    pub partitions: Vec<PartitionStatus>,
}

impl FollowerStatus {
    /// The log end offset of one partition, if followed.
    pub fn log_end_offset(&self, topic: &str, partition: i32) -> Option<i64> {
        self.partitions
            .iter()
            .find(|p| p.topic == topic && p.partition == partition)
            .map(|p| p.log_end_offset)
    }
}

/// One partition as a follower sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionStatus {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// First offset of the follower's log (moves only on a reset).
    pub log_start_offset: i64,
    /// The follower's log end offset: the fetch offset of its next Fetch.
    pub log_end_offset: i64,
    /// The high watermark in the leader's last Fetch response (-1 before any).
    pub leader_high_watermark_seen: i64,
    /// The leader's log start offset in its last Fetch response (-1 before any).
    pub leader_log_start_offset_seen: i64,
    /// Whether the leader's last Metadata listed this follower in the ISR.
    pub in_isr_seen: bool,
    /// Bytes of batches kept in memory for this partition.
    pub retained_bytes: u64,
}
