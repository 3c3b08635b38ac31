//! JoinGroup and the rebalance it starts: new and known members joining, static members
//! rejoining, the group moving to PreparingRebalance, and the DelayedJoin completing the
//! join phase (Kafka's `handleJoinGroup`, `prepareRebalance`, `onCompleteJoin`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use tracing::{info, warn};

use super::delayed::{DelayedJoin, DelayedRebalance, DelayedSync, InitialDelayedJoin, MemberKey};
use super::group::{GroupMetadata, GroupState};
use super::manager::store_group_error;
use super::member::{JoinCallback, JoinGroupResult, MemberMetadata, SyncGroupResult};
use super::*;
use crate::request::RequestContext;

impl GroupCoordinator {
    // ------------------------------------------------------------------ JoinGroup

    /// JoinGroup (Kafka's `handleJoinGroup`). The answer goes to `callback`: at once, or
    /// when the rebalance completes.
    pub fn handle_join_group(
        &self,
        ctx: &RequestContext,
        p: JoinGroupParams,
        callback: JoinCallback,
    ) {
        if p.group_id.is_empty() {
            return callback(JoinGroupResult::error(
                &p.member_id,
                ResponseError::InvalidGroupId,
            ));
        }
        if let Err(e) = self.manager.check_coordinator(&p.group_id) {
            return callback(JoinGroupResult::error(&p.member_id, e));
        }
        // What the group keeps and shows back to any client at any version must fit an
        // int16-length string; a group.instance.id also becomes part of a member id, and
        // Kafka's own client allows at most 249 characters for it.
        let too_long = |s: &str| s.len() > i16::MAX as usize;
        if p.group_instance_id
            .as_deref()
            .is_some_and(|i| i.len() > MAX_GROUP_INSTANCE_ID_LEN)
            || too_long(&p.protocol_type)
            || p.protocols.iter().any(|(name, _)| too_long(name))
        {
            return callback(JoinGroupResult::error(
                &p.member_id,
                ResponseError::InvalidRequest,
            ));
        }
        if p.session_timeout_ms < self.config.min_session_timeout_ms
            || p.session_timeout_ms > self.config.max_session_timeout_ms
        {
            return callback(JoinGroupResult::error(
                &p.member_id,
                ResponseError::InvalidSessionTimeout,
            ));
        }
        let is_unknown = p.member_id.is_empty();
        let handle = match self.get_or_create(&p.group_id, is_unknown) {
            Ok(Some(handle)) => handle,
            Ok(None) => {
                return callback(JoinGroupResult::error(
                    &p.member_id,
                    ResponseError::UnknownMemberId,
                ))
            }
            Err(e) => return callback(JoinGroupResult::error(&p.member_id, e)),
        };
        self.locked(&handle, |c, g, fx| {
            if !c.accept_joining_member(g, &p.member_id) {
                if g.remove(&p.member_id).is_some() {
                    Self::check_heartbeat(g, &p.member_id, fx);
                }
                info!(target: TRACE_TARGET, group = %g.group_id, limit = c.config.max_size, "JoinGroup refused: group.max.size reached");
                callback(JoinGroupResult::error("", ResponseError::GroupMaxSizeReached));
            } else if is_unknown {
                c.do_new_member_join_group(ctx, g, p, callback, fx);
            } else {
                c.do_current_member_join_group(g, p, callback, fx);
            }
            if g.is(GroupState::PreparingRebalance) {
                fx.push(Action::CheckJoin(g.group_id.clone()));
            }
        });
    }

    /// Kafka's `acceptJoiningMember`: room for this member within `group.max.size`?
    pub(super) fn accept_joining_member(&self, g: &GroupMetadata, member_id: &str) -> bool {
        match g.state() {
            GroupState::Empty | GroupState::Dead => true,
            GroupState::PreparingRebalance => {
                g.get(member_id)
                    .is_some_and(MemberMetadata::is_awaiting_join)
                    || g.num_awaiting_join() < self.config.max_size
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                g.has(member_id) || g.size() < self.config.max_size
            }
        }
    }

    pub(super) fn do_new_member_join_group(
        &self,
        ctx: &RequestContext,
        g: &mut GroupMetadata,
        p: JoinGroupParams,
        callback: JoinCallback,
        fx: &mut Fx,
    ) {
        if g.is(GroupState::Dead) {
            return callback(JoinGroupResult::error(
                "",
                ResponseError::CoordinatorNotAvailable,
            ));
        }
        if !g.supports_protocols(&p.protocol_type, &p.protocols) {
            return callback(JoinGroupResult::error(
                "",
                ResponseError::InconsistentGroupProtocol,
            ));
        }
        let replacing = p
            .group_instance_id
            .as_deref()
            .and_then(|i| g.current_static_member_id(i))
            .cloned();
        if replacing.is_none() && self.members.load(Ordering::Acquire) >= self.config.max_members {
            warn!(
                target: TRACE_TARGET,
                group = %g.group_id,
                limit = self.config.max_members,
                "JoinGroup refused: group.coordinator.max.members reached (GROUP_MAX_SIZE_REACHED)"
            );
            return callback(JoinGroupResult::error(
                "",
                ResponseError::GroupMaxSizeReached,
            ));
        }
        let new_member_id: Arc<str> = Arc::from(GroupMetadata::generate_member_id(
            &p.client_id,
            p.group_instance_id.as_deref(),
        ));
        match (&p.group_instance_id, replacing) {
            (Some(instance), Some(old)) => {
                info!(
                    target: TRACE_TARGET,
                    group = %g.group_id, instance, old = %old, new = %new_member_id, state = g.state().name(),
                    "static member rejoins without its member id: replacing the old id"
                );
                let instance = instance.clone();
                self.update_static_member_and_rebalance(
                    ctx,
                    g,
                    &old,
                    new_member_id,
                    &instance,
                    p,
                    callback,
                    fx,
                );
            }
            (Some(_), None) => {
                self.add_member_and_rebalance(g, new_member_id, p, callback, fx);
            }
            (None, _) if p.require_known_member_id => {
                info!(
                    target: TRACE_TARGET,
                    group = %g.group_id, member = %new_member_id, state = g.state().name(),
                    "new member: id handed out, MEMBER_ID_REQUIRED (pending until it rejoins with it)"
                );
                g.add_pending_member(new_member_id.clone());
                fx.push(Action::Heartbeat {
                    key: MemberKey {
                        group: g.group_id.clone(),
                        member: new_member_id.clone(),
                    },
                    epoch: 0,
                    timeout_ms: p.session_timeout_ms.max(0) as u64,
                    pending: true,
                });
                callback(JoinGroupResult::error(
                    &new_member_id,
                    ResponseError::MemberIdRequired,
                ));
            }
            (None, _) => self.add_member_and_rebalance(g, new_member_id, p, callback, fx),
        }
    }

    pub(super) fn do_current_member_join_group(
        &self,
        g: &mut GroupMetadata,
        p: JoinGroupParams,
        callback: JoinCallback,
        fx: &mut Fx,
    ) {
        let member_id = p.member_id.clone();
        if g.is(GroupState::Dead) {
            return callback(JoinGroupResult::error(
                &member_id,
                ResponseError::CoordinatorNotAvailable,
            ));
        }
        if !g.supports_protocols(&p.protocol_type, &p.protocols) {
            return callback(JoinGroupResult::error(
                &member_id,
                ResponseError::InconsistentGroupProtocol,
            ));
        }
        if g.is_pending_member(&member_id) {
            if p.group_instance_id.is_some() {
                // Kafka treats this as impossible: pending members are never static.
                return callback(JoinGroupResult::error(
                    &member_id,
                    ResponseError::UnknownMemberId,
                ));
            }
            info!(target: TRACE_TARGET, group = %g.group_id, member = %member_id, "pending member rejoins with its id");
            let id: Arc<str> = Arc::from(member_id.as_str());
            return self.add_member_and_rebalance(g, id, p, callback, fx);
        }
        if let Some(error) = validate_current_member(g, &member_id, p.group_instance_id.as_deref())
        {
            return callback(JoinGroupResult::error(&member_id, error));
        }
        let reason = p.reason.clone().unwrap_or_else(|| "not provided".into());
        let matches = g.get(&member_id).is_some_and(|m| m.matches(&p.protocols));
        match g.state() {
            GroupState::PreparingRebalance => {
                let why = format!(
                    "member {member_id} rejoins during PreparingRebalance; client reason: {reason}"
                );
                self.update_member_and_rebalance(g, &member_id, p, callback, &why, fx);
            }
            GroupState::CompletingRebalance if matches => {
                // It lost its JoinGroup response: answer again for this generation.
                callback(g.join_result(&member_id, true));
            }
            GroupState::CompletingRebalance => {
                let why = format!("member {member_id} changed its metadata during CompletingRebalance; client reason: {reason}");
                self.update_member_and_rebalance(g, &member_id, p, callback, &why, fx);
            }
            GroupState::Stable if g.is_leader(&member_id) || !matches => {
                // The leader rejoining forces a rebalance (it may have seen topic metadata
                // change); so does a member with new metadata.
                let why = if matches {
                    format!("leader {member_id} rejoins a stable group; client reason: {reason}")
                } else {
                    format!("member {member_id} changed its metadata; client reason: {reason}")
                };
                self.update_member_and_rebalance(g, &member_id, p, callback, &why, fx);
            }
            GroupState::Stable => callback(g.join_result(&member_id, false)),
            GroupState::Empty | GroupState::Dead => callback(JoinGroupResult::error(
                &member_id,
                ResponseError::UnknownMemberId,
            )),
        }
    }

    pub(super) fn add_member_and_rebalance(
        &self,
        g: &mut GroupMetadata,
        member_id: Arc<str>,
        p: JoinGroupParams,
        callback: JoinCallback,
        fx: &mut Fx,
    ) {
        let member = MemberMetadata::joining(member_id.clone(), &p);
        if g.is(GroupState::PreparingRebalance) && g.generation_id == 0 {
            g.new_member_added = true;
        }
        g.add(member, Some(callback));
        info!(
            target: TRACE_TARGET,
            group = %g.group_id, member = %member_id, client = %p.client_id,
            instance = ?p.group_instance_id, session_timeout_ms = p.session_timeout_ms,
            rebalance_timeout_ms = p.rebalance_timeout_ms, state = g.state().name(),
            "join: member added, its JoinGroup waits for the rebalance"
        );
        // A new member cannot heartbeat before it has its id: its first JoinGroup is
        // bounded by Kafka's new-member join timeout instead of the session timeout.
        self.schedule_heartbeat(g, &member_id, NEW_MEMBER_JOIN_TIMEOUT_MS, fx);
        let reason = format!(
            "adding new member {member_id} with group instance id {:?}; client reason: {}",
            p.group_instance_id,
            p.reason.as_deref().unwrap_or("not provided")
        );
        self.maybe_prepare_rebalance(g, &reason, fx);
    }

    pub(super) fn update_member_and_rebalance(
        &self,
        g: &mut GroupMetadata,
        member_id: &str,
        p: JoinGroupParams,
        callback: JoinCallback,
        reason: &str,
        fx: &mut Fx,
    ) {
        g.update_member(
            member_id,
            p.protocols,
            p.rebalance_timeout_ms,
            p.session_timeout_ms,
            Some(callback),
        );
        self.maybe_prepare_rebalance(g, reason, fx);
    }

    /// A static member came back without its member id: it takes over its old entry.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn update_static_member_and_rebalance(
        &self,
        ctx: &RequestContext,
        g: &mut GroupMetadata,
        old_member_id: &Arc<str>,
        new_member_id: Arc<str>,
        instance: &str,
        p: JoinGroupParams,
        callback: JoinCallback,
        fx: &mut Fx,
    ) {
        let current_leader = g.leader_id().map(|l| l.to_string()).unwrap_or_default();
        if !g.replace_static_member(instance, old_member_id, new_member_id.clone()) {
            return callback(JoinGroupResult::error("", ResponseError::UnknownMemberId));
        }
        self.session_heartbeat(g, &new_member_id, fx);
        let (old_protocols, old_rebalance_timeout, old_session_timeout) = match g
            .get(&new_member_id)
        {
            Some(m) => (
                m.supported_protocols.clone(),
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
            ),
            None => return callback(JoinGroupResult::error("", ResponseError::UnknownMemberId)),
        };
        g.update_member(
            &new_member_id,
            p.protocols,
            p.rebalance_timeout_ms,
            p.session_timeout_ms,
            Some(callback),
        );
        match g.state() {
            GroupState::Stable => {
                if g.select_protocol() != g.protocol_name {
                    let why = format!("static member {new_member_id} (instance {instance}) rejoined with protocols that change the group's protocol");
                    return self.maybe_prepare_rebalance(g, &why, fx);
                }
                info!(
                    target: TRACE_TARGET, group = %g.group_id, member = %new_member_id, instance,
                    "static member rejoins a stable group without changing its protocol: no rebalance; storing its new id"
                );
                let assignments: HashMap<Arc<str>, Bytes> = g
                    .members()
                    .map(|m| (m.member_id.clone(), m.assignment.clone()))
                    .collect();
                let record = group_metadata_record(g, &assignments);
                let old = old_member_id.clone();
                let new = new_member_id.clone();
                let instance = instance.to_string();
                let skip = p.support_skipping_assignment;
                let then = self.later(fx, move |c, g, fx, stored: Result<i64, ResponseError>| {
                    match stored {
                        Err(e) => {
                            let error = store_group_error(e);
                            warn!(target: TRACE_TARGET, group = %g.group_id, member = %new, ?error, "could not store the static member's new id: reverting to the old one");
                            let callback = g.get_mut(&new).and_then(|m| m.awaiting_join.take());
                            g.update_member(&new, old_protocols, old_rebalance_timeout, old_session_timeout, None);
                            if g.current_static_member_id(&instance) == Some(&new) {
                                g.replace_static_member(&instance, &new, old.clone());
                                c.session_heartbeat(g, &old, fx);
                            }
                            if let Some(callback) = callback {
                                let mut result = g.join_result("", false);
                                result.leader_id = current_leader;
                                result.error = Some(error);
                                callback(result);
                            }
                        }
                        Ok(_) if skip => {
                            // JoinGroup v9+: the leader learns it leads, but must not reassign.
                            let is_leader = g.is_leader(&new);
                            let mut result = g.join_result(&new, true);
                            result.skip_assignment = is_leader;
                            g.maybe_invoke_join_callback(&new, result);
                        }
                        Ok(_) => {
                            // Before v9: answer with the old leader id, so that a rejoining
                            // leader does not compute an assignment a stable group would
                            // never hand out.
                            let mut result = g.join_result(&new, false);
                            result.leader_id = current_leader;
                            g.maybe_invoke_join_callback(&new, result);
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
            GroupState::CompletingRebalance => {
                // The leader may already have assigned the old id: rebalance.
                let why = format!("static member {new_member_id} (instance {instance}) rejoined during CompletingRebalance");
                self.prepare_rebalance(g, &why, fx);
            }
            GroupState::PreparingRebalance => {}
            GroupState::Empty | GroupState::Dead => {
                g.maybe_invoke_join_callback(
                    &new_member_id,
                    JoinGroupResult::error("", ResponseError::UnknownMemberId),
                );
            }
        }
    }

    // ------------------------------------------------------------------ rebalances

    pub(super) fn maybe_prepare_rebalance(&self, g: &mut GroupMetadata, reason: &str, fx: &mut Fx) {
        if g.can_rebalance() {
            self.prepare_rebalance(g, reason, fx);
        }
    }

    /// Kafka's `prepareRebalance`: members waiting for their assignment are sent back to
    /// rejoin, and a DelayedJoin (an InitialDelayedJoin for an Empty group) is parked.
    pub(super) fn prepare_rebalance(&self, g: &mut GroupMetadata, reason: &str, fx: &mut Fx) {
        if g.is(GroupState::CompletingRebalance) {
            self.reset_and_propagate_assignment_error(g, ResponseError::RebalanceInProgress, fx);
        }
        g.clear_pending_sync_members();
        fx.push(Action::CheckSync(g.group_id.clone()));
        let rebalance_timeout = g.rebalance_timeout_ms() as u64;
        let from = g.state();
        g.rebalance += 1;
        let op = if g.is(GroupState::Empty) {
            let delay = self.config.initial_rebalance_delay_ms;
            DelayedRebalance::InitialJoin(InitialDelayedJoin {
                coordinator: self.ops(),
                group: g.group_id.clone(),
                rebalance: g.rebalance,
                configured_delay_ms: delay,
                delay_ms: delay,
                remaining_ms: rebalance_timeout.saturating_sub(delay),
            })
        } else {
            DelayedRebalance::Join(DelayedJoin {
                coordinator: self.ops(),
                group: g.group_id.clone(),
                rebalance: g.rebalance,
                timeout_ms: rebalance_timeout,
            })
        };
        let now = self.now();
        g.transition_to(GroupState::PreparingRebalance, now);
        info!(
            target: TRACE_TARGET,
            group = %g.group_id, from = from.name(), generation = g.generation_id,
            offsets_partition = %self.manager.topic_partition_for(&g.group_id),
            parked = op.kind(), timeout_ms = op.timeout_ms(), %reason,
            "rebalance: PreparingRebalance, JoinGroups wait in the Rebalance purgatory"
        );
        fx.push(Action::Park(op));
    }

    /// Kafka's `removeMemberAndUpdateGroup`.
    pub(super) fn remove_member_and_update_group(
        &self,
        g: &mut GroupMetadata,
        member_id: &str,
        reason: &str,
        fx: &mut Fx,
    ) {
        g.maybe_invoke_join_callback(
            member_id,
            JoinGroupResult::error("", ResponseError::UnknownMemberId),
        );
        g.remove(member_id);
        Self::check_heartbeat(g, member_id, fx);
        match g.state() {
            GroupState::Dead | GroupState::Empty => {}
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance(g, reason, fx)
            }
            GroupState::PreparingRebalance => fx.push(Action::CheckJoin(g.group_id.clone())),
        }
    }

    /// Kafka's `onCompleteJoin`: the join phase is over, by all members rejoining or by
    /// the DelayedJoin's timeout. Whoever did not rejoin is removed (static members keep
    /// their place), and the next generation starts.
    pub(super) fn complete_join(&self, g: &mut GroupMetadata, rebalance: u64, fx: &mut Fx) {
        if g.rebalance != rebalance || !g.is(GroupState::PreparingRebalance) {
            return;
        }
        let expired = !g.has_all_members_joined();
        let failed: Vec<Arc<str>> = g
            .not_yet_rejoined_members()
            .into_iter()
            .filter(|m| g.get(m).is_some_and(|m| m.group_instance_id.is_none()))
            .collect();
        for member in &failed {
            g.remove(member);
            Self::check_heartbeat(g, member, fx);
        }
        // Pending members (ids handed out with MEMBER_ID_REQUIRED, not yet used) stay: the
        // next rebalance takes them in when they come back, and their own pending
        // DelayedHeartbeat drops those that never do, as in Kafka.
        if expired {
            info!(
                target: TRACE_TARGET,
                group = %g.group_id, removed = ?failed, pending = g.pending_member_count(),
                "rebalance: join phase over without everyone (its delay or timeout passed); members that did not rejoin are removed"
            );
        } else {
            info!(target: TRACE_TARGET, group = %g.group_id, members = g.size(), "rebalance: join phase over, every member rejoined");
        }
        if !g.maybe_elect_new_joined_leader() && g.size() > 0 {
            // Only static members that have not rejoined are left: wait for them again.
            warn!(target: TRACE_TARGET, group = %g.group_id, "rebalance: no member rejoined; waiting another rebalance timeout");
            fx.push(Action::Park(DelayedRebalance::Join(DelayedJoin {
                coordinator: self.ops(),
                group: g.group_id.clone(),
                rebalance: g.rebalance,
                timeout_ms: g.rebalance_timeout_ms() as u64,
            })));
            return;
        }
        let now = self.now();
        g.init_next_generation(now);
        if g.is(GroupState::Empty) {
            info!(target: TRACE_TARGET, group = %g.group_id, generation = g.generation_id, "rebalance: no members left; the group is Empty");
            let record = group_metadata_record(g, &HashMap::new());
            let group = g.group_id.clone();
            fx.push(Action::Append {
                ctx: RequestContext::internal("group-coordinator"),
                group: g.group_id.clone(),
                records: vec![record],
                transaction: None,
                then: Box::new(move |stored| {
                    if let Err(e) = stored {
                        warn!(target: TRACE_TARGET, %group, error = ?e, "could not store the empty group's metadata");
                    }
                }),
            });
            return;
        }
        info!(
            target: TRACE_TARGET,
            group = %g.group_id, generation = g.generation_id, protocol = ?g.protocol_name,
            leader = ?g.leader_id(), members = g.size(),
            "rebalance: CompletingRebalance, JoinGroups answered (the leader got the member list); a DelayedSync waits for every SyncGroup"
        );
        for member_id in g.member_ids() {
            let result = g.join_result(&member_id, true);
            g.maybe_invoke_join_callback(&member_id, result);
            self.session_heartbeat(g, &member_id, fx);
            if let Some(m) = g.get_mut(&member_id) {
                m.is_new = false;
            }
            g.add_pending_sync_member(member_id);
        }
        fx.push(Action::Park(DelayedRebalance::Sync(DelayedSync {
            coordinator: self.ops(),
            group: g.group_id.clone(),
            generation: g.generation_id,
            timeout_ms: g.rebalance_timeout_ms() as u64,
        })));
    }

    pub(super) fn reset_and_propagate_assignment_error(
        &self,
        g: &mut GroupMetadata,
        error: ResponseError,
        fx: &mut Fx,
    ) {
        for member_id in g.member_ids() {
            if let Some(m) = g.get_mut(&member_id) {
                m.assignment = Bytes::new();
            }
        }
        self.propagate_assignment(g, Some(error), fx);
    }

    pub(super) fn set_and_propagate_assignment(
        &self,
        g: &mut GroupMetadata,
        assignment: &HashMap<Arc<str>, Bytes>,
        fx: &mut Fx,
    ) {
        for member_id in g.member_ids() {
            if let Some(m) = g.get_mut(&member_id) {
                m.assignment = assignment.get(&member_id).cloned().unwrap_or_default();
            }
        }
        self.propagate_assignment(g, None, fx);
    }

    /// Answers every parked SyncGroup (with its assignment, or the error) and restarts the
    /// session of each member answered.
    pub(super) fn propagate_assignment(
        &self,
        g: &mut GroupMetadata,
        error: Option<ResponseError>,
        fx: &mut Fx,
    ) {
        for member_id in g.member_ids() {
            let result = match (error, g.get(&member_id)) {
                (Some(e), _) => SyncGroupResult::error(e),
                (None, Some(m)) => SyncGroupResult {
                    protocol_type: g.protocol_type.clone(),
                    protocol_name: g.protocol_name.clone(),
                    assignment: m.assignment.clone(),
                    error: None,
                },
                (None, None) => continue,
            };
            if g.maybe_invoke_sync_callback(&member_id, result) {
                self.session_heartbeat(g, &member_id, fx);
            }
        }
    }
}
