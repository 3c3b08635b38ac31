//! Which broker does what for a transaction.
//!
//! Alone, this broker does all of it. In a cluster (`serve --brokers N`) three parts of one
//! transaction can live on three brokers, as they do in Kafka:
//!
//! - **The coordinator** of a transactional id is the leader of the id's
//!   `__transaction_state` partition. FindCoordinator names it; every other broker answers
//!   the id's requests NOT_COORDINATOR, which sends the client back to FindCoordinator.
//! - **A marker** is written by the leader of its partition (Kafka's coordinator sends that
//!   broker WriteTxnMarkers), and waits in that leader's produce purgatory until it is
//!   replicated.
//! - **A group's offsets** are written by the group's coordinator, the leader of the
//!   group's `__consumer_offsets` partition, where a TxnOffsetCommit arrives; the
//!   transaction's marker in that partition decides them.
//!
//! The brokers of a cluster share a process, so a coordinator reaches another broker through
//! [`ClusterLink::node`](crate::cluster::ClusterLink::node) rather than a socket.

use std::sync::Arc;

use kafka_protocol::ResponseError;

use super::{log, TransactionCoordinator};
use crate::coordinator::GroupCoordinator;
use crate::partition::TopicPartition;
use crate::replica_manager::ReplicaManager;
use crate::topics::TRANSACTION_STATE_TOPIC;

impl TransactionCoordinator {
    /// Whether this broker coordinates `transactional_id`: it leads the id's
    /// `__transaction_state` partition, or that topic does not exist yet (the first
    /// request creates it, and a broker alone leads all of it).
    /// COORDINATOR_LOAD_IN_PROGRESS while it is still loading that partition.
    pub fn check_coordinator(&self, transactional_id: &str) -> Result<(), ResponseError> {
        let rm = self
            .rm
            .upgrade()
            .ok_or(ResponseError::CoordinatorNotAvailable)?;
        let Some(topic) = rm.topic(TRANSACTION_STATE_TOPIC) else {
            return Ok(());
        };
        let tp = log::partition_for(&rm, transactional_id);
        if self.loading.lock().contains(&tp.partition) {
            return Err(ResponseError::CoordinatorLoadInProgress);
        }
        match topic.partitions.get(tp.partition as usize) {
            Some(p) if p.lock().is_leader() => Ok(()),
            _ => Err(ResponseError::NotCoordinator),
        }
    }

    /// The coordinator of `transactional_id`: this one, or in a cluster the one of the
    /// broker leading the id's partition. A TxnOffsetCommit goes to the group's
    /// coordinator, which need not be the transaction's.
    pub fn coordinator_of(
        self: &Arc<Self>,
        transactional_id: &str,
    ) -> Result<Arc<TransactionCoordinator>, ResponseError> {
        let local = self.check_coordinator(transactional_id);
        let rm = self
            .rm
            .upgrade()
            .ok_or(ResponseError::CoordinatorNotAvailable)?;
        let Some(cluster) = rm.cluster().filter(|_| local.is_err()) else {
            return local.map(|()| self.clone());
        };
        let tp = log::partition_for(&rm, transactional_id);
        cluster
            .partition(&tp.topic, tp.partition)
            .map(|p| p.leader)
            .and_then(|leader| cluster.node(leader))
            .map(|node| node.txn)
            .ok_or(ResponseError::CoordinatorNotAvailable)
    }

    /// Every transaction coordinator: the cluster's, or this one alone.
    pub(super) fn all_coordinators(self: &Arc<Self>) -> Vec<Arc<TransactionCoordinator>> {
        match self.rm.upgrade().and_then(|rm| rm.cluster()) {
            Some(cluster) => cluster.nodes().into_iter().map(|n| n.txn).collect(),
            None => vec![self.clone()],
        }
    }
}

/// The replica manager of the broker that leads `tp`: `rm` itself alone; in a cluster the
/// controller's leader. NOT_LEADER_OR_FOLLOWER while the partition has none.
pub(super) fn leader_of(
    rm: &Arc<ReplicaManager>,
    tp: &TopicPartition,
) -> Result<Arc<ReplicaManager>, ResponseError> {
    let Some(cluster) = rm.cluster() else {
        return Ok(rm.clone());
    };
    let leader = cluster
        .partition(&tp.topic, tp.partition)
        .ok_or(ResponseError::UnknownTopicOrPartition)?
        .leader;
    cluster
        .node(leader)
        .map(|n| n.rm)
        .ok_or(ResponseError::NotLeaderOrFollower)
}

/// The group coordinator of the broker leading `__consumer_offsets` partition `tp`:
/// `local` alone; in a cluster the leader's (none while the partition has no leader).
pub(super) fn group_coordinator_leading(
    rm: &ReplicaManager,
    local: Arc<GroupCoordinator>,
    tp: &TopicPartition,
) -> Option<Arc<GroupCoordinator>> {
    let Some(cluster) = rm.cluster() else {
        return Some(local);
    };
    let leader = cluster.partition(&tp.topic, tp.partition)?.leader;
    cluster.node(leader).map(|n| n.groups)
}
