//! # AlterPartition: the leader asks to change its ISR
//!
//! A partition's leader decides when a follower has fallen behind or caught up, but it
//! may not change the ISR on its own authority: it sends the controller the ISR it
//! wants, with the leader epoch and partition epoch of the state it based that on. The
//! controller accepts only if that state is still the current one, so a deposed
//! leader, or one that has not yet seen the controller's own changes (a follower
//! removed because it died), cannot overwrite newer state. The checks, in Kafka's
//! order, each with the error the leader gets back:
//!
//! 1. the partition exists (`UNKNOWN_TOPIC_OR_PARTITION`, 3);
//! 2. the leader epoch is the current one: older is `FENCED_LEADER_EPOCH` (74), a newer
//!    one means the caller heard of an election this controller did not make
//!    (`NOT_CONTROLLER`, 41);
//! 3. the sender is the leader (`NOT_LEADER_OR_FOLLOWER`, 6; KRaft answers
//!    `INVALID_REQUEST` here, but at the current epoch that can only be a confused
//!    broker, and "not the leader" says why);
//! 4. the partition epoch is the current one (`INVALID_UPDATE_VERSION`, 95);
//! 5. the new ISR is well formed: not empty, no broker twice, the leader in it
//!    (`INVALID_REQUEST`, 42);
//! 6. every member is a replica and alive (`INELIGIBLE_REPLICA`, 107). A dead broker
//!    must not be added back, or a leader could wait for a follower that never comes.
//!
//! On success the ISR is stored in replica order, the partition epoch goes up by one
//! (the leader epoch does not), and a [`Change::IsrChanged`] is returned. An ISR equal
//! to the current one is accepted and changes nothing, not even the partition epoch.

use super::Controller;
use crate::change::Change;
use crate::error::Error;
use crate::partition::{in_replica_order, Election, PartitionState, TopicPartition};

/// An accepted AlterPartition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionOutcome {
    /// The partition's state now: the leader sends its next AlterPartition with this
    /// `partition_epoch`.
    pub state: PartitionState,
    /// The [`Change::IsrChanged`] made, `None` if the ISR was already the one asked for.
    pub change: Option<Change>,
}

impl Controller {
    /// Leader `from_broker`, at `leader_epoch` and `partition_epoch`, asks for
    /// `new_isr` on `tp`. See the module doc for the checks and their errors.
    pub fn alter_partition(
        &mut self,
        tp: &TopicPartition,
        from_broker: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        new_isr: &[i32],
    ) -> Result<AlterPartitionOutcome, Error> {
        let current = self
            .image
            .partition(tp)
            .ok_or_else(|| Error::UnknownTopicOrPartition {
                topic: tp.topic.clone(),
                partition: Some(tp.partition),
            })?;
        self.validate(
            tp,
            current,
            from_broker,
            leader_epoch,
            partition_epoch,
            new_isr,
        )?;
        let (leader, isr) = (current.leader, in_replica_order(&current.replicas, new_isr));
        let topic = self.image.topics.get_mut(&tp.topic).expect("found above");
        let state = &mut topic.partitions[tp.partition as usize];
        // `how` only matters for a leader change, which this is not.
        let how = Election::clean(crate::change::ElectionReason::LeaderFailed);
        let change = state.transition(tp, leader, &isr, how);
        let state = state.clone();
        self.debug_check();
        Ok(AlterPartitionOutcome { state, change })
    }

    fn validate(
        &self,
        tp: &TopicPartition,
        current: &PartitionState,
        from_broker: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        new_isr: &[i32],
    ) -> Result<(), Error> {
        if leader_epoch < current.leader_epoch {
            return Err(Error::FencedLeaderEpoch {
                tp: tp.clone(),
                request_epoch: leader_epoch,
                current_epoch: current.leader_epoch,
            });
        }
        if leader_epoch > current.leader_epoch {
            return Err(Error::NotController {
                tp: tp.clone(),
                request_epoch: leader_epoch,
                current_epoch: current.leader_epoch,
            });
        }
        if from_broker != current.leader {
            return Err(Error::NotLeaderOrFollower {
                tp: tp.clone(),
                broker: from_broker,
                leader: current.leader,
            });
        }
        if partition_epoch != current.partition_epoch {
            return Err(Error::InvalidUpdateVersion {
                tp: tp.clone(),
                request_epoch: partition_epoch,
                current_epoch: current.partition_epoch,
            });
        }
        let invalid = |reason: String| Err(Error::InvalidRequest { reason });
        if new_isr.is_empty() {
            return invalid(format!("{tp}: the new ISR is empty"));
        }
        if (1..new_isr.len()).any(|i| new_isr[..i].contains(&new_isr[i])) {
            return invalid(format!("{tp}: the new ISR {new_isr:?} repeats a broker"));
        }
        if !new_isr.contains(&current.leader) {
            return invalid(format!(
                "{tp}: the new ISR {new_isr:?} leaves out the leader {}",
                current.leader
            ));
        }
        for &b in new_isr {
            let reason = if !current.is_replica(b) {
                "not a replica"
            } else if !self.image.is_alive(b) {
                "not alive"
            } else {
                continue;
            };
            return Err(Error::IneligibleReplica {
                tp: tp.clone(),
                broker: b,
                reason,
            });
        }
        Ok(())
    }
}
