//! # Preferred leader election: leadership back to the first replica
//!
//! The assignment spreads *first* replicas evenly, so the cluster's load is balanced
//! when every partition is led by its first replica, the **preferred leader**. After
//! failovers leadership piles up on the survivors; a preferred election (Kafka's
//! ElectLeaders with type PREFERRED, or its `auto.leader.rebalance.enable` timer)
//! moves it back where the first replica is alive and in the ISR. The ISR is
//! unchanged, the leader epoch goes up by one.

use super::{Controller, Decision};
use crate::change::{Change, ElectionReason};
use crate::error::Error;
use crate::partition::{Election, TopicPartition};

impl Controller {
    /// Makes `tp`'s first replica its leader. Refuses an unknown partition
    /// (`UNKNOWN_TOPIC_OR_PARTITION`), one the first replica already leads
    /// (`ELECTION_NOT_NEEDED`) and one whose first replica is dead or out of sync
    /// (`PREFERRED_LEADER_NOT_AVAILABLE`).
    pub fn elect_preferred(&mut self, tp: &TopicPartition) -> Result<Vec<Change>, Error> {
        let state = self
            .image
            .partition(tp)
            .ok_or_else(|| Error::UnknownTopicOrPartition {
                topic: tp.topic.clone(),
                partition: Some(tp.partition),
            })?;
        let preferred = state.preferred_leader();
        if state.leader == preferred {
            return Err(Error::ElectionNotNeeded {
                tp: tp.clone(),
                preferred,
            });
        }
        if !state.in_isr(preferred) || !self.image.is_alive(preferred) {
            return Err(Error::PreferredLeaderNotAvailable {
                tp: tp.clone(),
                preferred,
            });
        }
        let changes = self.update_partitions(Some(&tp.topic), |p, ctx| {
            (ctx.tp == tp).then(|| Decision {
                leader: preferred,
                isr: p.isr.clone(),
                how: Election::clean(ElectionReason::Preferred),
            })
        });
        self.debug_check();
        Ok(changes)
    }

    /// A preferred election in every partition where one is possible and needed;
    /// the others are left alone.
    pub fn elect_preferred_leaders(&mut self) -> Vec<Change> {
        let changes = self.update_partitions(None, |p, ctx| {
            let preferred = p.preferred_leader();
            let possible = p.leader != preferred && p.in_isr(preferred) && (ctx.alive)(preferred);
            possible.then(|| Decision {
                leader: preferred,
                isr: p.isr.clone(),
                how: Election::clean(ElectionReason::Preferred),
            })
        });
        self.debug_check();
        changes
    }
}
