//! The group coordinator's delayed operations: Kafka's `DelayedJoin`, `InitialDelayedJoin`,
//! `DelayedSync` (together Kafka's `DelayedRebalance`, in the **Rebalance** purgatory) and
//! `DelayedHeartbeat` (in the **Heartbeat** purgatory), on the broker's one shared timer.
//!
//! - [`DelayedJoin`] watches `join:<group>` while a group is PreparingRebalance. It completes
//!   when every known member has rejoined (and no member id handed out is still pending),
//!   or when the largest rebalance timeout of the members passes; the coordinator then
//!   removes whoever did not rejoin and starts the next generation.
//! - [`InitialDelayedJoin`] replaces it when an Empty group starts its first rebalance: it
//!   never completes early; it waits `group.initial.rebalance.delay.ms` and, while new
//!   members keep arriving, waits that long again, within the rebalance timeout.
//! - [`DelayedSync`] watches `sync:<group>` once the join phase is over: every member must
//!   send its SyncGroup within the rebalance timeout, or it is removed and the group
//!   rebalances again.
//! - [`DelayedHeartbeat`] watches `<group>/<member>`, one per member (and per pending member
//!   waiting to rejoin with the id it was given). Its timeout is the session timeout; each
//!   heartbeat, join or sync completes it and parks the next one. If it expires, the member
//!   is gone (a closed connection means nothing: only this, or LeaveGroup, removes a member).
//!
//! They live with the coordinator, as Kafka's do, and decide nothing themselves: they carry
//! the group (and member, generation, rebalance) they belong to and call the coordinator
//! back (`operations.rs`: Kafka's `coordinator.tryCompleteJoin`, `onCompleteJoin`,
//! `onExpireHeartbeat`, ...). They hold it weakly, so a parked operation never keeps a
//! dropped broker alive.
//!
//! Each carries what makes it current — the group's rebalance number, its generation, the
//! member's heartbeat epoch — so one that was overtaken (a newer heartbeat, a newer
//! rebalance) completes quietly instead of acting on a group that has moved on.

use std::fmt;
use std::sync::{Arc, Weak};

use timewheel::{Completion, DelayedOperation};

use super::GroupCoordinator;

/// The key of a Rebalance-purgatory operation (Kafka's `GroupJoinKey` / `GroupSyncKey`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum GroupKey {
    /// `join:<group>`: the group's DelayedJoin / InitialDelayedJoin.
    Join(Arc<str>),
    /// `sync:<group>`: the group's DelayedSync.
    Sync(Arc<str>),
}

impl fmt::Display for GroupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupKey::Join(g) => write!(f, "join:{g}"),
            GroupKey::Sync(g) => write!(f, "sync:{g}"),
        }
    }
}

/// The key of a DelayedHeartbeat (Kafka's `MemberKey`): `<group>/<member id>`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct MemberKey {
    /// The group id.
    pub group: Arc<str>,
    /// The member id.
    pub member: Arc<str>,
}

impl fmt::Display for MemberKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.group, self.member)
    }
}

/// A weak handle on the coordinator, upgraded for each call.
pub type Coordinator = Weak<GroupCoordinator>;

/// Kafka's `DelayedJoin`: a group in PreparingRebalance waiting for its members to rejoin.
pub struct DelayedJoin {
    /// Whom to ask.
    pub coordinator: Coordinator,
    /// The group.
    pub group: Arc<str>,
    /// Which rebalance of the group this operation belongs to.
    pub rebalance: u64,
    /// Its timeout: the largest rebalance timeout of the members.
    pub timeout_ms: u64,
}

/// Kafka's `InitialDelayedJoin`: the first rebalance of an Empty group, held back
/// `group.initial.rebalance.delay.ms` so that consumers starting together join one
/// generation instead of rebalancing once per arrival.
pub struct InitialDelayedJoin {
    /// Whom to ask.
    pub coordinator: Coordinator,
    /// The group.
    pub group: Arc<str>,
    /// Which rebalance of the group this operation belongs to.
    pub rebalance: u64,
    /// `group.initial.rebalance.delay.ms`.
    pub configured_delay_ms: u64,
    /// This operation's delay (its timeout).
    pub delay_ms: u64,
    /// What is left of the rebalance timeout after this delay.
    pub remaining_ms: u64,
}

/// Kafka's `DelayedSync`: the members of a new generation must each send SyncGroup.
pub struct DelayedSync {
    /// Whom to ask.
    pub coordinator: Coordinator,
    /// The group.
    pub group: Arc<str>,
    /// The generation whose SyncGroups are awaited.
    pub generation: i32,
    /// Its timeout: the largest rebalance timeout of the members.
    pub timeout_ms: u64,
}

/// Whatever the Rebalance purgatory holds (Kafka's `DelayedRebalance`).
pub enum DelayedRebalance {
    /// A DelayedJoin.
    Join(DelayedJoin),
    /// An InitialDelayedJoin.
    InitialJoin(InitialDelayedJoin),
    /// A DelayedSync.
    Sync(DelayedSync),
}

impl DelayedRebalance {
    /// The key it watches.
    pub fn key(&self) -> GroupKey {
        match self {
            DelayedRebalance::Join(j) => GroupKey::Join(j.group.clone()),
            DelayedRebalance::InitialJoin(j) => GroupKey::Join(j.group.clone()),
            DelayedRebalance::Sync(s) => GroupKey::Sync(s.group.clone()),
        }
    }

    /// Its timeout.
    pub fn timeout_ms(&self) -> u64 {
        match self {
            DelayedRebalance::Join(j) => j.timeout_ms,
            DelayedRebalance::InitialJoin(j) => j.delay_ms,
            DelayedRebalance::Sync(s) => s.timeout_ms,
        }
    }

    /// Kafka's class name, for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            DelayedRebalance::Join(_) => "DelayedJoin",
            DelayedRebalance::InitialJoin(_) => "InitialDelayedJoin",
            DelayedRebalance::Sync(_) => "DelayedSync",
        }
    }

    fn coordinator(&self) -> Option<Arc<GroupCoordinator>> {
        match self {
            DelayedRebalance::Join(j) => j.coordinator.upgrade(),
            DelayedRebalance::InitialJoin(j) => j.coordinator.upgrade(),
            DelayedRebalance::Sync(s) => s.coordinator.upgrade(),
        }
    }
}

impl DelayedOperation for DelayedRebalance {
    type Cause = ();

    fn try_complete(&self) -> bool {
        let Some(c) = self.coordinator() else {
            return true; // the broker is gone: nothing left to wait for
        };
        match self {
            DelayedRebalance::Join(j) => c.try_complete_join(&j.group, j.rebalance),
            // Kafka's InitialDelayedJoin never completes early: it exists to wait.
            DelayedRebalance::InitialJoin(_) => false,
            DelayedRebalance::Sync(s) => c.try_complete_sync(&s.group, s.generation),
        }
    }

    fn on_complete(&self, how: Completion) {
        let Some(c) = self.coordinator() else { return };
        match self {
            // A join completes the rebalance however it ended: every member rejoined, or
            // the rebalance timeout removes those that did not.
            DelayedRebalance::Join(j) => c.on_complete_join(&j.group, j.rebalance),
            DelayedRebalance::InitialJoin(j) => c.on_complete_initial_join(j),
            // A DelayedSync acts only when it expires: the members that sent no SyncGroup
            // are removed.
            DelayedRebalance::Sync(s) if how == Completion::Expired => {
                c.on_expire_sync(&s.group, s.generation)
            }
            DelayedRebalance::Sync(_) => {}
        }
    }

    fn describe(&self) -> String {
        let what = self
            .coordinator()
            .map(|c| c.describe_rebalance(&self.key()))
            .unwrap_or_default();
        match self {
            DelayedRebalance::InitialJoin(j) => format!(
                "InitialDelayedJoin: holds the first rebalance {} ms (group.initial.rebalance.delay.ms {} ms, \
                 {} ms of the rebalance timeout left after it) for more members; {what}",
                j.delay_ms, j.configured_delay_ms, j.remaining_ms
            ),
            _ => format!("{}: {what}", self.kind()),
        }
    }
}

/// Kafka's `DelayedHeartbeat`: a member's session, one timeout long.
pub struct DelayedHeartbeat {
    /// Whom to ask.
    pub coordinator: Coordinator,
    /// The group and member.
    pub key: MemberKey,
    /// The member's heartbeat epoch when this was parked; any later heartbeat, join or
    /// sync moves the epoch on and so completes this operation.
    pub epoch: u64,
    /// A pending member (given an id by MEMBER_ID_REQUIRED, not yet rejoined with it).
    pub pending: bool,
    /// The session timeout (or, for a new member awaiting its first join, Kafka's
    /// five-minute new-member join timeout).
    pub timeout_ms: u64,
}

impl DelayedOperation for DelayedHeartbeat {
    type Cause = ();

    fn try_complete(&self) -> bool {
        match self.coordinator.upgrade() {
            Some(c) => c.try_complete_heartbeat(&self.key, self.epoch, self.pending),
            None => true,
        }
    }

    /// Completion by a heartbeat needs nothing more: the next operation is already parked.
    /// Expiry ends the member's session.
    fn on_complete(&self, how: Completion) {
        if how != Completion::Expired {
            return;
        }
        if let Some(c) = self.coordinator.upgrade() {
            c.on_expire_heartbeat(&self.key, self.epoch, self.pending);
        }
    }

    fn describe(&self) -> String {
        let what = self
            .coordinator
            .upgrade()
            .map(|c| c.describe_heartbeat(&self.key, self.pending))
            .unwrap_or_default();
        format!("DelayedHeartbeat: {what}")
    }
}
