//! # Who may lead: Kafka's leader election rules
//!
//! Kafka's controller elects by scanning the replicas in **assignment order** (not ISR
//! order, not broker id order) and taking the first acceptable one, so leadership
//! falls back along the same path every time and returns to the preferred (first)
//! replica when it can:
//!
//! * a **clean** election takes the first replica that is in the ISR and eligible
//!   (alive; during a controlled shutdown, also not the broker going away). Nothing
//!   acknowledged is lost: every ISR member has every committed record.
//! * an **unclean** election, only when the topic's `unclean.leader.election.enable`
//!   is on and no clean candidate exists, takes the first eligible replica at all.
//!   Records the old ISR acknowledged but this replica never fetched are lost, so
//!   its ISR becomes just itself: the others must catch up to *its* log.
//!
//! These functions only choose; [`crate::Controller`] decides the resulting ISR.

use crate::partition::PartitionState;

/// The result of an election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elected {
    /// An ISR member.
    Clean(i32),
    /// A replica outside the ISR (unclean election was allowed).
    Unclean(i32),
    /// No acceptable replica.
    Nobody,
}

/// The first replica in assignment order that is in the ISR and `eligible`.
pub fn first_in_sync(state: &PartitionState, eligible: impl Fn(i32) -> bool) -> Option<i32> {
    state
        .replicas
        .iter()
        .copied()
        .find(|&r| state.in_isr(r) && eligible(r))
}

/// The first replica in assignment order that is `eligible`, in the ISR or not.
pub fn first_replica(state: &PartitionState, eligible: impl Fn(i32) -> bool) -> Option<i32> {
    state.replicas.iter().copied().find(|&r| eligible(r))
}

/// A clean election, else, if `unclean_allowed`, an unclean one.
pub fn elect(
    state: &PartitionState,
    unclean_allowed: bool,
    eligible: impl Fn(i32) -> bool,
) -> Elected {
    if let Some(leader) = first_in_sync(state, &eligible) {
        return Elected::Clean(leader);
    }
    match first_replica(state, &eligible) {
        Some(leader) if unclean_allowed => Elected::Unclean(leader),
        _ => Elected::Nobody,
    }
}
