//! The replica manager: every partition this broker leads, and the purgatories that park
//! requests waiting on them.
//!
//! Kafka's `ReplicaManager` is where the pieces meet. A produce appends to a partition's
//! log and, for `acks=all`, parks a [`DelayedProduce`] until the high watermark (HW) passes
//! it. A follower fetch moves that follower's log end offset (LEO), which may move the HW,
//! which may complete parked produces and parked consumer fetches. This module owns that
//! chain of cause and effect:
//!
//! ```text
//!   append ──► LEO moves ──► fetch purgatory: check_and_complete(tp)   (followers waiting for data)
//!                    └──► HW moves? (only if the ISR is just the leader)
//!   follower fetch ──► follower LEO ──► HW moves? ──► produce purgatory: check_and_complete(tp)
//!                                                └──► fetch purgatory:   check_and_complete(tp)
//!   ISR check (every replica.lag.time.max.ms / 2) ──► ISR shrinks ──► HW moves? ──► same as above
//! ```
//!
//! Locking: each partition has its own mutex. No partition lock is ever held while calling
//! into a purgatory, because a purgatory calls `try_complete`, which takes partition locks.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::{Mutex, MutexGuard, RwLock};
use replog::{LogConfig, Partition};
use timewheel::{Purgatory, PurgatoryConfig, Timer, TimerConfig};
use tracing::{info, warn};
use uuid::Uuid;

use crate::config::{BrokerConfig, ClockMode};
use crate::delayed::{DelayedFetch, DelayedProduce};
use crate::error_codes as ec;

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
    /// Locks the partition's log. Never hold this across a purgatory call.
    pub fn lock(&self) -> MutexGuard<'_, Partition> {
        self.log.lock()
    }

    /// True once the topic has been deleted; parked operations then complete with an error.
    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }
}

/// Topic-level settings (Kafka's per-topic configs that we honour).
#[derive(Debug, Clone)]
pub struct TopicConfig {
    /// `min.insync.replicas`.
    pub min_insync_replicas: i32,
    /// `retention.bytes`.
    pub retention_bytes: i64,
    /// The configs set for this topic when it was created (Kafka's topic overrides);
    /// the others are the broker's. DescribeConfigs and CreateTopics report the source.
    pub overrides: Vec<&'static str>,
}

impl TopicConfig {
    /// True if `name` was set for this topic rather than taken from the broker.
    pub fn is_override(&self, name: &str) -> bool {
        self.overrides.contains(&name)
    }
}

/// A topic: its id and partitions.
pub struct Topic {
    /// Topic name.
    pub name: Arc<str>,
    /// Topic id (Metadata v10+, CreateTopics v7).
    pub id: Uuid,
    /// Partitions, by index.
    pub partitions: Vec<Arc<PartitionHandle>>,
    /// Replicas per partition (leader included).
    pub replication_factor: i16,
    /// Topic configs.
    pub config: TopicConfig,
}

/// Why a topic could not be created.
#[derive(Debug, Clone)]
pub struct TopicError {
    /// Kafka error code.
    pub code: i16,
    /// Human-readable reason.
    pub message: String,
}

impl TopicError {
    fn new(code: i16, message: impl Into<String>) -> Self {
        TopicError {
            code,
            message: message.into(),
        }
    }
}

/// Settings for a topic about to be created.
#[derive(Debug, Clone)]
pub struct NewTopic {
    /// Name.
    pub name: String,
    /// Partition count.
    pub partitions: i32,
    /// Replication factor.
    pub replication_factor: i16,
    /// Config overrides (`min.insync.replicas`, `retention.bytes`).
    pub configs: Vec<(String, String)>,
}

/// Topic configs a client may set on CreateTopics.
pub const SETTABLE_TOPIC_CONFIGS: &[&str] = &["min.insync.replicas", "retention.bytes"];

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
    topics: RwLock<BTreeMap<Arc<str>, Arc<Topic>>>,
    producer_epochs: Mutex<HashMap<i64, i16>>,
    next_producer_id: AtomicI64,
    log_bytes: AtomicUsize,
    cluster_id: String,
    bound_port: OnceLock<i32>,
    topics_changed: tokio::sync::watch::Sender<u64>,
}

impl ReplicaManager {
    /// Builds the state and starts the periodic ISR check on the timer.
    pub fn new(config: BrokerConfig) -> Arc<Self> {
        let timer_config = TimerConfig {
            tick_ms: config.timer_tick_ms,
            wheel_size: config.timer_wheel_size,
        };
        let timer = match config.clock {
            ClockMode::System => Timer::system(timer_config),
            ClockMode::Manual => Timer::manual(timer_config),
        };
        let purgatory_config = || PurgatoryConfig {
            purge_interval: config.purge_interval_requests,
        };
        let rm = Arc::new(ReplicaManager {
            produce_purgatory: Purgatory::new("Produce", timer.clone(), purgatory_config()),
            fetch_purgatory: Purgatory::new("Fetch", timer.clone(), purgatory_config()),
            timer,
            topics: RwLock::new(BTreeMap::new()),
            producer_epochs: Mutex::new(HashMap::new()),
            next_producer_id: AtomicI64::new(1000),
            log_bytes: AtomicUsize::new(0),
            cluster_id: "purgatory-cluster".to_string(),
            bound_port: OnceLock::new(),
            topics_changed: tokio::sync::watch::channel(0).0,
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

    /// The cluster id reported in Metadata.
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// Every topic, by name.
    pub fn topics(&self) -> Vec<Arc<Topic>> {
        self.topics.read().values().cloned().collect()
    }

    /// A topic by name.
    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics.read().get(name).cloned()
    }

    /// A topic by id.
    pub fn topic_by_id(&self, id: Uuid) -> Option<Arc<Topic>> {
        self.topics.read().values().find(|t| t.id == id).cloned()
    }

    /// A partition, if its topic exists.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<Arc<PartitionHandle>> {
        let topic = self.topic(topic)?;
        usize::try_from(partition)
            .ok()
            .and_then(|i| topic.partitions.get(i).cloned())
    }

    /// Looks a topic up, creating it with the defaults if auto-creation is on.
    pub fn get_or_auto_create(&self, name: &str, allow: bool) -> Result<Arc<Topic>, TopicError> {
        if let Some(t) = self.topic(name) {
            return Ok(t);
        }
        if !(allow && self.config.auto_create_topics) {
            return Err(TopicError::new(
                ec::UNKNOWN_TOPIC_OR_PARTITION,
                "unknown topic",
            ));
        }
        let created = self.create_topic(
            NewTopic {
                name: name.to_string(),
                partitions: self.config.num_partitions,
                replication_factor: self.config.default_replication_factor,
                configs: vec![],
            },
            false,
        );
        match created {
            Ok(t) => Ok(t),
            // Lost a race with another creator: fine, use theirs.
            Err(e) if e.code == ec::TOPIC_ALREADY_EXISTS => self
                .topic(name)
                .ok_or_else(|| TopicError::new(ec::UNKNOWN_TOPIC_OR_PARTITION, "unknown topic")),
            Err(e) => Err(e),
        }
    }

    /// Validates and (unless `validate_only`) creates a topic.
    pub fn create_topic(
        &self,
        new: NewTopic,
        validate_only: bool,
    ) -> Result<Arc<Topic>, TopicError> {
        validate_topic_name(&new.name)?;
        let partitions = if new.partitions == -1 {
            self.config.num_partitions
        } else {
            new.partitions
        };
        if !(1..=10_000).contains(&partitions) {
            return Err(TopicError::new(
                ec::INVALID_PARTITIONS,
                "partitions must be between 1 and 10000",
            ));
        }
        let rf = if new.replication_factor == -1 {
            self.config.default_replication_factor
        } else {
            new.replication_factor
        };
        let max_rf = self.config.follower_count + 1;
        if rf < 1 || i32::from(rf) > max_rf {
            return Err(TopicError::new(
                ec::INVALID_REPLICATION_FACTOR,
                format!("replication factor must be between 1 and {max_rf} (the leader and its simulated followers)"),
            ));
        }
        let mut config = TopicConfig {
            min_insync_replicas: self.config.min_insync_replicas,
            retention_bytes: self.config.retention_bytes,
            overrides: Vec::new(),
        };
        for (key, value) in &new.configs {
            match key.as_str() {
                "min.insync.replicas" => match value.parse::<i32>() {
                    Ok(v) if v >= 1 => {
                        config.min_insync_replicas = v;
                        config.overrides.push("min.insync.replicas");
                    }
                    _ => {
                        return Err(TopicError::new(
                            ec::INVALID_CONFIG,
                            format!("invalid value {value:?} for {key}"),
                        ))
                    }
                },
                "retention.bytes" => match value.parse::<i64>() {
                    Ok(v) if v >= -1 => {
                        config.retention_bytes = v;
                        config.overrides.push("retention.bytes");
                    }
                    _ => {
                        return Err(TopicError::new(
                            ec::INVALID_CONFIG,
                            format!("invalid value {value:?} for {key}"),
                        ))
                    }
                },
                other => {
                    return Err(TopicError::new(
                        ec::INVALID_CONFIG,
                        format!(
                            "unsupported topic config {other:?}; supported: {}",
                            SETTABLE_TOPIC_CONFIGS.join(", ")
                        ),
                    ))
                }
            }
        }
        let mut topics = self.topics.write();
        let existing: usize = topics.values().map(|t| t.partitions.len()).sum();
        if existing + partitions as usize > self.config.max_partitions {
            return Err(TopicError::new(
                ec::POLICY_VIOLATION,
                format!(
                    "{partitions} more partitions would exceed max.partitions ({}; {existing} exist)",
                    self.config.max_partitions
                ),
            ));
        }
        if topics.contains_key(new.name.as_str()) {
            return Err(TopicError::new(
                ec::TOPIC_ALREADY_EXISTS,
                format!("topic {:?} already exists", new.name),
            ));
        }
        let name: Arc<str> = Arc::from(new.name.as_str());
        let replicas: Vec<i32> = self
            .config
            .all_replica_ids()
            .into_iter()
            .take(rf as usize)
            .collect();
        let now = self.now_ms();
        let log_config = LogConfig {
            replica_lag_time_max_ms: self.config.replica_lag_time_max_ms,
            min_insync_replicas: config.min_insync_replicas as usize,
            retention_bytes: config.retention_bytes,
            max_batch_bytes: self.config.message_max_bytes,
        };
        let topic = Arc::new(Topic {
            id: Uuid::new_v4(),
            partitions: (0..partitions)
                .map(|p| {
                    Arc::new(PartitionHandle {
                        tp: TopicPartition {
                            topic: name.clone(),
                            partition: p,
                        },
                        log: Mutex::new(Partition::new(
                            &name,
                            p,
                            self.config.broker_id,
                            replicas.clone(),
                            log_config.clone(),
                            now,
                        )),
                        deleted: AtomicBool::new(false),
                    })
                })
                .collect(),
            name: name.clone(),
            replication_factor: rf,
            config,
        });
        if validate_only {
            return Ok(topic);
        }
        topics.insert(name, topic.clone());
        drop(topics);
        self.topics_changed
            .send_modify(|generation| *generation += 1);
        info!(topic = %topic.name, partitions, replication_factor = rf, "created topic");
        Ok(topic)
    }

    /// Deletes a topic. Operations parked on its partitions complete with
    /// UNKNOWN_TOPIC_OR_PARTITION.
    pub fn delete_topic(&self, name: &str) -> Result<(), TopicError> {
        let removed = self.topics.write().remove(name);
        let Some(topic) = removed else {
            return Err(TopicError::new(
                ec::UNKNOWN_TOPIC_OR_PARTITION,
                "unknown topic",
            ));
        };
        for p in &topic.partitions {
            p.deleted.store(true, Ordering::Release);
            let freed = p.lock().size_bytes();
            self.release(freed);
            self.produce_purgatory.check_and_complete(&p.tp);
            self.fetch_purgatory.check_and_complete(&p.tp);
        }
        self.topics_changed
            .send_modify(|generation| *generation += 1);
        info!(topic = %name, "deleted topic");
        Ok(())
    }

    /// Signals every topic creation and deletion — the moment a Kafka controller would
    /// send LeaderAndIsr to the followers. Embedded followers re-read Metadata on it, so a
    /// new topic is replicated at once rather than on their next periodic refresh.
    pub fn subscribe_topic_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.topics_changed.subscribe()
    }

    /// Hands out a producer id (InitProducerId without a transactional id).
    pub fn allocate_producer_id(&self) -> (i64, i16) {
        let id = self.next_producer_id.fetch_add(1, Ordering::Relaxed);
        self.producer_epochs.lock().insert(id, 0);
        (id, 0)
    }

    /// KIP-360: an idempotent producer may ask to bump its epoch after an error.
    pub fn bump_producer_epoch(&self, id: i64, epoch: i16) -> Result<(i64, i16), i16> {
        let mut epochs = self.producer_epochs.lock();
        match epochs.get_mut(&id) {
            Some(current) if *current == epoch => {
                if *current == i16::MAX {
                    drop(epochs);
                    return Ok(self.allocate_producer_id());
                }
                *current += 1;
                Ok((id, *current))
            }
            Some(_) => Err(ec::PRODUCER_FENCED),
            None => Err(ec::INVALID_PRODUCER_ID_MAPPING),
        }
    }

    /// Bytes held in all partition logs.
    pub fn log_bytes(&self) -> usize {
        self.log_bytes.load(Ordering::Relaxed)
    }

    /// Keeps the broker-wide byte count (for `log.memory.max.bytes`) in step with a
    /// partition log that grew by `added` and dropped `freed` bytes.
    pub fn account_log_bytes(&self, added: usize, freed: usize) {
        if added > 0 {
            self.log_bytes.fetch_add(added, Ordering::Relaxed);
        }
        self.release(freed);
    }

    /// Makes room for `incoming` bytes under `log.memory.max.bytes` by evicting the oldest
    /// fully-replicated batches. Returns false if the cap cannot be met: everything left is
    /// above some high watermark, and dropping it would lose data not yet replicated.
    pub fn reserve_memory(&self, incoming: usize) -> bool {
        let cap = self.config.log_memory_max_bytes;
        if self.log_bytes() + incoming <= cap {
            return true;
        }
        let partitions: Vec<Arc<PartitionHandle>> = self
            .topics()
            .iter()
            .flat_map(|t| t.partitions.iter().cloned())
            .collect();
        loop {
            let mut progress = false;
            for p in &partitions {
                if self.log_bytes() + incoming <= cap {
                    return true;
                }
                let freed = p.lock().evict_oldest_batch();
                if freed > 0 {
                    progress = true;
                    self.release(freed);
                }
            }
            if !progress {
                return self.log_bytes() + incoming <= cap;
            }
        }
    }

    fn release(&self, freed: usize) {
        if freed > 0 {
            let _ = self
                .log_bytes
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                    Some(b.saturating_sub(freed))
                });
        }
    }

    /// After the HW of `tp` moved: parked produces and consumer fetches may now complete.
    /// (Whoever moved the HW has already applied retention under the partition lock: data
    /// that just became replicated may be past `retention.bytes`.)
    pub fn on_high_watermark_advanced(&self, tp: &TopicPartition) {
        let produces = self.produce_purgatory.check_and_complete(tp);
        let fetches = self.fetch_purgatory.check_and_complete(tp);
        if produces + fetches > 0 {
            tracing::debug!(%tp, produces, fetches, "high watermark advance completed delayed operations");
        }
    }

    /// After new data was appended to `tp`: parked follower fetches may now complete.
    pub fn on_log_appended(&self, tp: &TopicPartition) {
        self.fetch_purgatory.check_and_complete(tp);
    }

    /// Kafka's `maybeShrinkIsr`, for every partition.
    pub fn check_isr(&self) {
        let now = self.now_ms();
        for topic in self.topics() {
            for p in &topic.partitions {
                let (removed, hw_before, hw_after, isr, freed) = {
                    let mut log = p.lock();
                    let before = log.high_watermark();
                    let removed = log.maybe_shrink_isr(now);
                    let after = log.high_watermark();
                    let freed = if after > before {
                        log.enforce_retention()
                    } else {
                        0
                    };
                    (removed, before, after, log.isr(), freed)
                };
                self.release(freed);
                if !removed.is_empty() {
                    warn!(
                        target: "purgatory::isr",
                        tp = %p.tp, ?removed, ?isr,
                        "ISR shrink: followers not caught up within replica.lag.time.max.ms"
                    );
                }
                if hw_after > hw_before {
                    self.on_high_watermark_advanced(&p.tp);
                }
            }
        }
    }

    /// Stops the timer; parked operations are dropped without a response.
    pub fn shutdown(&self) {
        self.produce_purgatory.shutdown();
        self.fetch_purgatory.shutdown();
        self.timer.shutdown();
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

/// Kafka's topic name rules: 1-249 characters from `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), TopicError> {
    let bad = |why: &str| {
        Err(TopicError::new(
            ec::INVALID_TOPIC_EXCEPTION,
            format!("invalid topic name {name:?}: {why}"),
        ))
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > 249 {
        return bad("longer than 249 characters");
    }
    if name == "." || name == ".." {
        return bad("reserved");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-')
    {
        return bad("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}
