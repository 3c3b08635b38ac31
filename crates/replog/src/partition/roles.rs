//! Becoming leader or follower (Kafka's `makeLeader` / `makeFollower`), and the checks
//! that keep each call to its role.
//!
//! A role change comes with the partition's new leader epoch, decided by the controller,
//! and is refused if that epoch is older than the one the partition is in: it is a stale
//! decision that arrived late. The log, the high watermark, the leader epoch cache and
//! the producer state survive every change; what the leader knows of its followers
//! does not, since a new leader must hear from each follower before trusting its LEO.

use super::{Partition, PartitionChange, Role};
use crate::error::RoleError;
use crate::replica::FollowerState;

impl Partition {
    /// `Ok` if this broker leads the partition, else [`RoleError::NotLeader`]. The
    /// broker asks this before a produce, under the same lock, and answers the error's
    /// `NOT_LEADER_OR_FOLLOWER` if it fails.
    pub fn ensure_leader(&self) -> Result<(), RoleError> {
        match self.role {
            Role::Leader => Ok(()),
            Role::Follower { leader_id } => Err(RoleError::NotLeader {
                leader_id,
                leader_epoch: self.leader_epoch,
            }),
        }
    }

    /// `Ok` if this broker follows another for the partition, else
    /// [`RoleError::NotFollower`].
    pub fn ensure_follower(&self) -> Result<(), RoleError> {
        match self.role {
            Role::Leader => Err(RoleError::NotFollower {
                leader_epoch: self.leader_epoch,
            }),
            Role::Follower { .. } => Ok(()),
        }
    }

    /// Refuses a role change to `leader_epoch` if the partition is in a newer one.
    fn check_new_epoch(&self, leader_epoch: i32) -> Result<(), RoleError> {
        debug_assert!(
            self.epoch_cache
                .latest_epoch()
                .is_none_or(|latest| latest <= self.leader_epoch),
            "the log holds epoch {:?}, newer than the partition's epoch {}",
            self.epoch_cache.latest_epoch(),
            self.leader_epoch
        );
        if leader_epoch < self.leader_epoch {
            return Err(RoleError::StaleLeaderEpoch {
                current: self.leader_epoch,
                requested: leader_epoch,
            });
        }
        Ok(())
    }

    /// Makes this broker the partition's leader in `leader_epoch` (Kafka's `makeLeader`),
    /// with the assignment `replicas` and the in-sync set `isr` the controller decided
    /// (this broker is put first in `replicas` and is always in the ISR; ids in `isr`
    /// that are not replicas are ignored).
    ///
    /// For a new leadership (this broker was a follower, or `leader_epoch` is newer), a
    /// follower state is created for every other replica: LEO unknown until it fetches,
    /// in the ISR if `isr` says so, and then caught up as of `now_ms`
    /// ([`FollowerState::for_new_leader`]). The high watermark is kept: it is where this
    /// broker last knew it to be, and advances once every in-sync follower has fetched
    /// (never backwards). The new epoch starts at the log end offset, in the answers of
    /// [`Partition::end_offset_for_leader_epoch`] at once, in the leader epoch cache with
    /// its first batch.
    ///
    /// The same epoch again while leading updates the assignment and the ISR and keeps
    /// what is known of the followers that remain (the controller changed the ISR or the
    /// replicas, not the leader).
    ///
    /// Refused with [`RoleError::StaleLeaderEpoch`], changing nothing, if `leader_epoch`
    /// is older than the partition's.
    pub fn make_leader(
        &mut self,
        leader_epoch: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
        now_ms: u64,
    ) -> Result<PartitionChange, RoleError> {
        self.check_new_epoch(leader_epoch)?;
        let before = self.marks();
        let isr_before = self.isr();
        let new_leadership = !self.is_leader() || leader_epoch > self.leader_epoch;

        let mut all = vec![self.local_id];
        for id in replicas {
            if !all.contains(&id) {
                all.push(id);
            }
        }
        let old_followers = std::mem::take(&mut self.followers);
        self.followers = all[1..]
            .iter()
            .map(|&id| {
                let in_isr = isr.contains(&id);
                let known = old_followers
                    .iter()
                    .find(|f| f.replica_id == id)
                    .filter(|_| !new_leadership);
                match known {
                    Some(state) => FollowerState {
                        in_isr,
                        ..state.clone()
                    },
                    None => FollowerState::for_new_leader(id, in_isr, now_ms),
                }
            })
            .collect();
        self.replicas = all;
        if new_leadership {
            self.role_since_ms = now_ms;
        }
        self.role = Role::Leader;
        self.leader_epoch = leader_epoch;
        self.maybe_advance_high_watermark();

        let isr_after = self.isr();
        debug_assert!(self.high_watermark >= before.high_watermark);
        Ok(PartitionChange {
            before,
            after: self.marks(),
            new_isr: (isr_after != isr_before).then_some(isr_after),
        })
    }

    /// Makes this broker a follower of broker `leader_id` in `leader_epoch` (Kafka's
    /// `makeFollower`). The followers' states are dropped (a follower tracks none, and
    /// reports an empty ISR); the log, the high watermark, the leader epoch cache and the
    /// producer state are kept. The broker then fetches from the leader, truncating
    /// first if its log diverged ([`Partition::follower_truncation_target`]).
    ///
    /// Refused with [`RoleError::StaleLeaderEpoch`], changing nothing, if `leader_epoch`
    /// is older than the partition's. The same leader and epoch again change nothing.
    pub fn make_follower(
        &mut self,
        leader_id: i32,
        leader_epoch: i32,
        now_ms: u64,
    ) -> Result<PartitionChange, RoleError> {
        self.check_new_epoch(leader_epoch)?;
        let before = self.marks();
        let new_role = Role::Follower { leader_id };
        let was_leader = self.is_leader();
        if self.role != new_role || leader_epoch != self.leader_epoch {
            self.role_since_ms = now_ms;
        }
        self.role = new_role;
        self.leader_epoch = leader_epoch;
        self.followers.clear();
        Ok(PartitionChange {
            before,
            after: self.marks(),
            new_isr: was_leader.then(Vec::new),
        })
    }
}
