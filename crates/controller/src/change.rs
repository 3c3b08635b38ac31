//! # The changes the controller makes, as typed events
//!
//! Every call that changes the image returns what it changed, in the order it changed
//! it, as a list of [`Change`]s. The broker applies them (a [`Change::LeaderElected`]
//! makes the new leader `make_leader` and the other replicas `make_follower` at the
//! new leader epoch; a [`Change::IsrChanged`] tells the leader its committed ISR) and
//! the live view shows them. They play the part of KRaft's metadata records
//! (`RegisterBrokerRecord`, `FenceBrokerRecord`, `TopicRecord`, `PartitionRecord`,
//! `PartitionChangeRecord`...), but each one says what happened rather than only the
//! new values, so nobody has to diff two images.
//!
//! One partition step is one change: a leader election that also shrinks the ISR is a
//! single [`Change::LeaderElected`] carrying the new ISR, with one partition epoch.

use serde::{Deserialize, Serialize};

use crate::partition::{PartitionState, TopicPartition};

/// What caused a leader election.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElectionReason {
    /// The leader died (`broker_failed`, or the end of a controlled shutdown).
    LeaderFailed,
    /// The leader is shutting down and handed leadership over first.
    ControlledShutdown,
    /// A leaderless partition got a leader back: a replica restarted.
    BrokerReturned,
    /// `unclean.leader.election.enable` was turned on for a leaderless partition.
    UncleanEnabled,
    /// A preferred leader election moved leadership back to the first replica.
    Preferred,
}

/// One change to the metadata image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Change {
    /// A broker joined, or came back with a new incarnation.
    BrokerRegistered {
        /// Broker id.
        id: i32,
        /// Its listener address.
        address: String,
        /// Its incarnation, bumped on every restart.
        incarnation: i64,
    },
    /// A broker is dead (fenced, in KRaft's words). Follows the leadership moves of a
    /// controlled shutdown; precedes the elections a crash causes.
    BrokerDied {
        /// Broker id.
        id: i32,
        /// The incarnation that died.
        incarnation: i64,
        /// Whether it went through a controlled shutdown first.
        controlled: bool,
    },
    /// A topic was created; its partitions follow as [`Change::PartitionCreated`].
    TopicCreated {
        /// Topic name.
        topic: String,
        /// Its `unclean.leader.election.enable`.
        unclean_leader_election: bool,
    },
    /// A partition was created, by `create_topic` or `create_partitions`.
    PartitionCreated {
        /// The partition.
        tp: TopicPartition,
        /// Its initial state.
        state: PartitionState,
    },
    /// A topic and all its partitions were deleted.
    TopicDeleted {
        /// Topic name.
        topic: String,
        /// How many partitions it had.
        partitions: i32,
    },
    /// A topic's `unclean.leader.election.enable` changed.
    TopicConfigChanged {
        /// Topic name.
        topic: String,
        /// The new value.
        unclean_leader_election: bool,
    },
    /// A partition has a new leader (possibly after having none).
    LeaderElected {
        /// The partition.
        tp: TopicPartition,
        /// The previous leader, -1 if it had none.
        old_leader: i32,
        /// The new leader.
        new_leader: i32,
        /// The new leader epoch.
        leader_epoch: i32,
        /// The ISR after the election.
        isr: Vec<i32>,
        /// The new partition epoch.
        partition_epoch: i32,
        /// `false` for an unclean election: the leader was not in the ISR, and records
        /// acknowledged by the old ISR may be lost.
        clean: bool,
        /// What caused the election.
        reason: ElectionReason,
    },
    /// A partition lost its leader and none could be elected: it is offline.
    NoLeader {
        /// The partition.
        tp: TopicPartition,
        /// The leader it lost.
        old_leader: i32,
        /// The new leader epoch (bumped: the leader changed, to none).
        leader_epoch: i32,
        /// The ISR, which still holds the last leader.
        isr: Vec<i32>,
        /// The new partition epoch.
        partition_epoch: i32,
    },
    /// A partition's ISR changed with the same leader and leader epoch: a follower
    /// died or shut down, or the leader's AlterPartition was accepted.
    IsrChanged {
        /// The partition.
        tp: TopicPartition,
        /// The leader (unchanged).
        leader: i32,
        /// The leader epoch (unchanged).
        leader_epoch: i32,
        /// The ISR before.
        old: Vec<i32>,
        /// The ISR after.
        new: Vec<i32>,
        /// The new partition epoch.
        partition_epoch: i32,
    },
}

impl Change {
    /// The partition this change is about, if it is about one partition.
    pub fn topic_partition(&self) -> Option<&TopicPartition> {
        match self {
            Change::PartitionCreated { tp, .. }
            | Change::LeaderElected { tp, .. }
            | Change::NoLeader { tp, .. }
            | Change::IsrChanged { tp, .. } => Some(tp),
            Change::BrokerRegistered { .. }
            | Change::BrokerDied { .. }
            | Change::TopicCreated { .. }
            | Change::TopicDeleted { .. }
            | Change::TopicConfigChanged { .. } => None,
        }
    }
}
