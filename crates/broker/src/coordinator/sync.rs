//! SyncGroup: the leader hands in the assignment, which is stored in `__consumer_offsets`
//! (acks=-1, so it waits for the followers like any acks=all write) before every member's
//! SyncGroup is answered with its share (Kafka's `handleSyncGroup`).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use tracing::{info, warn};

use super::group::{GroupMetadata, GroupState};
use super::manager::store_group_error;
use super::member::{SyncCallback, SyncGroupResult};
use super::*;
use crate::request::RequestContext;

impl GroupCoordinator {
    // ------------------------------------------------------------------ SyncGroup

    /// SyncGroup (Kafka's `handleSyncGroup`). Followers wait for the leader; the leader's
    /// assignment is stored in `__consumer_offsets` and every SyncGroup is answered only
    /// once that append is replicated.
    pub fn handle_sync_group(
        &self,
        ctx: &RequestContext,
        p: SyncGroupParams,
        callback: SyncCallback,
    ) {
        if p.group_id.is_empty() {
            return callback(SyncGroupResult::error(ResponseError::InvalidGroupId));
        }
        if let Err(e) = self.manager.check_coordinator(&p.group_id) {
            return callback(SyncGroupResult::error(e));
        }
        let Some(handle) = self.group(&p.group_id) else {
            return callback(SyncGroupResult::error(ResponseError::UnknownMemberId));
        };
        self.locked(&handle, |c, g, fx| {
            if let Some(error) = validate_sync_group(g, &p) {
                return callback(SyncGroupResult::error(error));
            }
            match g.state() {
                GroupState::Empty => callback(SyncGroupResult::error(ResponseError::UnknownMemberId)),
                GroupState::PreparingRebalance => {
                    callback(SyncGroupResult::error(ResponseError::RebalanceInProgress))
                }
                GroupState::CompletingRebalance => {
                    g.set_awaiting_sync(&p.member_id, callback);
                    g.remove_pending_sync_member(&p.member_id);
                    fx.push(Action::CheckSync(g.group_id.clone()));
                    if g.is_leader(&p.member_id) {
                        c.store_leader_assignment(ctx, g, &p, fx);
                    } else {
                        info!(target: TRACE_TARGET, group = %g.group_id, member = %p.member_id, "sync: follower's SyncGroup waits for the leader's assignment");
                    }
                }
                GroupState::Stable => {
                    // The assignment is stored already; the answer still waits behind the
                    // coordinator's earlier writes to the partition, as Kafka 4.4's does.
                    g.remove_pending_sync_member(&p.member_id);
                    fx.push(Action::CheckSync(g.group_id.clone()));
                    let assignment = g.get(&p.member_id).map(|m| m.assignment.clone()).unwrap_or_default();
                    let answer = SyncGroupResult {
                        protocol_type: g.protocol_type.clone(),
                        protocol_name: g.protocol_name.clone(),
                        assignment,
                        error: None,
                    };
                    fx.push(Action::AfterPendingWrites {
                        ctx: ctx.clone(),
                        kind: "sync-group",
                        group: g.group_id.clone(),
                        then: Box::new(move |written| match written {
                            Ok(()) => callback(answer),
                            Err(_) => callback(SyncGroupResult::error(ResponseError::CoordinatorNotAvailable)),
                        }),
                    });
                    c.session_heartbeat(g, &p.member_id, fx);
                }
                GroupState::Dead => callback(SyncGroupResult::error(ResponseError::CoordinatorNotAvailable)),
            }
        });
    }

    pub(super) fn store_leader_assignment(
        &self,
        ctx: &RequestContext,
        g: &mut GroupMetadata,
        p: &SyncGroupParams,
        fx: &mut Fx,
    ) {
        let members = g.member_ids();
        let by_id: HashMap<&str, &Arc<str>> = members.iter().map(|m| (&**m, m)).collect();
        let mut assignment: HashMap<Arc<str>, Bytes> = HashMap::with_capacity(members.len());
        for (member, bytes) in &p.assignments {
            // Entries for non-members are ignored, as Kafka ignores them.
            if let Some(id) = by_id.get(member.as_str()) {
                assignment.insert((*id).clone(), bytes.clone());
            }
        }
        let missing: Vec<&Arc<str>> = members
            .iter()
            .filter(|m| !assignment.contains_key(*m))
            .collect();
        if !missing.is_empty() {
            warn!(target: TRACE_TARGET, group = %g.group_id, ?missing, "sync: the leader assigned nothing to some members; they get an empty assignment");
        }
        for m in missing {
            assignment.insert(m.clone(), Bytes::new());
        }
        let tp = self.manager.topic_partition_for(&g.group_id);
        info!(
            target: TRACE_TARGET,
            group = %g.group_id, generation = g.generation_id, leader = %p.member_id, members = g.size(),
            "sync: leader's assignment received; appending the group metadata to {tp} with acks=-1, every SyncGroup waits for its replication"
        );
        let record = group_metadata_record(g, &assignment);
        let generation = g.generation_id;
        let leader = p.member_id.clone();
        let then = self.later(fx, move |c, g, fx, stored: Result<i64, ResponseError>| {
            // Another member may have joined meanwhile: only the same generation, still
            // waiting for its assignment, takes it.
            if !(g.is(GroupState::CompletingRebalance) && g.generation_id == generation) {
                return;
            }
            match stored {
                Err(e) => {
                    let error = store_group_error(e);
                    warn!(target: TRACE_TARGET, group = %g.group_id, generation, append_error = ?e, ?error, "sync: storing the assignment failed; members must rejoin");
                    c.reset_and_propagate_assignment_error(g, error, fx);
                    let why = format!("error {error:?} storing the group assignment (leader {leader})");
                    c.maybe_prepare_rebalance(g, &why, fx);
                }
                Ok(offset) => {
                    c.set_and_propagate_assignment(g, &assignment, fx);
                    let now = c.now();
                    g.transition_to(GroupState::Stable, now);
                    info!(
                        target: TRACE_TARGET,
                        group = %g.group_id, generation, offset, members = g.size(),
                        "stable: the group metadata is replicated; every SyncGroup answered with its assignment"
                    );
                }
            }
        });
        fx.push(Action::Append {
            ctx: ctx.clone(),
            group: g.group_id.clone(),
            records: vec![record],
            transaction: None,
            then,
        });
    }
}

fn validate_sync_group(g: &GroupMetadata, p: &SyncGroupParams) -> Option<ResponseError> {
    if g.is(GroupState::Dead) {
        return Some(ResponseError::CoordinatorNotAvailable);
    }
    if let Some(error) = validate_current_member(g, &p.member_id, p.group_instance_id.as_deref()) {
        return Some(error);
    }
    if p.generation_id != g.generation_id {
        return Some(ResponseError::IllegalGeneration);
    }
    let mismatch =
        |asked: &Option<String>, group: &Option<String>| asked.is_some() && asked != group;
    if mismatch(&p.protocol_type, &g.protocol_type) || mismatch(&p.protocol_name, &g.protocol_name)
    {
        return Some(ResponseError::InconsistentGroupProtocol);
    }
    None
}
