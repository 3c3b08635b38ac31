//! Replication as the leader sees it: each follower fetch moves that follower's LEO, may
//! bring it back into the ISR and may advance the high watermark; the periodic check
//! drops followers that fell behind; and an `acks=all` write asks how far it has got.

use serde::Serialize;

use super::{Marks, Partition, PartitionChange, ReplicationState};
use crate::error::FollowerError;
use crate::replica::FollowerState;

/// What a follower fetch changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FollowerUpdate {
    /// The follower's log end offset before this fetch (its fetch offset is the new one).
    pub follower_log_end_offset_before: i64,
    /// What the fetch did to the partition: the HW may have moved, and the follower may
    /// have rejoined the ISR (`new_isr`).
    pub change: PartitionChange,
}

/// What the periodic ISR check changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IsrShrink {
    /// The followers it removed from the ISR (none: nothing changed).
    pub removed: Vec<i32>,
    /// What that did to the partition: a smaller ISR may let the HW advance.
    pub change: PartitionChange,
}

impl Partition {
    /// Records a fetch by follower `replica_id` at `fetch_offset` (its LEO), made at
    /// `now_ms`.
    ///
    /// Updates the follower's LEO and last caught-up time (Kafka's rule, see
    /// [`crate::replica`]), lets it rejoin the ISR if it is out and its LEO has reached
    /// the HW, then recomputes the HW. Errors leave everything unchanged: this broker is
    /// not the leader ([`FollowerError::NotLeader`]), an id that is not a follower of
    /// this partition, or a fetch offset outside `[log start, leader LEO]`.
    ///
    /// The first fetch of a follower since this broker became leader has
    /// `follower_log_end_offset_before` = [`crate::replica::UNKNOWN_OFFSET`].
    pub fn update_follower_fetch(
        &mut self,
        replica_id: i32,
        fetch_offset: i64,
        now_ms: u64,
    ) -> Result<FollowerUpdate, FollowerError> {
        self.ensure_leader().map_err(FollowerError::NotLeader)?;
        let leader_log_end_offset = self.log_end_offset;
        let log_start_offset = self.log_start_offset;
        let high_watermark = self.high_watermark;
        let follower = self
            .followers
            .iter_mut()
            .find(|f| f.replica_id == replica_id)
            .ok_or(FollowerError::NotAReplica { replica_id })?;
        if fetch_offset < log_start_offset || fetch_offset > leader_log_end_offset {
            return Err(FollowerError::OffsetOutOfRange {
                fetch_offset,
                log_start_offset,
                log_end_offset: leader_log_end_offset,
            });
        }
        let follower_log_end_offset_before = follower.log_end_offset;
        follower.record_fetch(fetch_offset, leader_log_end_offset, now_ms);
        let mut isr_changed = false;
        if !follower.in_isr && follower.log_end_offset >= high_watermark {
            follower.in_isr = true;
            isr_changed = true;
        }
        let before = Marks {
            log_end_offset: leader_log_end_offset,
            high_watermark,
            last_stable_offset: self.txns.last_stable_offset(high_watermark),
        };
        self.maybe_advance_high_watermark();
        Ok(FollowerUpdate {
            follower_log_end_offset_before,
            change: PartitionChange {
                before,
                after: self.marks(),
                new_isr: isr_changed.then(|| self.isr()),
            },
        })
    }

    /// Kafka's periodic ISR shrink check (the broker runs it every
    /// `replica.lag.time.max.ms / 2`): every in-sync follower that is not caught up —
    /// its LEO differs from the leader's and it was last caught up more than
    /// `replica.lag.time.max.ms` ago — leaves the ISR. The leader never leaves. The HW
    /// is then recomputed (a smaller ISR may let it advance).
    ///
    /// A follower tracks no ISR: on a follower this removes nothing and changes nothing
    /// (the broker's periodic check may run over every partition, whatever its role).
    pub fn maybe_shrink_isr(&mut self, now_ms: u64) -> IsrShrink {
        let before = self.marks();
        if !self.is_leader() {
            return IsrShrink {
                removed: Vec::new(),
                change: PartitionChange::none(before),
            };
        }
        let leader_log_end_offset = self.log_end_offset;
        let max_lag = self.config.replica_lag_time_max_ms;
        let mut removed = Vec::new();
        for follower in &mut self.followers {
            if follower.in_isr && !follower.is_caught_up(leader_log_end_offset, now_ms, max_lag) {
                follower.in_isr = false;
                removed.push(follower.replica_id);
            }
        }
        if removed.is_empty() {
            return IsrShrink {
                removed,
                change: PartitionChange::none(before),
            };
        }
        self.maybe_advance_high_watermark();
        IsrShrink {
            removed,
            change: PartitionChange {
                before,
                after: self.marks(),
                new_isr: Some(self.isr()),
            },
        }
    }

    /// The log end offset, high watermark and last stable offset now.
    pub fn marks(&self) -> Marks {
        Marks {
            log_end_offset: self.log_end_offset,
            high_watermark: self.high_watermark,
            last_stable_offset: self.last_stable_offset(),
        }
    }

    /// Recomputes the HW as the minimum LEO over the ISR; moves it only forward, and
    /// only while the ISR has at least the minimum in force (KIP-966). Returns whether
    /// it moved. Only the leader computes its HW; a follower takes the leader's.
    pub(super) fn maybe_advance_high_watermark(&mut self) -> bool {
        if !self.is_leader() || !self.has_min_insync_replicas() {
            return false;
        }
        let candidate = self
            .followers
            .iter()
            .filter(|f| f.in_isr)
            .map(|f| f.log_end_offset)
            .fold(self.log_end_offset, i64::min);
        if candidate > self.high_watermark {
            self.high_watermark = candidate;
            self.txns.on_high_watermark(candidate);
            true
        } else {
            false
        }
    }

    /// The in-sync replicas: the leader first, then the in-sync followers by id. Empty on
    /// a follower, which does not track the ISR.
    pub fn isr(&self) -> Vec<i32> {
        if !self.is_leader() {
            return Vec::new();
        }
        let mut followers: Vec<i32> = self
            .followers
            .iter()
            .filter(|f| f.in_isr)
            .map(|f| f.replica_id)
            .collect();
        followers.sort_unstable();
        let mut isr = Vec::with_capacity(followers.len() + 1);
        isr.push(self.local_id);
        isr.extend(followers);
        isr
    }

    /// Number of in-sync replicas, leader included (0 on a follower).
    pub fn isr_len(&self) -> usize {
        if !self.is_leader() {
            return 0;
        }
        1 + self.followers.iter().filter(|f| f.in_isr).count()
    }

    /// `min.insync.replicas` as configured for this partition's topic.
    pub fn min_insync_replicas(&self) -> usize {
        self.config.min_insync_replicas
    }

    /// The minimum ISR in force: `min(min.insync.replicas, replication factor)`, Kafka's
    /// `effectiveMinIsr`. A configured minimum above the replica count would make the
    /// partition unwritable with `acks=all` forever, so the replica count caps it.
    pub fn effective_min_isr(&self) -> usize {
        self.config
            .min_insync_replicas
            .min(self.replicas.len())
            .max(1)
    }

    /// Whether the ISR has at least the minimum in force, i.e. whether an `acks=all`
    /// produce may be appended (else `NOT_ENOUGH_REPLICAS`) and the HW may move. Always
    /// false on a follower.
    pub fn has_min_insync_replicas(&self) -> bool {
        self.isr_len() >= self.effective_min_isr()
    }

    /// Whether an `acks=all` write that needs the HW at `required_offset` (the offset
    /// after its last record) is done, Kafka's `checkEnoughReplicasReachOffset`.
    pub fn replication_state(&self, required_offset: i64) -> ReplicationState {
        if self.high_watermark < required_offset {
            ReplicationState::Pending
        } else if self.has_min_insync_replicas() {
            ReplicationState::Replicated
        } else {
            ReplicationState::ReplicatedBelowMinIsr
        }
    }

    /// The leader's view of follower `id`, or `None` if `id` is not a follower.
    pub fn follower(&self, id: i32) -> Option<&FollowerState> {
        self.followers.iter().find(|f| f.replica_id == id)
    }

    /// All followers, in replica order (none on a follower).
    pub fn followers(&self) -> &[FollowerState] {
        &self.followers
    }
}
