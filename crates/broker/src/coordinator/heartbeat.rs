//! Heartbeats and leaving: how the coordinator knows a member is alive, and how a member
//! goes away. Each member has one DelayedHeartbeat in the Heartbeat purgatory, a session
//! timeout away; whatever shows the member is alive (a heartbeat, a join, a sync) completes
//! it and parks the next (Kafka's `completeAndScheduleNextExpiration`). LeaveGroup removes
//! members at once and rebalances what remains.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use tracing::info;

use super::delayed::MemberKey;
use super::group::{GroupMetadata, GroupState};
use super::*;
use crate::request::RequestContext;

/// Where a Heartbeat's answer goes.
pub type HeartbeatCallback = Box<dyn FnOnce(Option<ResponseError>) + Send>;

/// Where a LeaveGroup's answer goes: the top-level error, and each member's.
pub type LeaveCallback =
    Box<dyn FnOnce(Option<ResponseError>, Vec<(LeavingMember, Option<ResponseError>)>) + Send>;

impl GroupCoordinator {
    // ------------------------------------------------------------------ heartbeats

    /// Kafka's `completeAndScheduleNextExpiration`: the member showed it is alive; its
    /// current DelayedHeartbeat completes and the next is parked `timeout_ms` away.
    pub(super) fn schedule_heartbeat(
        &self,
        g: &mut GroupMetadata,
        member_id: &str,
        timeout_ms: u64,
        fx: &mut Fx,
    ) {
        let deadline = self.timer.deadline_after(timeout_ms as i64);
        let group = g.group_id.clone();
        if let Some(m) = g.get_mut(member_id) {
            m.heartbeat_epoch += 1;
            m.session_deadline_ms = deadline;
            fx.push(Action::Heartbeat {
                key: MemberKey {
                    group,
                    member: m.member_id.clone(),
                },
                epoch: m.heartbeat_epoch,
                timeout_ms,
                pending: false,
            });
        }
    }

    pub(super) fn session_heartbeat(&self, g: &mut GroupMetadata, member_id: &str, fx: &mut Fx) {
        let timeout = g
            .get(member_id)
            .map_or(0, |m| m.session_timeout_ms.max(0) as u64);
        self.schedule_heartbeat(g, member_id, timeout, fx);
    }

    pub(super) fn check_heartbeat(g: &GroupMetadata, member_id: &str, fx: &mut Fx) {
        fx.push(Action::CheckHeartbeat(MemberKey {
            group: g.group_id.clone(),
            member: Arc::from(member_id),
        }));
    }

    // ------------------------------------------------------------------ Heartbeat

    /// Heartbeat (Kafka's `handleHeartbeat`): restarts the member's session at once. A
    /// request that is not a current member's (unknown member, wrong generation) is
    /// answered at once; the member's own answer — NONE, or REBALANCE_IN_PROGRESS — only
    /// once the coordinator's earlier writes to the group's partition are replicated, or
    /// COORDINATOR_NOT_AVAILABLE if they are not within `offsets.commit.timeout.ms` (Kafka
    /// 4.4's coordinator orders a partition's answers so).
    pub fn handle_heartbeat(
        &self,
        ctx: &RequestContext,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        callback: HeartbeatCallback,
    ) {
        if group_id.is_empty() {
            return callback(Some(ResponseError::InvalidGroupId));
        }
        if let Err(e) = self.manager.check_coordinator(group_id) {
            return callback(Some(e));
        }
        let Some(handle) = self.group(group_id) else {
            return callback(Some(ResponseError::UnknownMemberId));
        };
        self.locked(&handle, |c, g, fx| {
            let answer = c.heartbeat(g, member_id, group_instance_id, generation_id, fx);
            match answer {
                None | Some(ResponseError::RebalanceInProgress) => {
                    fx.push(Action::AfterPendingWrites {
                        ctx: ctx.clone(),
                        kind: "heartbeat",
                        group: g.group_id.clone(),
                        then: Box::new(move |written| {
                            callback(match written {
                                Ok(()) => answer,
                                Err(_) => Some(ResponseError::CoordinatorNotAvailable),
                            })
                        }),
                    });
                }
                refused => callback(refused),
            }
        })
    }

    /// The heartbeat's effect on the group, and its answer.
    fn heartbeat(
        &self,
        g: &mut GroupMetadata,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        fx: &mut Fx,
    ) -> Option<ResponseError> {
        if g.is(GroupState::Dead) {
            return Some(ResponseError::CoordinatorNotAvailable);
        }
        if let Some(error) = validate_current_member(g, member_id, group_instance_id) {
            return Some(error);
        }
        if generation_id != g.generation_id {
            return Some(ResponseError::IllegalGeneration);
        }
        match g.state() {
            GroupState::Empty => Some(ResponseError::UnknownMemberId),
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.session_heartbeat(g, member_id, fx);
                None
            }
            GroupState::PreparingRebalance => {
                self.session_heartbeat(g, member_id, fx);
                Some(ResponseError::RebalanceInProgress)
            }
            GroupState::Dead => Some(ResponseError::CoordinatorNotAvailable),
        }
    }

    // ------------------------------------------------------------------ LeaveGroup

    /// LeaveGroup (Kafka's `handleLeaveGroup`): each member leaves at once, and the group
    /// rebalances without it. The answer — the top-level error and one result per member —
    /// comes once the coordinator's earlier writes to the group's partition are replicated
    /// (COORDINATOR_NOT_AVAILABLE and no members if they are not in time), as Kafka 4.4
    /// answers it.
    pub fn handle_leave_group(
        &self,
        ctx: &RequestContext,
        group_id: &str,
        leaving: Vec<LeavingMember>,
        callback: LeaveCallback,
    ) {
        if group_id.is_empty() {
            return callback(Some(ResponseError::InvalidGroupId), Vec::new());
        }
        if let Err(e) = self.manager.check_coordinator(group_id) {
            return callback(Some(e), Vec::new());
        }
        let Some(handle) = self.group(group_id) else {
            let results = leaving
                .into_iter()
                .map(|m| (m, Some(ResponseError::UnknownMemberId)))
                .collect();
            return callback(None, results);
        };
        self.locked(&handle, |c, g, fx| {
            if g.is(GroupState::Dead) {
                return callback(Some(ResponseError::CoordinatorNotAvailable), Vec::new());
            }
            let results: Vec<_> = leaving
                .into_iter()
                .map(|m| {
                    let error = c.leave_one(g, &m, fx);
                    (m, error)
                })
                .collect();
            fx.push(Action::AfterPendingWrites {
                ctx: ctx.clone(),
                kind: "leave-group",
                group: g.group_id.clone(),
                then: Box::new(move |written| match written {
                    Ok(()) => callback(None, results),
                    Err(_) => callback(Some(ResponseError::CoordinatorNotAvailable), Vec::new()),
                }),
            });
        })
    }

    pub(super) fn leave_one(
        &self,
        g: &mut GroupMetadata,
        m: &LeavingMember,
        fx: &mut Fx,
    ) -> Option<ResponseError> {
        let reason = m.reason.as_deref().unwrap_or("not provided");
        let member_id = if m.member_id.is_empty() {
            // Administrative removal of a static member by its instance id.
            match m
                .group_instance_id
                .as_deref()
                .and_then(|i| g.current_static_member_id(i))
            {
                Some(id) => id.to_string(),
                None => return Some(ResponseError::UnknownMemberId),
            }
        } else if g.is_pending_member(&m.member_id) {
            g.remove(&m.member_id);
            Self::check_heartbeat(g, &m.member_id, fx);
            if g.is(GroupState::PreparingRebalance) {
                fx.push(Action::CheckJoin(g.group_id.clone()));
            }
            info!(target: TRACE_TARGET, group = %g.group_id, member = %m.member_id, "leave: pending member left");
            return None;
        } else {
            if let Some(error) =
                validate_current_member(g, &m.member_id, m.group_instance_id.as_deref())
            {
                return Some(error);
            }
            m.member_id.clone()
        };
        info!(target: TRACE_TARGET, group = %g.group_id, member = %member_id, reason, "leave: member left through LeaveGroup; rebalancing at once");
        let why = format!("removing member {member_id} on LeaveGroup; client reason: {reason}");
        self.remove_member_and_update_group(g, &member_id, &why, fx);
        None
    }
}
