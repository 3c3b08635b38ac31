//! The topic registry: which topics exist, their ids, partitions and configs.
//!
//! In Kafka the controller owns this (topic creation, deletion, replica assignment) and
//! tells each broker through LeaderAndIsr / metadata updates. Here one broker leads every
//! partition, so the registry is a map from name to [`Topic`], plus a change counter that
//! the embedded followers watch the way a follower learns of new partitions.
//!
//! A registered [`Topic`] is immutable, shared as an `Arc`. Adding partitions
//! (CreatePartitions) registers a new one in its place under the same id, holding the same
//! partition handles followed by the new ones, so whoever holds a handle (a parked
//! produce, a fetcher) keeps using it.
//!
//! Creating a topic checks, as Kafka's `CreateTopicsRequest` handling does: the name
//! (1-249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`), the partition count, the
//! replication factor (at most the leader plus its simulated followers), the configs
//! ([`config`]), and the broker-wide `max.partitions` cap that keeps memory bounded.

pub mod config;

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use parking_lot::RwLock;
use replog::Partition;
use uuid::Uuid;

use crate::config::BrokerConfig;
use crate::partition::{PartitionHandle, TopicPartition};

pub use config::{ConfigEntry, ConfigSource, ConfigSynonym, ConfigType, TopicConfig};

/// Kafka's internal topics, flagged `is_internal` in Metadata.
pub const INTERNAL_TOPICS: &[&str] = &[OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC];

/// Where the group coordinator keeps group metadata and committed offsets.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// `__consumer_offsets` as Kafka creates it: `offsets.topic.num.partitions` partitions,
/// `offsets.topic.replication.factor` replicas (capped by the replicas this broker has, as
/// Kafka caps it by the live brokers), compacted. Whoever needs it first creates it: the
/// group coordinator, or Metadata auto-creation (Kafka's `AutoTopicCreationManager` gives an
/// internal topic its own configs too, never the defaults of a plain topic).
pub fn offsets_topic(broker: &BrokerConfig) -> NewTopic {
    let replicas = (broker.follower_count + 1).clamp(1, i32::from(i16::MAX)) as i16;
    NewTopic {
        name: OFFSETS_TOPIC.to_string(),
        partitions: broker.offsets_topic_num_partitions,
        replication_factor: broker.offsets_topic_replication_factor.min(replicas),
        configs: vec![(config::CLEANUP_POLICY.to_string(), "compact".to_string())],
    }
}

/// The transaction coordinator's log.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// `__transaction_state` as this broker creates it: `transaction.state.log.num.partitions`
/// partitions, compacted, with `transaction.state.log.replication.factor` replicas (at
/// most the replicas there are).
pub fn transaction_state_topic(broker: &BrokerConfig) -> NewTopic {
    let replicas = (broker.follower_count + 1).clamp(1, i32::from(i16::MAX)) as i16;
    NewTopic {
        name: TRANSACTION_STATE_TOPIC.to_string(),
        partitions: broker.transaction_state_log_num_partitions,
        replication_factor: broker
            .transaction_state_log_replication_factor
            .min(replicas),
        configs: vec![(config::CLEANUP_POLICY.to_string(), "compact".to_string())],
    }
}

/// The largest partition count one topic may have.
pub const MAX_PARTITIONS_PER_TOPIC: i32 = 10_000;

/// Why a topic could not be created or deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicError {
    /// The Kafka error.
    pub error: ResponseError,
    /// Human-readable reason.
    pub message: String,
}

impl TopicError {
    /// An error with a reason.
    pub fn new(error: ResponseError, message: impl Into<String>) -> Self {
        TopicError {
            error,
            message: message.into(),
        }
    }
}

/// What a client asks for when creating a topic (CreateTopics, or auto-creation).
#[derive(Debug, Clone)]
pub struct NewTopic {
    /// Name.
    pub name: String,
    /// Partition count; -1 for the broker's `num.partitions`.
    pub partitions: i32,
    /// Replication factor; -1 for the broker's `default.replication.factor`.
    pub replication_factor: i16,
    /// Config overrides, by Kafka name.
    pub configs: Vec<(String, String)>,
}

/// A topic: its id, partitions and configs.
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
    /// Kafka's internal topics (`__consumer_offsets`) are flagged in Metadata.
    pub internal: bool,
}

/// What Metadata says about one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionDescription {
    /// Partition index.
    pub index: i32,
    /// Leader broker id.
    pub leader: i32,
    /// Leader epoch.
    pub leader_epoch: i32,
    /// Every replica, leader first.
    pub replicas: Vec<i32>,
    /// The in-sync replicas, leader first.
    pub isr: Vec<i32>,
}

impl Topic {
    /// Validates `new` against the broker's rules and builds the topic (not yet
    /// registered). `now_ms` starts the followers' caught-up clocks.
    pub fn build(new: NewTopic, broker: &BrokerConfig, now_ms: u64) -> Result<Topic, TopicError> {
        validate_topic_name(&new.name)?;
        let partitions = if new.partitions == -1 {
            broker.num_partitions
        } else {
            new.partitions
        };
        if !(1..=MAX_PARTITIONS_PER_TOPIC).contains(&partitions) {
            return Err(TopicError::new(
                ResponseError::InvalidPartitions,
                format!("partitions must be between 1 and {MAX_PARTITIONS_PER_TOPIC}"),
            ));
        }
        let rf = if new.replication_factor == -1 {
            broker.default_replication_factor
        } else {
            new.replication_factor
        };
        let max_rf = broker.follower_count + 1;
        if rf < 1 || i32::from(rf) > max_rf {
            return Err(TopicError::new(
                ResponseError::InvalidReplicationFactor,
                format!("replication factor must be between 1 and {max_rf} (the leader and its simulated followers)"),
            ));
        }
        let config = TopicConfig::resolve(broker, &new.configs)?;
        let name: Arc<str> = Arc::from(new.name.as_str());
        let mut topic = Topic {
            internal: INTERNAL_TOPICS.contains(&&*name),
            name,
            id: Uuid::new_v4(),
            partitions: Vec::new(),
            replication_factor: rf,
            config,
        };
        topic.partitions = topic.new_partitions(0..partitions, None, broker, now_ms);
        Ok(topic)
    }

    /// New, empty partitions `indexes` of this topic, led by this broker, partition
    /// `indexes.start + i` with the replicas `replicas[i]` if given, else the topic's
    /// usual ones (the leader and the first followers). Not yet registered: see
    /// [`TopicRegistry::add_partitions`].
    pub fn new_partitions(
        &self,
        indexes: std::ops::Range<i32>,
        replicas: Option<&[Vec<i32>]>,
        broker: &BrokerConfig,
        now_ms: u64,
    ) -> Vec<Arc<PartitionHandle>> {
        let usual: Vec<i32> = broker
            .all_replica_ids()
            .into_iter()
            .take(usize::try_from(self.replication_factor).unwrap_or(0))
            .collect();
        let log_config = self.config.log_config(broker);
        indexes
            .enumerate()
            .map(|(i, index)| {
                let replicas = replicas
                    .and_then(|r| r.get(i))
                    .cloned()
                    .unwrap_or_else(|| usual.clone());
                let log = Partition::new(
                    &self.name,
                    index,
                    broker.broker_id,
                    replicas,
                    log_config.clone(),
                    now_ms,
                );
                let tp = TopicPartition {
                    topic: self.name.clone(),
                    partition: index,
                };
                Arc::new(PartitionHandle::new(tp, log))
            })
            .collect()
    }

    /// The same topic (name, id, the very partition handles) with other configs: what
    /// an altered topic config replaces it with in the registry.
    pub fn with_config(&self, config: TopicConfig) -> Topic {
        Topic {
            name: self.name.clone(),
            id: self.id,
            partitions: self.partitions.clone(),
            replication_factor: self.replication_factor,
            config,
            internal: self.internal,
        }
    }

    /// A partition by index.
    pub fn partition(&self, index: i32) -> Option<&Arc<PartitionHandle>> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.partitions.get(i))
    }

    /// Leader, replicas and ISR of every partition, as Metadata reports them.
    pub fn describe_partitions(&self) -> Vec<PartitionDescription> {
        self.partitions
            .iter()
            .map(|p| {
                let log = p.lock();
                PartitionDescription {
                    index: p.tp.partition,
                    leader: log.leader_id(),
                    leader_epoch: log.leader_epoch(),
                    replicas: log.replicas().to_vec(),
                    isr: log.isr(),
                }
            })
            .collect()
    }
}

/// Every topic, by name.
pub struct TopicRegistry {
    topics: RwLock<BTreeMap<Arc<str>, Arc<Topic>>>,
    max_partitions: usize,
    changed: tokio::sync::watch::Sender<u64>,
}

impl TopicRegistry {
    /// An empty registry holding at most `max_partitions` partitions in all.
    pub fn new(max_partitions: usize) -> Self {
        TopicRegistry {
            topics: RwLock::new(BTreeMap::new()),
            max_partitions,
            changed: tokio::sync::watch::channel(0).0,
        }
    }

    /// A topic by name.
    pub fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics.read().get(name).cloned()
    }

    /// A topic by id.
    pub fn by_id(&self, id: Uuid) -> Option<Arc<Topic>> {
        self.topics.read().values().find(|t| t.id == id).cloned()
    }

    /// Every topic, by name.
    pub fn all(&self) -> Vec<Arc<Topic>> {
        self.topics.read().values().cloned().collect()
    }

    /// A partition, if its topic exists.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<Arc<PartitionHandle>> {
        self.topics.read().get(topic)?.partition(partition).cloned()
    }

    /// Every partition of every topic.
    pub fn partitions(&self) -> Vec<Arc<PartitionHandle>> {
        self.topics
            .read()
            .values()
            .flat_map(|t| t.partitions.iter().cloned())
            .collect()
    }

    /// Registers a built topic, unless its name is taken or it would take the broker past
    /// `max.partitions`.
    pub fn register(&self, topic: Topic) -> Result<Arc<Topic>, TopicError> {
        let mut topics = self.topics.write();
        self.check_room(&topics, &topic)?;
        let topic = Arc::new(topic);
        topics.insert(topic.name.clone(), topic.clone());
        drop(topics);
        self.changed.send_modify(|generation| *generation += 1);
        Ok(topic)
    }

    /// The checks [`register`](Self::register) makes, without registering
    /// (CreateTopics with `validate_only`).
    pub fn check(&self, topic: &Topic) -> Result<(), TopicError> {
        self.check_room(&self.topics.read(), topic)
    }

    fn check_room(
        &self,
        topics: &BTreeMap<Arc<str>, Arc<Topic>>,
        topic: &Topic,
    ) -> Result<(), TopicError> {
        if topics.contains_key(&topic.name) {
            return Err(TopicError::new(
                ResponseError::TopicAlreadyExists,
                format!("topic {:?} already exists", &*topic.name),
            ));
        }
        let existing: usize = topics.values().map(|t| t.partitions.len()).sum();
        let adding = topic.partitions.len();
        if existing + adding > self.max_partitions {
            return Err(TopicError::new(
                ResponseError::PolicyViolation,
                format!(
                    "{adding} more partitions would exceed max.partitions ({}; {existing} exist)",
                    self.max_partitions
                ),
            ));
        }
        Ok(())
    }

    /// Grows topic `name` to `new_total` partitions (CreatePartitions): the topic is
    /// replaced by one with the same id, configs and partition handles, and the new
    /// partitions `build` makes for the indexes it is given after them. Refused, before
    /// anything is built: an unknown topic, a total not above the current count (in
    /// Kafka's words, [`check_partition_increase`]), more than
    /// [`MAX_PARTITIONS_PER_TOPIC`], and more partitions than `max.partitions` lets the
    /// broker hold. With `validate_only` only the checks run, and the topic as it is
    /// comes back.
    pub fn add_partitions(
        &self,
        name: &str,
        new_total: i32,
        validate_only: bool,
        build: impl FnOnce(&Topic, std::ops::Range<i32>) -> Vec<Arc<PartitionHandle>>,
    ) -> Result<Arc<Topic>, TopicError> {
        let mut topics = self.topics.write();
        let old = topics.get(name).cloned().ok_or_else(|| {
            TopicError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("unknown topic {name:?}"),
            )
        })?;
        let current = old.partitions.len() as i32;
        check_partition_increase(name, current, new_total)?;
        if new_total > MAX_PARTITIONS_PER_TOPIC {
            return Err(TopicError::new(
                ResponseError::InvalidPartitions,
                format!("partitions must be between 1 and {MAX_PARTITIONS_PER_TOPIC}"),
            ));
        }
        let existing: usize = topics.values().map(|t| t.partitions.len()).sum();
        let adding = (new_total - current) as usize;
        if existing + adding > self.max_partitions {
            return Err(TopicError::new(
                ResponseError::PolicyViolation,
                format!(
                    "{adding} more partitions would exceed max.partitions ({}; {existing} exist)",
                    self.max_partitions
                ),
            ));
        }
        if validate_only {
            return Ok(old);
        }
        let added = build(&old, current..new_total);
        debug_assert_eq!(added.len(), adding, "one new partition per index");
        let mut partitions = old.partitions.clone();
        partitions.extend(added);
        let grown = Arc::new(Topic {
            name: old.name.clone(),
            id: old.id,
            partitions,
            replication_factor: old.replication_factor,
            config: old.config.clone(),
            internal: old.internal,
        });
        topics.insert(grown.name.clone(), grown.clone());
        drop(topics);
        self.changed.send_modify(|generation| *generation += 1);
        Ok(grown)
    }

    /// Puts `topic` in place of the registered topic of the same name and id (its
    /// configs were altered). Requests already holding the old `Arc<Topic>` finish with
    /// it; the partitions are the same either way. UNKNOWN_TOPIC_OR_PARTITION if that
    /// topic is gone (deleted, or deleted and created again under a new id).
    pub fn replace(&self, topic: Topic) -> Result<Arc<Topic>, TopicError> {
        let mut topics = self.topics.write();
        match topics.get(&topic.name) {
            Some(existing) if existing.id == topic.id => {
                // The registered partitions, not the caller's copy: CreatePartitions may
                // have added some since the caller read the topic.
                let topic = Arc::new(Topic {
                    partitions: existing.partitions.clone(),
                    ..topic
                });
                topics.insert(topic.name.clone(), topic.clone());
                Ok(topic)
            }
            _ => Err(TopicError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("The topic '{}' does not exist.", &*topic.name),
            )),
        }
    }

    /// Removes a topic; its partitions are marked deleted.
    pub fn remove(&self, name: &str) -> Option<Arc<Topic>> {
        let removed = self.topics.write().remove(name)?;
        for p in &removed.partitions {
            p.mark_deleted();
        }
        self.changed.send_modify(|generation| *generation += 1);
        Some(removed)
    }

    /// Signals every topic creation, growth and deletion — the moment a Kafka controller
    /// would send LeaderAndIsr to the followers.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

/// Kafka's rule for a topic's new partition count (its controller's
/// `createPartitions`), with its messages: INVALID_PARTITIONS for the same count ("Topic
/// already has 3 partition(s).") and for fewer.
pub fn check_partition_increase(
    name: &str,
    current: i32,
    requested: i32,
) -> Result<(), TopicError> {
    if requested == current {
        return Err(TopicError::new(
            ResponseError::InvalidPartitions,
            format!("Topic already has {current} partition(s)."),
        ));
    }
    if requested < current {
        return Err(TopicError::new(
            ResponseError::InvalidPartitions,
            format!(
                "The topic {name} currently has {current} partition(s); {requested} would not be an increase."
            ),
        ));
    }
    Ok(())
}

/// Kafka's topic name rules: 1-249 characters from `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), TopicError> {
    let bad = |why: &str| {
        Err(TopicError::new(
            ResponseError::InvalidTopicException,
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
