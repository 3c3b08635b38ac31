//! # A partition's replicas, leader, leader epoch and ISR
//!
//! This is what KRaft's metadata keeps per partition (its `PartitionRecord`, updated
//! by `PartitionChangeRecord`s), and what every broker needs to know its role:
//!
//! * `replicas`: the brokers that store the partition, in assignment order. The first
//!   one is the **preferred leader**; elections scan this order.
//! * `isr`: the in-sync replicas, the ones a leader may be chosen from without losing
//!   acknowledged records. Kept here in replica order, so two images with the same
//!   members compare equal.
//! * `leader`: the broker that takes writes, [`NO_LEADER`] (-1) when none can be
//!   elected (the partition is *offline*).
//! * `leader_epoch`: goes up by one every time `leader` changes, to another broker or
//!   to -1 and back. Fetches and produces carry it so stale leaders and followers are
//!   recognised. An ISR-only change does not bump it (KRaft stopped doing so in
//!   Kafka 3.6, so followers' fetches are not needlessly fenced).
//! * `partition_epoch`: goes up by one on *every* change to this state. An
//!   AlterPartition must name the current one: a leader cannot overwrite a change it
//!   has not seen.
//!
//! `PartitionState::transition` (crate-private) is the one place these fields change
//! after creation, so the two epoch rules live in one spot.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::change::{Change, ElectionReason};

/// The `leader` of a partition that has none.
pub const NO_LEADER: i32 = -1;

/// A topic name and partition index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index, from 0.
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`-`partition`.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// The controller's state of one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    /// Replica broker ids in assignment order; the first is the preferred leader.
    pub replicas: Vec<i32>,
    /// In-sync replicas, in replica order. Never empty.
    pub isr: Vec<i32>,
    /// The leader's broker id, or [`NO_LEADER`].
    pub leader: i32,
    /// Bumped on every leader change.
    pub leader_epoch: i32,
    /// Bumped on every change to this state.
    pub partition_epoch: i32,
}

impl PartitionState {
    /// A new partition: `isr` (in replica order) in sync, `leader` leading, both
    /// epochs 0.
    pub(crate) fn new(replicas: Vec<i32>, isr: Vec<i32>, leader: i32) -> Self {
        let isr = in_replica_order(&replicas, &isr);
        debug_assert!(isr.contains(&leader), "the leader {leader} is in the ISR");
        PartitionState {
            replicas,
            isr,
            leader,
            leader_epoch: 0,
            partition_epoch: 0,
        }
    }

    /// Whether the partition has a leader.
    pub fn has_leader(&self) -> bool {
        self.leader != NO_LEADER
    }

    /// The preferred leader: the first replica.
    pub fn preferred_leader(&self) -> i32 {
        self.replicas[0]
    }

    /// Whether `broker` is one of the replicas.
    pub fn is_replica(&self, broker: i32) -> bool {
        self.replicas.contains(&broker)
    }

    /// Whether `broker` is in the ISR.
    pub fn in_isr(&self, broker: i32) -> bool {
        self.isr.contains(&broker)
    }

    /// Moves to `leader` and `isr`, applying the epoch rules, and describes the step;
    /// `None` (and no epoch bump) if nothing changes. `how` says how a new leader was
    /// chosen; it is only read when the leader changes to a broker.
    pub(crate) fn transition(
        &mut self,
        tp: &TopicPartition,
        leader: i32,
        isr: &[i32],
        how: Election,
    ) -> Option<Change> {
        let isr = in_replica_order(&self.replicas, isr);
        debug_assert!(!isr.is_empty(), "{tp}: the ISR is never empty");
        debug_assert!(
            leader == NO_LEADER || isr.contains(&leader),
            "{tp}: leader {leader} is in the ISR {isr:?}"
        );
        if leader == self.leader && isr == self.isr {
            return None;
        }
        let old_leader = self.leader;
        let old_isr = std::mem::replace(&mut self.isr, isr);
        self.partition_epoch += 1;
        if leader == old_leader {
            return Some(Change::IsrChanged {
                tp: tp.clone(),
                leader,
                leader_epoch: self.leader_epoch,
                old: old_isr,
                new: self.isr.clone(),
                partition_epoch: self.partition_epoch,
            });
        }
        self.leader = leader;
        self.leader_epoch += 1;
        if leader == NO_LEADER {
            return Some(Change::NoLeader {
                tp: tp.clone(),
                old_leader,
                leader_epoch: self.leader_epoch,
                isr: self.isr.clone(),
                partition_epoch: self.partition_epoch,
            });
        }
        Some(Change::LeaderElected {
            tp: tp.clone(),
            old_leader,
            new_leader: leader,
            leader_epoch: self.leader_epoch,
            isr: self.isr.clone(),
            partition_epoch: self.partition_epoch,
            clean: how.clean,
            reason: how.reason,
        })
    }
}

/// How a leader was chosen, for [`PartitionState::transition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Election {
    /// Chosen from the ISR (`true`) or, unclean, from outside it.
    pub clean: bool,
    /// What caused the election.
    pub reason: ElectionReason,
}

impl Election {
    /// A clean election for `reason`.
    pub fn clean(reason: ElectionReason) -> Self {
        Election {
            clean: true,
            reason,
        }
    }
}

/// The members of `set` that are replicas, in replica order.
pub(crate) fn in_replica_order(replicas: &[i32], set: &[i32]) -> Vec<i32> {
    debug_assert!(
        set.iter().all(|b| replicas.contains(b)),
        "{set:?} is a subset of the replicas {replicas:?}"
    );
    replicas
        .iter()
        .copied()
        .filter(|r| set.contains(r))
        .collect()
}
