//! Applying the controller's changes to the brokers (KRaft's brokers replaying metadata
//! records, or the old controller's LeaderAndIsr requests).
//!
//! Each [`Change`] that moves a partition tells every live replica of it what it is now:
//!
//! * **`LeaderElected`**: the new leader `make_leader`s at the new epoch, with the
//!   controller's replicas and ISR; every other live replica `make_follower`s it. A
//!   follower that led before completes what was parked on it with
//!   NOT_LEADER_OR_FOLLOWER.
//! * **`NoLeader`**: every live replica follows nobody (-1) at the new epoch; the
//!   partition is offline until a replica that can lead comes back.
//! * **`IsrChanged`** (a follower died or shut down): the leader takes the smaller ISR,
//!   so that its high watermark moves on without the follower and acks=all produces
//!   waiting for it complete.
//!
//! A broker that leads or stops leading a `__consumer_offsets` partition loads or
//! unloads that partition's groups, so the group coordinator moves with the leader.
//!
//! Dead brokers are skipped: a restart gives them their whole role set at once
//! ([`Cluster::take_roles`]).

use controller::{Change, PartitionState, TopicPartition as ControllerTp};
use tracing::{info, warn};

use super::Cluster;
use crate::topics::{OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC};

impl Cluster {
    /// Makes every live broker take the roles `changes` give it, then has the fetchers
    /// re-read who leads what.
    pub(super) fn apply(&self, changes: &[Change]) {
        for change in changes {
            info!(target: "purgatory::cluster", ?change, "controller");
            self.observe(change);
            match change {
                Change::LeaderElected { tp, .. } | Change::NoLeader { tp, .. } => {
                    if let Some(state) = self.partition_state(tp) {
                        for &replica in &state.replicas {
                            if self.is_alive(replica) {
                                self.take_role(replica, tp, &state);
                            }
                        }
                    }
                }
                Change::IsrChanged { tp, leader, .. } => {
                    if let Some(state) = self.partition_state(tp) {
                        if self.is_alive(*leader) {
                            self.take_role(*leader, tp, &state);
                        }
                    }
                }
                _ => {}
            }
        }
        self.nudge_fetchers();
    }

    /// Gives broker `id` its role in every partition it replicates, as the controller
    /// has them now (a restarted broker learning everything at once).
    pub(super) fn take_roles(&self, id: i32) {
        let partitions: Vec<(ControllerTp, PartitionState)> = {
            let controller = self.controller.lock();
            controller
                .image()
                .partitions()
                .filter(|(_, p)| p.is_replica(id))
                .map(|(tp, p)| (tp, p.clone()))
                .collect()
        };
        for (tp, state) in &partitions {
            self.take_role(id, tp, state);
        }
    }

    /// Broker `id` leads or follows `tp` as `state` says.
    pub(super) fn take_role(&self, id: i32, tp: &ControllerTp, state: &PartitionState) {
        let Some(node) = self.nodes.get(&id) else {
            return;
        };
        let rm = node.broker.replica_manager();
        let Some(handle) = rm.partition(&tp.topic, tp.partition) else {
            return;
        };
        let was_leader = handle.lock().is_leader();
        let leads = state.leader == id;
        if tp.topic == TRANSACTION_STATE_TOPIC && leads && !was_leader {
            // Its ids wait for the load below, not the empty memory of a new leader.
            node.broker.txn_coordinator().start_loading(tp.partition);
        }
        let taken = if leads {
            rm.make_leader(
                &handle,
                state.leader_epoch,
                state.replicas.clone(),
                state.isr.clone(),
            )
        } else {
            rm.make_follower(&handle, state.leader, state.leader_epoch)
        };
        if let Err(e) = taken {
            warn!(%tp, broker = id, "cannot take its role: {e}");
            if tp.topic == TRANSACTION_STATE_TOPIC && leads && !was_leader {
                node.broker.txn_coordinator().cancel_loading(tp.partition);
            }
            return;
        }
        if tp.topic == OFFSETS_TOPIC && was_leader != leads {
            let coordinator = node.broker.group_coordinator();
            if leads {
                coordinator.load_groups(&handle);
            } else {
                coordinator.unload_groups(tp.partition);
            }
        }
        if tp.topic == TRANSACTION_STATE_TOPIC && was_leader != leads {
            let coordinator = node.broker.txn_coordinator();
            if leads {
                coordinator.load_transactions(&handle);
            } else {
                coordinator.unload_transactions(tp.partition);
            }
        }
    }

    /// Every broker's live view and log hear of an election, as every broker learns it
    /// from the metadata.
    fn observe(&self, change: &Change) {
        let (tp, leaders, isr, clean) = match change {
            Change::LeaderElected {
                tp,
                old_leader,
                new_leader,
                leader_epoch,
                isr,
                clean,
                ..
            } => (tp, (*old_leader, *new_leader, *leader_epoch), isr, *clean),
            Change::NoLeader {
                tp,
                old_leader,
                leader_epoch,
                isr,
                ..
            } => (tp, (*old_leader, -1, *leader_epoch), isr, true),
            _ => return,
        };
        let local = crate::partition::TopicPartition::new(&tp.topic, tp.partition);
        for node in self.nodes.values() {
            let rm = node.broker.replica_manager();
            rm.telemetry
                .leader_elected(&local, rm.now_ms(), leaders, isr, clean);
        }
    }

    fn partition_state(&self, tp: &ControllerTp) -> Option<PartitionState> {
        self.controller.lock().image().partition(tp).cloned()
    }

    /// Whether broker `id` is alive, as the controller has it.
    pub fn is_alive(&self, id: i32) -> bool {
        self.controller.lock().image().is_alive(id)
    }
}
