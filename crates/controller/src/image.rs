//! # The metadata image: every broker and every partition, as the controller has them
//!
//! KRaft calls the in-memory result of applying the metadata log an *image*; this is
//! ours. It is read-only from outside: the [`crate::Controller`] owns it and changes it
//! only through its calls, each of which returns the [`crate::Change`]s it made.
//!
//! Besides the accessors, this file holds the image's invariants, checked with
//! `debug_assert!` after every change:
//!
//! * replicas are non-empty, registered brokers, without repeats, and all partitions
//!   of a topic have the same number;
//! * the ISR is a non-empty subset of the replicas, in replica order;
//! * a leader is in the ISR, alive, and so is every other ISR member (dead brokers
//!   leave the ISR at once, and only a leader may add live ones back);
//! * a partition has no leader only if no one could be elected: every ISR member is
//!   dead, and on an unclean topic every replica is.

use std::collections::BTreeMap;

use crate::broker::Broker;
use crate::partition::{PartitionState, TopicPartition, NO_LEADER};

/// One topic: its unclean election setting and its partitions, by index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic {
    /// Topic name.
    pub name: String,
    /// `unclean.leader.election.enable`: whether a replica outside the ISR may be
    /// elected when no ISR member is alive. Kafka's default is `false`.
    pub unclean_leader_election: bool,
    /// The partitions; partition `i` is `partitions[i]`.
    pub partitions: Vec<PartitionState>,
}

impl Topic {
    /// Number of partitions.
    pub fn partition_count(&self) -> i32 {
        self.partitions.len() as i32
    }

    /// Partition `index`, if the topic has it.
    pub fn partition(&self, index: i32) -> Option<&PartitionState> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.partitions.get(i))
    }

    /// The replication factor (every partition has the same).
    pub fn replication_factor(&self) -> usize {
        self.partitions.first().map_or(0, |p| p.replicas.len())
    }
}

/// Every broker and topic the controller knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataImage {
    pub(crate) brokers: BTreeMap<i32, Broker>,
    pub(crate) topics: BTreeMap<String, Topic>,
}

impl MetadataImage {
    /// All registered brokers, by id, dead ones included.
    pub fn brokers(&self) -> impl Iterator<Item = &Broker> {
        self.brokers.values()
    }

    /// Broker `id`, if it ever registered.
    pub fn broker(&self, id: i32) -> Option<&Broker> {
        self.brokers.get(&id)
    }

    /// Whether broker `id` is registered and alive.
    pub fn is_alive(&self, id: i32) -> bool {
        self.brokers.get(&id).is_some_and(|b| b.alive)
    }

    /// The ids of the live brokers, ascending.
    pub fn live_brokers(&self) -> Vec<i32> {
        self.brokers
            .values()
            .filter(|b| b.alive)
            .map(|b| b.id)
            .collect()
    }

    /// All topics, by name.
    pub fn topics(&self) -> impl Iterator<Item = &Topic> {
        self.topics.values()
    }

    /// Topic `name`, if it exists.
    pub fn topic(&self, name: &str) -> Option<&Topic> {
        self.topics.get(name)
    }

    /// The state of partition `tp`, if it exists.
    pub fn partition(&self, tp: &TopicPartition) -> Option<&PartitionState> {
        self.topics.get(&tp.topic)?.partition(tp.partition)
    }

    /// Every partition of every topic, by topic name then index.
    pub fn partitions(&self) -> impl Iterator<Item = (TopicPartition, &PartitionState)> {
        self.topics.values().flat_map(|t| {
            t.partitions
                .iter()
                .enumerate()
                .map(|(i, p)| (TopicPartition::new(t.name.clone(), i as i32), p))
        })
    }

    /// The partitions `broker` leads.
    pub fn partitions_led_by(&self, broker: i32) -> Vec<TopicPartition> {
        self.partitions()
            .filter(|(_, p)| p.leader == broker)
            .map(|(tp, _)| tp)
            .collect()
    }

    /// The partitions without a leader (offline).
    pub fn leaderless_partitions(&self) -> Vec<TopicPartition> {
        self.partitions()
            .filter(|(_, p)| p.leader == NO_LEADER)
            .map(|(tp, _)| tp)
            .collect()
    }

    /// The first broken invariant (see the module doc), `None` if all hold.
    pub(crate) fn invariant_violation(&self) -> Option<String> {
        for topic in self.topics.values() {
            let rf = topic.replication_factor();
            for (i, p) in topic.partitions.iter().enumerate() {
                let tp = TopicPartition::new(topic.name.clone(), i as i32);
                if let Some(broken) = self.partition_violation(topic, rf, p) {
                    return Some(format!("{tp} {p:?}: {broken}"));
                }
            }
        }
        None
    }

    fn partition_violation(&self, topic: &Topic, rf: usize, p: &PartitionState) -> Option<&str> {
        let repeats = |v: &[i32]| v.iter().enumerate().any(|(i, b)| v[..i].contains(b));
        if p.replicas.is_empty() || p.replicas.len() != rf {
            return Some("replica count differs from the topic's");
        }
        if repeats(&p.replicas) || p.replicas.iter().any(|r| !self.brokers.contains_key(r)) {
            return Some("replicas repeat or are not registered");
        }
        if p.isr.is_empty() || crate::partition::in_replica_order(&p.replicas, &p.isr) != p.isr {
            return Some("the ISR is empty, or not replicas in replica order");
        }
        if p.leader != NO_LEADER {
            if !p.in_isr(p.leader) {
                return Some("the leader is not in the ISR");
            }
            if p.isr.iter().any(|&b| !self.is_alive(b)) {
                return Some("a partition with a leader has a dead ISR member");
            }
        } else {
            if p.isr.iter().any(|&b| self.is_alive(b)) {
                return Some("no leader although an ISR member is alive");
            }
            if topic.unclean_leader_election && p.replicas.iter().any(|&b| self.is_alive(b)) {
                return Some("no leader on an unclean topic although a replica is alive");
            }
        }
        None
    }
}
