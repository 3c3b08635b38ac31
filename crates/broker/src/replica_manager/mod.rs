//! The replica manager: every partition this broker leads, and the purgatories that park
//! requests waiting on them.
//!
//! Kafka splits a broker's work in three layers, and so does this crate:
//!
//! ```text
//!   KafkaApis            handlers/          wire <-> domain, one file per API
//!   ReplicaManager       replica_manager/   append_records, fetch_messages, the ISR check
//!   Partition            replog::Partition  LEO, HW, ISR, producer state (pure)
//! ```
//!
//! This is the middle layer, where the pieces meet. A produce appends to a partition's
//! log and, for `acks=all`, parks a [`DelayedProduce`] until the high watermark (HW) passes
//! it. A follower fetch moves that follower's log end offset (LEO), which may move the HW,
//! which may complete parked produces and parked consumer fetches. This module owns that
//! chain of cause and effect. Each change runs in `update_partition` (under the partition
//! lock); replog's result says what it moved (a `PartitionChange`: LEO and HW before and
//! after, the new ISR); the live view is told it; then `complete_waiting` wakes the
//! purgatories, naming the change as the cause of whatever it completes:
//!
//! ```text
//!   append ──► LEO moves ──► fetch purgatory: check_and_complete_with(tp, Append)
//!                    └──► HW moves? (only if the ISR is just the leader)
//!   follower fetch ──► follower LEO ──► HW moves? ──► produce purgatory: check_and_complete_with(tp, FollowerFetch)
//!                                                └──► fetch purgatory:   check_and_complete_with(tp, FollowerFetch)
//!   ISR check (every replica.lag.time.max.ms / 2) ──► ISR shrinks ──► HW moves? ──► same, IsrShrink
//! ```
//!
//! Requests come in through [`ReplicaManager::append_records`] and
//! [`ReplicaManager::fetch_messages`]; answers go out through the callback the caller
//! hands in, called at once or later by the delayed operation. Nothing here knows the wire
//! format.
//!
//! Its other jobs live in their own modules: the topic registry ([`crate::topics`]), the
//! broker-wide log memory cap ([`log_memory`]), producer ids ([`producer_ids`]).
//!
//! Locking: each partition has its own mutex. No partition lock is ever held while calling
//! into a purgatory, because a purgatory calls `try_complete`, which takes partition locks.

mod append;
mod configs;
mod create_partitions;
mod delete_records;
#[cfg(test)]
mod delete_records_tests;
pub(crate) mod fetch;
mod follower_wakeups;
mod markers;
mod roles;
pub use delete_records::MAX_DELETE_RECORDS_TIMEOUT_MS;
pub use fetch::{FetchPartitionRequest, MAX_FETCH_WAIT_MS};
pub mod log_memory;
pub mod producer_ids;

pub use follower_wakeups::{FollowerWakeups, WakeWatch};

pub use append::AppendOrigin;
pub use create_partitions::assignment_count_error;

use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;

use kafka_protocol::ResponseError;
use replog::{Partition, PartitionChange, ReadBound};
use timewheel::{Purgatory, PurgatoryConfig, Timer, TimerConfig};
use tracing::info;
use uuid::Uuid;

use crate::config::{BrokerConfig, ClockMode};
use crate::delayed::{DelayedDeleteRecords, DelayedFetch, DelayedProduce};
use crate::faults::Faults;
use crate::partition::{PartitionHandle, TopicPartition};
use crate::request::Cause;
use crate::telemetry::Telemetry;
use crate::topics::{NewTopic, Topic, TopicError, TopicRegistry};
use log_memory::LogMemory;
use producer_ids::ProducerIdManager;

/// An offset found by ListOffsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetAndTimestamp {
    /// The offset (-1 if no record matches).
    pub offset: i64,
    /// The record's timestamp (-1 for the special offsets, or if no record matches).
    pub timestamp: i64,
    /// The partition's leader epoch (-1 if no record matches).
    pub leader_epoch: i32,
}

/// Kafka's check of a request's `current_leader_epoch` against the partition's leader
/// epoch (`Partition.localLogWithEpochOrThrow`): -1 skips it; an older epoch means the
/// client's metadata is stale (FENCED_LEADER_EPOCH), a newer one that ours is
/// (UNKNOWN_LEADER_EPOCH). Either way the client refreshes its metadata and retries.
pub fn check_leader_epoch(leader_epoch: i32, requested: i32) -> Result<(), ResponseError> {
    match requested {
        -1 => Ok(()),
        r if r < leader_epoch => Err(ResponseError::FencedLeaderEpoch),
        r if r > leader_epoch => Err(ResponseError::UnknownLeaderEpoch),
        _ => Ok(()),
    }
}

/// ListOffsets' special timestamps.
pub mod list_offsets {
    /// The end of what the reader may read: the high watermark for a consumer, the log
    /// end for a replica.
    pub const LATEST: i64 = -1;
    /// The log start offset.
    pub const EARLIEST: i64 = -2;
    /// KIP-734: the committed record with the largest timestamp.
    pub const MAX_TIMESTAMP: i64 = -3;
}

/// The broker's shared state. One per broker; shared by every connection task.
pub struct ReplicaManager {
    /// Effective configuration.
    pub config: BrokerConfig,
    /// The one timer all purgatories share, so one wheel snapshot shows every timeout.
    pub timer: Timer,
    /// Produce requests waiting for the HW (Kafka's `Produce` purgatory).
    pub produce_purgatory: Purgatory<TopicPartition, DelayedProduce>,
    /// Fetch requests waiting for data (Kafka's `Fetch` purgatory).
    pub fetch_purgatory: Purgatory<TopicPartition, DelayedFetch>,
    /// DeleteRecords requests waiting for the followers (Kafka's `DeleteRecords` purgatory).
    pub delete_records_purgatory: Purgatory<TopicPartition, DelayedDeleteRecords>,
    /// Every topic.
    pub topics: TopicRegistry,
    /// Bytes held in partition logs, under `log.memory.max.bytes`.
    pub log_memory: LogMemory,
    /// Idempotent producers' ids and epochs.
    pub producer_ids: Arc<ProducerIdManager>,
    /// Recent requests and replication events, and the metrics counters.
    pub telemetry: Arc<Telemetry>,
    /// The fault rules, shared by every broker of the process. The connection layer
    /// applies them before a request reaches its handler; nothing below it looks at them.
    pub faults: Arc<Faults>,
    /// Held while a topic's configs are read, changed and applied ([`BrokerShared`]).
    pub(crate) config_writes: Arc<Mutex<()>>,
    /// Wakes of parked follower fetches when topics change (`follower_wakeups.rs`).
    pub(crate) follower_wakeups: Arc<FollowerWakeups>,
    cluster_id: String,
    bound_port: OnceLock<i32>,
    /// The cluster this broker belongs to, when it runs with others (`--brokers N`).
    cluster: OnceLock<Weak<dyn crate::cluster::ClusterLink>>,
}

impl ReplicaManager {
    /// Builds the state and starts the periodic ISR check on the timer.
    pub fn new(config: BrokerConfig) -> Arc<Self> {
        let shared = BrokerShared::for_config(&config);
        Self::with_shared(config, shared)
    }

    /// The timer `config` asks for (system or manual clock).
    pub fn timer_for(config: &BrokerConfig) -> Timer {
        let timer_config = TimerConfig {
            tick_ms: config.timer_tick_ms,
            wheel_size: config.timer_wheel_size,
        };
        match config.clock {
            ClockMode::System => Timer::system(timer_config),
            ClockMode::Manual => Timer::manual(timer_config),
        }
    }

    /// Like [`new`](Self::new), with what it shares with the other brokers of the same
    /// process: each broker has its own purgatories, and one wheel holds every timeout.
    pub fn with_shared(config: BrokerConfig, shared: BrokerShared) -> Arc<Self> {
        let BrokerShared {
            timer,
            producer_ids,
            faults,
            config_writes,
        } = shared;
        let purgatory_config = || PurgatoryConfig {
            purge_interval: config.purge_interval_requests,
        };
        let rm = Arc::new(ReplicaManager {
            produce_purgatory: Purgatory::new("Produce", timer.clone(), purgatory_config()),
            fetch_purgatory: Purgatory::new("Fetch", timer.clone(), purgatory_config()),
            delete_records_purgatory: Purgatory::new(
                "DeleteRecords",
                timer.clone(),
                purgatory_config(),
            ),
            timer,
            topics: TopicRegistry::new(config.max_partitions),
            log_memory: LogMemory::new(config.log_memory_max_bytes),
            producer_ids,
            telemetry: Arc::new(Telemetry::default()),
            faults,
            config_writes,
            follower_wakeups: Arc::default(),
            cluster_id: "purgatory-cluster".to_string(),
            bound_port: OnceLock::new(),
            cluster: OnceLock::new(),
            config,
        });
        schedule_isr_check(Arc::downgrade(&rm));
        rm
    }

    /// Current time on the broker's clock (system or manual).
    pub fn now_ms(&self) -> u64 {
        self.timer.now_ms()
    }

    /// Records the port the listener actually bound (the config may say port 0).
    pub fn set_bound_port(&self, port: u16) {
        let _ = self.bound_port.set(i32::from(port));
    }

    /// The listener's bound port, once known.
    pub fn bound_port(&self) -> Option<i32> {
        self.bound_port.get().copied()
    }

    /// Joins this broker to `cluster`: Metadata then answers the controller's view, and
    /// topics are created through it, on every broker.
    pub fn link_cluster(&self, cluster: Weak<dyn crate::cluster::ClusterLink>) {
        let _ = self.cluster.set(cluster);
    }

    /// The cluster this broker belongs to, if it runs with others.
    pub fn cluster(&self) -> Option<Arc<dyn crate::cluster::ClusterLink>> {
        self.cluster.get().and_then(Weak::upgrade)
    }

    /// The cluster id reported in Metadata.
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// Every topic, by name.
    pub fn topics(&self) -> Vec<Arc<Topic>> {
        self.topics.all()
    }

    /// A topic by name.
    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics.get(name)
    }

    /// A topic by id.
    pub fn topic_by_id(&self, id: Uuid) -> Option<Arc<Topic>> {
        self.topics.by_id(id)
    }

    /// A partition, if its topic exists.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<Arc<PartitionHandle>> {
        self.topics.partition(topic, partition)
    }

    /// Bytes held in all partition logs.
    pub fn log_bytes(&self) -> usize {
        self.log_memory.used()
    }

    /// Metadata's lookup: a topic by name, created with the broker's defaults if it does
    /// not exist, `allow` is set (the request asked for auto-creation) and
    /// `auto.create.topics.enable` is on. Only Metadata creates topics this way, as in
    /// Kafka; a produce to an unknown topic is answered UNKNOWN_TOPIC_OR_PARTITION.
    pub fn get_or_auto_create(&self, name: &str, allow: bool) -> Result<Arc<Topic>, TopicError> {
        if let Some(t) = self.topic(name) {
            return Ok(t);
        }
        if !(allow && self.config.auto_create_topics) {
            return Err(TopicError::new(
                ResponseError::UnknownTopicOrPartition,
                "unknown topic",
            ));
        }
        let new = if name == crate::topics::OFFSETS_TOPIC {
            crate::topics::offsets_topic(&self.config)
        } else {
            NewTopic {
                name: name.to_string(),
                partitions: -1,
                replication_factor: -1,
                configs: vec![],
            }
        };
        let created = self.create_topic(new, false);
        match created {
            Ok(t) => Ok(t),
            // Lost a race with another creator: fine, use theirs.
            Err(e) if e.error == ResponseError::TopicAlreadyExists => {
                self.topic(name).ok_or_else(|| {
                    TopicError::new(ResponseError::UnknownTopicOrPartition, "unknown topic")
                })
            }
            Err(e) => Err(e),
        }
    }

    /// Validates and (unless `validate_only`) creates a topic.
    pub fn create_topic(
        &self,
        new: NewTopic,
        validate_only: bool,
    ) -> Result<Arc<Topic>, TopicError> {
        if let (Some(cluster), false) = (self.cluster(), validate_only) {
            return cluster.create_topic(self.config.broker_id, new);
        }
        self.create_local_topic(new, validate_only)
    }

    /// Validates and (unless `validate_only`) creates a topic on this broker alone: a
    /// cluster calls this on each broker, then sets each partition's role.
    pub fn create_local_topic(
        &self,
        new: NewTopic,
        validate_only: bool,
    ) -> Result<Arc<Topic>, TopicError> {
        self.create_local_topic_with_id(new, validate_only, None)
    }

    /// Like [`create_local_topic`](Self::create_local_topic), with the topic id `id` if
    /// given: every broker of a cluster creates a topic under the one id the cluster chose,
    /// as Kafka's brokers all take it from the controller's TopicRecord (a client that saw
    /// two ids for one topic would take it for deleted and re-created).
    pub fn create_local_topic_with_id(
        &self,
        new: NewTopic,
        validate_only: bool,
        id: Option<Uuid>,
    ) -> Result<Arc<Topic>, TopicError> {
        let mut topic = Topic::build(new, &self.config, self.now_ms())?;
        if let Some(id) = id {
            topic.id = id;
        }
        if validate_only {
            self.topics.check(&topic)?;
            return Ok(Arc::new(topic));
        }
        let topic = self.topics.register(topic)?;
        info!(
            topic = %topic.name,
            partitions = topic.partitions.len(),
            replication_factor = topic.replication_factor,
            "created topic"
        );
        Ok(topic)
    }

    /// Deletes a topic. Operations parked on its partitions complete with
    /// UNKNOWN_TOPIC_OR_PARTITION.
    pub fn delete_topic(&self, name: &str) -> Result<(), TopicError> {
        match self.cluster() {
            Some(cluster) => cluster.delete_topic(name),
            None => self.delete_local_topic(name),
        }
    }

    /// Deletes a topic on this broker alone (a cluster calls this on each broker).
    pub fn delete_local_topic(&self, name: &str) -> Result<(), TopicError> {
        let Some(topic) = self.topics.remove(name) else {
            return Err(TopicError::new(
                ResponseError::UnknownTopicOrPartition,
                "unknown topic",
            ));
        };
        for p in &topic.partitions {
            self.log_memory.release(p.lock().size_bytes());
            self.produce_purgatory.check_and_complete(&p.tp);
            self.fetch_purgatory.check_and_complete(&p.tp);
        }
        info!(topic = %name, "deleted topic");
        Ok(())
    }

    /// Signals every topic creation and deletion — the moment a Kafka controller would
    /// send LeaderAndIsr to the followers. Embedded followers re-read Metadata on it, so a
    /// new topic is replicated at once rather than on their next periodic refresh.
    pub fn subscribe_topic_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.topics.subscribe()
    }

    /// ListOffsets: the offset for `timestamp` (or one of the special
    /// [`list_offsets`] timestamps) in a partition, as seen by a reader with `bound`:
    /// consumers see up to the high watermark (read_committed up to the last stable
    /// offset), and any other replica id — a follower, or
    /// Kafka's debugging replica -2 — the whole log, whatever isolation it asks for
    /// (Kafka's `fetchOffsetForTimestamp` with no isolation level). "Latest" is the
    /// bound's end; a timestamp that finds no record answers offset, timestamp and leader
    /// epoch -1.
    pub fn fetch_offset_for_timestamp(
        &self,
        topic: &str,
        partition: i32,
        timestamp: i64,
        bound: ReadBound,
        current_leader_epoch: i32,
    ) -> Result<OffsetAndTimestamp, ResponseError> {
        let handle = self
            .partition(topic, partition)
            .ok_or(ResponseError::UnknownTopicOrPartition)?;
        let log = handle.lock();
        log.ensure_leader().map_err(|e| e.error())?;
        check_leader_epoch(log.leader_epoch(), current_leader_epoch)?;
        let found = match timestamp {
            list_offsets::LATEST => Some(match bound {
                ReadBound::HighWatermark => (log.high_watermark(), -1),
                ReadBound::LastStable => (log.last_stable_offset(), -1),
                ReadBound::LogEnd => (log.log_end_offset(), -1),
            }),
            list_offsets::EARLIEST => Some((log.log_start_offset(), -1)),
            list_offsets::MAX_TIMESTAMP => log.offset_for_max_timestamp(bound),
            ts => log.offset_for_timestamp(ts, bound),
        };
        Ok(match found {
            Some((offset, timestamp)) => OffsetAndTimestamp {
                offset,
                timestamp,
                leader_epoch: log.leader_epoch(),
            },
            None => OffsetAndTimestamp {
                offset: -1,
                timestamp: -1,
                leader_epoch: -1,
            },
        })
    }

    /// OffsetForLeaderEpoch: where leader epoch `epoch` ends in a partition, as
    /// `(epoch, end offset)`.
    pub fn end_offset_for_leader_epoch(
        &self,
        topic: &str,
        partition: i32,
        epoch: i32,
        current_leader_epoch: i32,
    ) -> Result<(i32, i64), ResponseError> {
        let handle = self
            .partition(topic, partition)
            .ok_or(ResponseError::UnknownTopicOrPartition)?;
        let log = handle.lock();
        log.ensure_leader().map_err(|e| e.error())?;
        check_leader_epoch(log.leader_epoch(), current_leader_epoch)?;
        Ok(log.end_offset_for_leader_epoch(epoch))
    }

    /// Runs `change` on a partition's log under its lock and applies `retention.bytes` (a
    /// longer log or a higher HW may put old replicated batches past it). Every change to a
    /// partition (append, follower fetch, ISR shrink) goes through here, and then, with
    /// what its result says it changed, through [`complete_waiting`](Self::complete_waiting).
    fn update_partition<T>(
        &self,
        partition: &PartitionHandle,
        change: impl FnOnce(&mut Partition) -> T,
    ) -> T {
        let (out, freed) = {
            let mut log = partition.lock();
            let out = change(&mut log);
            (out, log.enforce_retention())
        };
        self.log_memory.release(freed);
        out
    }

    /// Wakes whoever waits on `tp` after `change`, telling the operations it completes
    /// that `cause` did it: a longer log may complete follower fetches; a higher HW may
    /// complete produces and consumer fetches. Called with no partition lock held.
    fn complete_waiting(&self, tp: &TopicPartition, change: &PartitionChange, cause: Cause) {
        if let (Some(isr), Some(cluster)) = (&change.new_isr, self.cluster()) {
            // Kafka's AlterPartition: the controller keeps the ISR Metadata shows.
            cluster.isr_changed(self.config.broker_id, tp, isr.clone());
        }
        if change.high_watermark_advanced() {
            let produces = self.produce_purgatory.check_and_complete_with(tp, cause);
            let fetches = self.fetch_purgatory.check_and_complete_with(tp, cause);
            if produces + fetches > 0 {
                tracing::debug!(%tp, produces, fetches, "high watermark advance completed delayed operations");
            }
        } else if change.log_grew() {
            self.fetch_purgatory.check_and_complete_with(tp, cause);
        }
    }

    /// Kafka's `maybeShrinkIsr`, for every partition.
    pub fn check_isr(&self) {
        let now = self.now_ms();
        for p in self.topics.partitions() {
            let shrink = self.update_partition(&p, |log| log.maybe_shrink_isr(now));
            if shrink.removed.is_empty() {
                continue;
            }
            self.telemetry.isr_shrunk(&p.tp, now, &shrink);
            // Operations completed by a HW that moves on without the removed followers
            // say so.
            let cause = Cause::IsrShrink {
                high_watermark: shrink.change.after.high_watermark,
            };
            self.complete_waiting(&p.tp, &shrink.change, cause);
        }
    }

    /// Stops the timer; parked operations are dropped without a response.
    pub fn shutdown(&self) {
        self.produce_purgatory.shutdown();
        self.fetch_purgatory.shutdown();
        self.timer.shutdown();
    }
}

/// What the brokers of one process share.
#[derive(Clone)]
pub struct BrokerShared {
    /// One timer: one wheel holds every broker's timeouts.
    pub timer: Timer,
    /// One producer-id allocator. Kafka's controller hands out producer ids for the
    /// whole cluster (AllocateProducerIds), so two producers never get the same id from
    /// two brokers and then write to one partition as if they were one producer.
    pub producer_ids: Arc<ProducerIdManager>,
    /// One list of fault rules: a rule may name the broker it applies to.
    pub faults: Arc<Faults>,
    /// Topic config changes, one at a time across the process, as Kafka's controller
    /// applies them from its single event queue: an incremental alter reads the current
    /// overrides and writes the whole new set, so two at once would lose one's change.
    pub config_writes: Arc<Mutex<()>>,
}

impl BrokerShared {
    /// A timer as `config` asks for it (system or manual clock), and a new allocator.
    pub fn for_config(config: &BrokerConfig) -> Self {
        let timer = ReplicaManager::timer_for(config);
        BrokerShared {
            faults: Arc::new(Faults::new(timer.clone())),
            timer,
            producer_ids: Arc::default(),
            config_writes: Arc::default(),
        }
    }
}

/// Kafka checks the ISR every `replica.lag.time.max.ms / 2`, on the same clock as every
/// other timeout here, so a manual clock drives ISR shrink too.
fn schedule_isr_check(rm: Weak<ReplicaManager>) {
    let Some(strong) = rm.upgrade() else { return };
    let interval = (strong.config.replica_lag_time_max_ms / 2).max(1) as i64;
    let timer = strong.timer.clone();
    drop(strong);
    timer.schedule(interval, move || {
        if let Some(rm_strong) = rm.upgrade() {
            rm_strong.check_isr();
            drop(rm_strong);
            schedule_isr_check(rm);
        }
    });
}

#[cfg(test)]
mod tests;
