//! # Topics: create, add partitions, delete, switch unclean election
//!
//! A new partition starts with every live replica in sync, the first live replica
//! leading, and both epochs at 0. With the automatic assignment
//! ([`crate::assignment`], over the brokers alive at that moment) every replica is
//! live, so the ISR is all replicas and the leader the first. An explicit assignment
//! may name dead (registered) brokers: they are left out of the ISR, as KRaft does
//! with fenced brokers, and a partition none of whose replicas is alive is refused.
//!
//! Topic names follow Kafka's rule: 1 to 249 characters among ASCII letters, digits,
//! `.`, `_` and `-`, and not `.` or `..`.

use super::Controller;
use crate::assignment::{assign_partitions, assign_replicas, check_manual_replicas};
use crate::change::{Change, ElectionReason};
use crate::error::Error;
use crate::image::Topic;
use crate::partition::{PartitionState, TopicPartition};

/// Kafka's longest topic name.
const MAX_TOPIC_NAME_LEN: usize = 249;

impl Controller {
    /// Creates topic `name` with `partitions` partitions of `replication_factor`
    /// replicas each, assigned over the live brokers, and the given
    /// `unclean.leader.election.enable`. Refuses an invalid name
    /// (`INVALID_TOPIC_EXCEPTION`), a taken one (`TOPIC_ALREADY_EXISTS`), fewer than one
    /// partition (`INVALID_PARTITIONS`), and a replication factor below 1 or above the
    /// number of live brokers (`INVALID_REPLICATION_FACTOR`).
    pub fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        unclean_leader_election: bool,
    ) -> Result<Vec<Change>, Error> {
        self.check_new_topic(name)?;
        let live = self.image.live_brokers();
        let layout = assign_replicas(&live, partitions, replication_factor, self.assignment)?;
        self.insert_topic(name, &layout, unclean_leader_election)
    }

    /// Creates topic `name` with an explicit assignment: partition `i` gets the
    /// replicas `assignment[i]`, in that order. Refuses, besides bad names, an empty
    /// assignment (`INVALID_PARTITIONS`) and one with an empty or repeating replica
    /// list, lists of different lengths, an unregistered broker, or a partition
    /// with no live replica (`INVALID_REPLICA_ASSIGNMENT`).
    pub fn create_topic_with_assignment(
        &mut self,
        name: &str,
        assignment: &[Vec<i32>],
        unclean_leader_election: bool,
    ) -> Result<Vec<Change>, Error> {
        self.check_new_topic(name)?;
        if assignment.is_empty() {
            return Err(Error::InvalidPartitions {
                requested: 0,
                current: 0,
            });
        }
        let invalid = |reason: String| Err(Error::InvalidReplicaAssignment { reason });
        let rf = assignment[0].len();
        for (p, replicas) in assignment.iter().enumerate() {
            check_manual_replicas(replicas, rf, |b| self.image.broker(b).is_some())
                .map_err(|reason| Error::InvalidReplicaAssignment { reason })?;
            if !replicas.iter().any(|&b| self.image.is_alive(b)) {
                return invalid(format!("no replica of partition {p} is alive"));
            }
        }
        self.insert_topic(name, assignment, unclean_leader_election)
    }

    /// Adds partitions to topic `name` up to `new_total`, assigned over the live
    /// brokers as if the topic had been created with `new_total` partitions, with the
    /// topic's replication factor. Refuses an unknown topic
    /// (`UNKNOWN_TOPIC_OR_PARTITION`), a total not above the current count (Kafka
    /// refuses an equal one too: `INVALID_PARTITIONS`), and too few live brokers
    /// (`INVALID_REPLICATION_FACTOR`).
    pub fn create_partitions(&mut self, name: &str, new_total: i32) -> Result<Vec<Change>, Error> {
        let topic = self.image.topic(name).ok_or_else(|| unknown(name))?;
        let current = topic.partition_count();
        if new_total <= current {
            return Err(Error::InvalidPartitions {
                requested: new_total,
                current,
            });
        }
        let rf = i16::try_from(topic.replication_factor()).unwrap_or(i16::MAX);
        let live = self.image.live_brokers();
        let layout = assign_partitions(&live, current..new_total, rf, self.assignment)?;
        let states = self.new_partitions(&layout);
        Ok(self.append_partitions(name, current, states))
    }

    /// Appends `states` to topic `name` (which has `current` partitions and exists).
    fn append_partitions(
        &mut self,
        name: &str,
        current: i32,
        states: Vec<PartitionState>,
    ) -> Vec<Change> {
        let changes = states
            .iter()
            .enumerate()
            .map(|(i, state)| Change::PartitionCreated {
                tp: TopicPartition::new(name, current + i as i32),
                state: state.clone(),
            })
            .collect();
        if let Some(topic) = self.image.topics.get_mut(name) {
            topic.partitions.extend(states);
        }
        self.debug_check();
        changes
    }

    /// Adds one partition to topic `name` per list of `assignment`, partition
    /// `current + i` getting the replicas `assignment[i]` in that order (CreatePartitions
    /// with manual assignments). Refuses an unknown topic (`UNKNOWN_TOPIC_OR_PARTITION`),
    /// an empty assignment (`INVALID_PARTITIONS`), and, as Kafka's controller words them
    /// (`INVALID_REPLICA_ASSIGNMENT`): an empty replica list, an unregistered broker, a
    /// broker named twice, a list whose length is not the topic's replication factor,
    /// and a partition none of whose replicas is alive. Nothing changes on a refusal.
    pub fn create_partitions_with_assignment(
        &mut self,
        name: &str,
        assignment: &[Vec<i32>],
    ) -> Result<Vec<Change>, Error> {
        let topic = self.image.topic(name).ok_or_else(|| unknown(name))?;
        let current = topic.partition_count();
        if assignment.is_empty() {
            return Err(Error::InvalidPartitions {
                requested: current,
                current,
            });
        }
        let rf = topic.replication_factor();
        let invalid = |reason: String| Err(Error::InvalidReplicaAssignment { reason });
        for (i, replicas) in assignment.iter().enumerate() {
            check_manual_replicas(replicas, rf, |b| self.image.broker(b).is_some())
                .map_err(|reason| Error::InvalidReplicaAssignment { reason })?;
            if !replicas.iter().any(|&b| self.image.is_alive(b)) {
                return invalid(format!(
                    "All brokers specified in the manual partition assignment for partition {} are fenced or in controlled shutdown.",
                    i64::from(current) + i as i64
                ));
            }
        }
        let states = self.new_partitions(assignment);
        Ok(self.append_partitions(name, current, states))
    }

    /// Deletes topic `name` and its partitions. Refuses an unknown topic
    /// (`UNKNOWN_TOPIC_OR_PARTITION`).
    pub fn delete_topic(&mut self, name: &str) -> Result<Vec<Change>, Error> {
        let topic = self
            .image
            .topics
            .remove(name)
            .ok_or_else(|| unknown(name))?;
        Ok(vec![Change::TopicDeleted {
            topic: topic.name,
            partitions: topic.partitions.len() as i32,
        }])
    }

    /// Sets topic `name`'s `unclean.leader.election.enable`. Turning it on elects a
    /// live out-of-sync replica in every partition of the topic that has no leader
    /// (Kafka's controller does the same when the setting changes). Refuses an
    /// unknown topic (`UNKNOWN_TOPIC_OR_PARTITION`).
    pub fn set_unclean_leader_election(
        &mut self,
        name: &str,
        enabled: bool,
    ) -> Result<Vec<Change>, Error> {
        let topic = self
            .image
            .topics
            .get_mut(name)
            .ok_or_else(|| unknown(name))?;
        if topic.unclean_leader_election == enabled {
            return Ok(Vec::new());
        }
        topic.unclean_leader_election = enabled;
        let mut changes = vec![Change::TopicConfigChanged {
            topic: name.to_string(),
            unclean_leader_election: enabled,
        }];
        changes.extend(self.elect_leaderless(Some(name), ElectionReason::UncleanEnabled));
        self.debug_check();
        Ok(changes)
    }

    fn check_new_topic(&self, name: &str) -> Result<(), Error> {
        let invalid = |reason| {
            Err(Error::InvalidTopic {
                name: name.to_string(),
                reason,
            })
        };
        if name.is_empty() {
            return invalid("the name is empty");
        }
        if name == "." || name == ".." {
            return invalid("the name cannot be '.' or '..'");
        }
        if name.len() > MAX_TOPIC_NAME_LEN {
            return invalid("the name is longer than 249 characters");
        }
        if !name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
        {
            return invalid("only ASCII letters, digits, '.', '_' and '-' are allowed");
        }
        if self.image.topics.contains_key(name) {
            return Err(Error::TopicAlreadyExists {
                topic: name.to_string(),
            });
        }
        Ok(())
    }

    /// New partitions with `layout`: live replicas in sync, the first live one leading.
    fn new_partitions(&self, layout: &[Vec<i32>]) -> Vec<PartitionState> {
        layout
            .iter()
            .map(|replicas| {
                let isr: Vec<i32> = replicas
                    .iter()
                    .copied()
                    .filter(|&b| self.image.is_alive(b))
                    .collect();
                let leader = isr[0];
                PartitionState::new(replicas.clone(), isr, leader)
            })
            .collect()
    }

    fn insert_topic(
        &mut self,
        name: &str,
        layout: &[Vec<i32>],
        unclean_leader_election: bool,
    ) -> Result<Vec<Change>, Error> {
        let partitions = self.new_partitions(layout);
        let mut changes = vec![Change::TopicCreated {
            topic: name.to_string(),
            unclean_leader_election,
        }];
        changes.extend(
            partitions
                .iter()
                .enumerate()
                .map(|(i, state)| Change::PartitionCreated {
                    tp: TopicPartition::new(name, i as i32),
                    state: state.clone(),
                }),
        );
        self.image.topics.insert(
            name.to_string(),
            Topic {
                name: name.to_string(),
                unclean_leader_election,
                partitions,
            },
        );
        self.debug_check();
        Ok(changes)
    }
}

fn unknown(name: &str) -> Error {
    Error::UnknownTopicOrPartition {
        topic: name.to_string(),
        partition: None,
    }
}
