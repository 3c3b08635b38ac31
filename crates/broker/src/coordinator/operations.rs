//! The callbacks the group's delayed operations make (`delayed.rs`: DelayedJoin,
//! InitialDelayedJoin, DelayedSync and DelayedHeartbeat), Kafka's `tryCompleteJoin`,
//! `onCompleteJoin`, `onExpireHeartbeat` and the rest. Every call takes the group's lock
//! itself, so a purgatory must never call them with it held, and it does not: the
//! coordinator calls into its purgatories only after releasing the group lock.

use tracing::{info, warn};

use super::delayed::{DelayedRebalance, GroupKey, InitialDelayedJoin, MemberKey};
use super::group::GroupState;
use super::*;

impl GroupCoordinator {
    /// DelayedJoin: may rebalance `rebalance` of `group` complete now (every member
    /// rejoined)? Also true if that rebalance is over, so a stale operation goes away.
    pub(crate) fn try_complete_join(&self, group: &str, rebalance: u64) -> bool {
        let Some(handle) = self.group(group) else {
            return true;
        };
        let g = handle.state.lock();
        g.rebalance != rebalance
            || !g.is(GroupState::PreparingRebalance)
            || g.has_all_members_joined()
    }

    /// DelayedJoin completed (everyone rejoined, or the rebalance timeout passed).
    pub(crate) fn on_complete_join(&self, group: &str, rebalance: u64) {
        if let Some(handle) = self.group(group) {
            self.locked(&handle, |c, g, fx| c.complete_join(g, rebalance, fx));
        }
    }

    /// InitialDelayedJoin's delay passed: wait again (`remaining_ms` left) if new members
    /// arrived meanwhile, else complete the join as [`on_complete_join`](Self::on_complete_join).
    pub(crate) fn on_complete_initial_join(&self, join: &InitialDelayedJoin) {
        let Some(handle) = self.group(&join.group) else {
            return;
        };
        self.locked(&handle, |c, g, fx| {
            if g.rebalance != join.rebalance || !g.is(GroupState::PreparingRebalance) {
                return;
            }
            if g.new_member_added && join.remaining_ms != 0 {
                g.new_member_added = false;
                let delay = join.configured_delay_ms.min(join.remaining_ms);
                let remaining = join.remaining_ms.saturating_sub(join.delay_ms);
                info!(
                    target: TRACE_TARGET, group = %g.group_id, members = g.size(), delay_ms = delay, remaining_ms = remaining,
                    "rebalance: members joined during group.initial.rebalance.delay.ms; InitialDelayedJoin waits again"
                );
                fx.push(Action::Park(DelayedRebalance::InitialJoin(InitialDelayedJoin {
                    coordinator: c.ops(),
                    group: g.group_id.clone(),
                    rebalance: join.rebalance,
                    configured_delay_ms: join.configured_delay_ms,
                    delay_ms: delay,
                    remaining_ms: remaining,
                })));
            } else {
                c.complete_join(g, join.rebalance, fx);
            }
        });
    }

    /// DelayedSync: has every member of `generation` sent its SyncGroup (or is that
    /// generation over)?
    pub(crate) fn try_complete_sync(&self, group: &str, generation: i32) -> bool {
        let Some(handle) = self.group(group) else {
            return true;
        };
        let g = handle.state.lock();
        g.generation_id != generation
            || matches!(
                g.state(),
                GroupState::Dead | GroupState::Empty | GroupState::PreparingRebalance
            )
            || g.has_received_sync_from_all_members()
    }

    /// DelayedSync expired: remove the members that never synced, rebalance.
    pub(crate) fn on_expire_sync(&self, group: &str, generation: i32) {
        let Some(handle) = self.group(group) else {
            return;
        };
        self.locked(&handle, |c, g, fx| {
            let syncing = matches!(g.state(), GroupState::CompletingRebalance | GroupState::Stable);
            if g.generation_id != generation || !syncing || g.has_received_sync_from_all_members() {
                return;
            }
            let missing = g.pending_sync_members();
            for member in &missing {
                g.remove(member);
                Self::check_heartbeat(g, member, fx);
            }
            warn!(target: TRACE_TARGET, group = %g.group_id, generation, removed = ?missing, "rebalance: DelayedSync expired; members that never sent SyncGroup are removed");
            let why = format!("removing {missing:?} on pending sync request expiration");
            c.prepare_rebalance(g, &why, fx);
        });
    }

    /// DelayedHeartbeat: has `member` heartbeated since this operation's `epoch` (or left)?
    pub(crate) fn try_complete_heartbeat(
        &self,
        key: &MemberKey,
        epoch: u64,
        pending: bool,
    ) -> bool {
        let Some(handle) = self.group(&key.group) else {
            return true;
        };
        let g = handle.state.lock();
        if g.is(GroupState::Dead) {
            return true;
        }
        if pending {
            return !g.is_pending_member(&key.member);
        }
        g.get(&key.member)
            .is_none_or(|m| m.heartbeat_epoch != epoch)
    }

    /// DelayedHeartbeat expired: the session timed out; remove the member, rebalance.
    pub(crate) fn on_expire_heartbeat(&self, key: &MemberKey, epoch: u64, pending: bool) {
        let Some(handle) = self.group(&key.group) else {
            return;
        };
        self.locked(&handle, |c, g, fx| {
            if g.is(GroupState::Dead) {
                return;
            }
            if pending {
                if g.is_pending_member(&key.member) {
                    info!(target: TRACE_TARGET, group = %g.group_id, member = %key.member, "expiry: pending member never rejoined within session.timeout.ms; dropped");
                    g.remove(&key.member);
                    if g.is(GroupState::PreparingRebalance) {
                        fx.push(Action::CheckJoin(g.group_id.clone()));
                    }
                }
                return;
            }
            let Some(m) = g.get(&key.member) else { return };
            if m.heartbeat_epoch != epoch || m.keeps_session_alive() {
                return;
            }
            warn!(
                target: TRACE_TARGET,
                group = %g.group_id, member = %key.member, client = %m.client_id,
                session_timeout_ms = m.session_timeout_ms, state = g.state().name(),
                "expiry: DelayedHeartbeat expired, no heartbeat within session.timeout.ms; removing the member"
            );
            let why = format!("removing member {} on heartbeat expiration", key.member);
            c.remove_member_and_update_group(g, &key.member, &why, fx);
        });
    }

    /// What a Rebalance operation on `key` waits for, in words, for snapshots.
    pub(crate) fn describe_rebalance(&self, key: &GroupKey) -> String {
        let (GroupKey::Join(group) | GroupKey::Sync(group)) = key;
        let Some(handle) = self.group(group) else {
            return format!("group {group} (gone)");
        };
        let g = handle.state.lock();
        match key {
            GroupKey::Join(_) => {
                let joined: Vec<String> = g
                    .members()
                    .filter(|m| m.is_awaiting_join())
                    .map(|m| m.member_id.to_string())
                    .collect();
                let missing: Vec<String> = g
                    .not_yet_rejoined_members()
                    .iter()
                    .map(|m| m.to_string())
                    .collect();
                let pending: Vec<String> = g.pending_members().map(|m| m.to_string()).collect();
                format!(
                    "group {group} (generation {}) waits for its members to rejoin: joined {joined:?}, not yet {missing:?}, pending ids {pending:?}; \
                     the largest rebalance timeout is {} ms",
                    g.generation_id,
                    g.rebalance_timeout_ms()
                )
            }
            GroupKey::Sync(_) => format!(
                "group {group} (generation {}, {}) waits for SyncGroup from {:?}",
                g.generation_id,
                g.state().name(),
                g.pending_sync_members()
            ),
        }
    }

    /// What a DelayedHeartbeat waits for, in words, for snapshots.
    pub(crate) fn describe_heartbeat(&self, key: &MemberKey, pending: bool) -> String {
        let Some(handle) = self.group(&key.group) else {
            return format!("member {key} (group gone)");
        };
        let g = handle.state.lock();
        if pending {
            return format!(
                "pending member {} of group {}: dropped unless it rejoins with its id within session.timeout.ms",
                key.member, key.group
            );
        }
        match g.get(&key.member) {
            Some(m) => {
                let waiting = if m.is_awaiting_join() {
                    " (its JoinGroup is parked)"
                } else if m.is_awaiting_sync() {
                    " (its SyncGroup is parked)"
                } else {
                    ""
                };
                format!(
                    "member {} of group {} (client {:?}, {}): removed unless it heartbeats within session.timeout.ms {} ms{waiting}",
                    key.member, key.group, m.client_id, m.client_host, m.session_timeout_ms
                )
            }
            None => format!("member {key} (gone)"),
        }
    }
}
