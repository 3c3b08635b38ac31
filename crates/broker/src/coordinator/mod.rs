//! The group coordinator: Kafka's classic `GroupCoordinator` (consumer groups before
//! KIP-848), on the broker's timing wheel.
//!
//! Consumers in a group share a topic's partitions. The coordinator keeps each group's
//! membership and runs its *rebalances*: when a member joins, leaves, changes what it
//! subscribes to, or stops heartbeating, every member must rejoin (JoinGroup), one of them —
//! the leader — computes who consumes which partition, and hands that assignment back in its
//! SyncGroup, which the coordinator stores in `__consumer_offsets` and passes on to the
//! others. Members then heartbeat, and commit the offsets they consumed up to.
//!
//! Waiting is what this is about, and every wait is a delayed operation in a purgatory on
//! the same timer as the produce and fetch purgatories ([`crate::delayed::group`]):
//!
//! ```text
//!  JoinGroup ──► PreparingRebalance: parked in a DelayedJoin (Rebalance purgatory) until all
//!                members rejoined or the largest rebalance timeout passed (an Empty group
//!                waits group.initial.rebalance.delay.ms first: InitialDelayedJoin)
//!            ──► CompletingRebalance: JoinGroup answered (the leader gets the member list);
//!                DelayedSync waits for every member's SyncGroup
//!  SyncGroup ──► followers parked until the leader's; the leader's assignment is appended to
//!                __consumer_offsets with acks=-1 — a DelayedProduce in the produce purgatory —
//!                and only when the followers have replicated it are the SyncGroups answered
//!            ──► Stable
//!  Heartbeat ──► completes the member's DelayedHeartbeat (Heartbeat purgatory) and parks
//!                the next, one session timeout away; if one expires, the member is removed
//!                and the group rebalances
//!  OffsetCommit ► appended with acks=-1, answered (and the offset cache updated) once
//!                 replicated: a commit waits for the followers like an acks=all produce
//! ```
//!
//! Locking: each group has its own mutex, and every state change happens under it
//! ([`GroupCoordinator::locked`]). What must happen *outside* it — parking or completing
//! delayed operations, appending to the log, whose callbacks take the group lock again — is
//! collected as [`Action`]s while the lock is held and run right after it is released. So a
//! purgatory never calls back into a group whose lock its caller holds, and no lock is ever
//! taken twice. Response callbacks, which only send on a channel, run under the lock.
//!
//! Layers: handlers call this module; it appends through the replica manager
//! ([`manager`]); the delayed operations below it call back through
//! [`GroupOperations`], which it implements. Its pieces: [`group`] and [`member`] (the state
//! machine, pure), [`records`] (Kafka's `__consumer_offsets` schemas), [`manager`] (the
//! log), this file (the rules that tie them together, named after Kafka's methods).

pub mod group;
pub mod manager;
pub mod member;
pub mod records;
mod snapshot;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use parking_lot::{Mutex, RwLock};
use timewheel::{Purgatory, PurgatoryConfig, Timer};
use tracing::{info, warn};

use crate::delayed::group::Coordinator;
use crate::delayed::{
    DelayedHeartbeat, DelayedJoin, DelayedRebalance, DelayedSync, GroupKey, GroupOperations,
    InitialDelayedJoin, MemberKey,
};
use crate::replica_manager::ReplicaManager;
use crate::request::RequestContext;
use group::{GroupMetadata, GroupState, OffsetAndMetadata, OffsetKey};
use manager::{offset_commit_error, store_group_error, GroupMetadataManager};
use member::{JoinCallback, JoinGroupResult, MemberMetadata, SyncCallback, SyncGroupResult};
pub use snapshot::{GroupSnapshot, GroupsSnapshot};

/// Tracing target of the rebalance story: joins, delayed joins completing or expiring,
/// syncs, stable generations, member expiries.
pub const TRACE_TARGET: &str = "purgatory::group";

/// Kafka's `NewMemberJoinTimeoutMs`: a new member's first JoinGroup is parked at most this
/// long (it cannot heartbeat before it has an id).
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: u64 = 5 * 60 * 1000;

/// The longest `group.instance.id` accepted (Kafka's client-side limit, as for topic names).
pub const MAX_GROUP_INSTANCE_ID_LEN: usize = 249;

/// Kafka's `authorizedOperations` for a group when every operation is allowed: READ (3),
/// DELETE (6) and DESCRIBE (8).
pub const GROUP_AUTHORIZED_OPERATIONS: i32 = (1 << 3) | (1 << 6) | (1 << 8);

/// The coordinator's settings (Kafka's `GroupConfig` plus this broker's caps).
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// `group.min.session.timeout.ms`.
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`.
    pub max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms`.
    pub initial_rebalance_delay_ms: u64,
    /// `group.max.size`.
    pub max_size: usize,
    /// `offset.metadata.max.bytes`.
    pub offset_metadata_max_bytes: usize,
    /// `group.coordinator.max.groups` (ours).
    pub max_groups: usize,
    /// `group.coordinator.max.members` (ours).
    pub max_members: usize,
    /// `group.coordinator.max.committed.offsets` (ours).
    pub max_committed_offsets: usize,
}

impl GroupConfig {
    fn from_broker(c: &crate::config::BrokerConfig) -> Self {
        GroupConfig {
            min_session_timeout_ms: c.group_min_session_timeout_ms,
            max_session_timeout_ms: c.group_max_session_timeout_ms,
            initial_rebalance_delay_ms: c.group_initial_rebalance_delay_ms.max(0) as u64,
            max_size: c.group_max_size.max(1) as usize,
            offset_metadata_max_bytes: c.offset_metadata_max_bytes,
            max_groups: c.group_coordinator_max_groups,
            max_members: c.group_coordinator_max_members,
            max_committed_offsets: c.group_coordinator_max_committed_offsets,
        }
    }
}

/// A JoinGroup, as the handler hands it in.
#[derive(Debug, Clone)]
pub struct JoinGroupParams {
    /// The group.
    pub group_id: String,
    /// "" for a member without an id yet.
    pub member_id: String,
    /// `group.instance.id` (v5+).
    pub group_instance_id: Option<String>,
    /// JoinGroup v4+ without an instance id: a new member first gets MEMBER_ID_REQUIRED.
    pub require_known_member_id: bool,
    /// JoinGroup v9+: a static leader rejoining a stable group is told to skip assignment.
    pub support_skipping_assignment: bool,
    /// `client.id`.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
    /// `rebalance.timeout.ms` (the session timeout for v0).
    pub rebalance_timeout_ms: i32,
    /// `session.timeout.ms`.
    pub session_timeout_ms: i32,
    /// `consumer`, ...
    pub protocol_type: String,
    /// The protocols the member supports, by preference, with their metadata.
    pub protocols: Vec<(String, Bytes)>,
    /// Why it (re)joins (v8+).
    pub reason: Option<String>,
}

/// A SyncGroup, as the handler hands it in.
#[derive(Debug, Clone)]
pub struct SyncGroupParams {
    /// The group.
    pub group_id: String,
    /// The generation the member thinks it is in.
    pub generation_id: i32,
    /// The member.
    pub member_id: String,
    /// `group.instance.id`.
    pub group_instance_id: Option<String>,
    /// v5+: must match the group's.
    pub protocol_type: Option<String>,
    /// v5+: must match the generation's.
    pub protocol_name: Option<String>,
    /// The leader's assignment, per member.
    pub assignments: Vec<(String, Bytes)>,
}

/// One member named in a LeaveGroup.
#[derive(Debug, Clone)]
pub struct LeavingMember {
    /// Member id ("" to name a static member by its instance id).
    pub member_id: String,
    /// `group.instance.id`.
    pub group_instance_id: Option<String>,
    /// Why it leaves (v5+).
    pub reason: Option<String>,
}

/// One partition of an OffsetFetch answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedOffset {
    /// The committed offset, -1 if none.
    pub offset: i64,
    /// Its leader epoch, -1 if none.
    pub leader_epoch: i32,
    /// Its metadata ("" if none).
    pub metadata: String,
    /// UNSTABLE_OFFSET_COMMIT while a commit of it is being replicated (`require_stable`).
    pub error: Option<ResponseError>,
}

impl FetchedOffset {
    fn none(error: Option<ResponseError>) -> Self {
        FetchedOffset {
            offset: -1,
            leader_epoch: -1,
            metadata: String::new(),
            error,
        }
    }
}

/// A group as ListGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOverview {
    /// Group id.
    pub group_id: String,
    /// Protocol type ("" if none yet).
    pub protocol_type: String,
    /// State name.
    pub state: &'static str,
}

/// A group as DescribeGroups shows it.
#[derive(Debug, Clone, Default)]
pub struct GroupDescription {
    /// Error, if the group could not be described.
    pub error: Option<ResponseError>,
    /// Why (DescribeGroups v6).
    pub error_message: Option<String>,
    /// State name.
    pub state: String,
    /// Protocol type.
    pub protocol_type: String,
    /// The generation's protocol ("" unless Stable).
    pub protocol: String,
    /// Members (metadata and assignment only when Stable).
    pub members: Vec<MemberDescription>,
}

/// A member as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct MemberDescription {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id`.
    pub group_instance_id: Option<String>,
    /// `client.id`.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Its subscription for the group's protocol.
    pub metadata: Bytes,
    /// Its assignment.
    pub assignment: Bytes,
}

/// Per-partition results of an OffsetCommit.
pub type CommitCallback = Box<dyn FnOnce(Vec<(OffsetKey, Option<ResponseError>)>) + Send>;

/// Something to do once the group lock is released.
enum Action {
    /// Complete the member's current DelayedHeartbeat and park the next.
    Heartbeat {
        key: MemberKey,
        epoch: u64,
        timeout_ms: u64,
        pending: bool,
    },
    /// Let the member's DelayedHeartbeat see that it left (or joined, if pending).
    CheckHeartbeat(MemberKey),
    /// Park a DelayedJoin / InitialDelayedJoin / DelayedSync.
    Park(DelayedRebalance),
    /// Let the group's DelayedJoin look again.
    CheckJoin(Arc<str>),
    /// Let the group's DelayedSync look again.
    CheckSync(Arc<str>),
    /// Append to `__consumer_offsets` (acks=-1) and call back.
    Append {
        ctx: RequestContext,
        group: Arc<str>,
        records: Vec<(Bytes, Option<Bytes>)>,
        then: manager::AppendCallback,
    },
}

/// One group and its lock.
pub struct GroupHandle {
    /// The group id.
    pub id: Arc<str>,
    state: Mutex<GroupMetadata>,
}

/// The group coordinator. One per broker, found through the replica manager
/// ([`GroupCoordinator::of`]).
pub struct GroupCoordinator {
    me: Weak<GroupCoordinator>,
    timer: Timer,
    config: GroupConfig,
    /// The log side: `__consumer_offsets`.
    pub manager: GroupMetadataManager,
    groups: RwLock<BTreeMap<Arc<str>, Arc<GroupHandle>>>,
    /// Kafka's "Rebalance" purgatory: DelayedJoin, InitialDelayedJoin, DelayedSync.
    pub rebalance_purgatory: Purgatory<GroupKey, DelayedRebalance>,
    /// Kafka's "Heartbeat" purgatory: one DelayedHeartbeat per member.
    pub heartbeat_purgatory: Purgatory<MemberKey, DelayedHeartbeat>,
    members: AtomicUsize,
    committed_offsets: AtomicUsize,
}

/// The actions a locked section collects, and the group they belong to.
struct Fx {
    handle: Arc<GroupHandle>,
    actions: Vec<Action>,
}

impl Fx {
    fn push(&mut self, action: Action) {
        self.actions.push(action);
    }
}

impl GroupCoordinator {
    /// The broker's coordinator, created on first use. `None` only if the replica
    /// manager's coordinator slot holds something else (never, in this crate).
    pub fn of(rm: &Arc<ReplicaManager>) -> Option<Arc<GroupCoordinator>> {
        rm.coordinator_or_init(|| GroupCoordinator::new(rm))
    }

    /// The broker's coordinator if it has been created (the broker creates it at start-up).
    pub fn existing(rm: &ReplicaManager) -> Option<Arc<GroupCoordinator>> {
        rm.coordinator()
    }

    /// A coordinator appending through `rm`, on `rm`'s timer.
    pub fn new(rm: &Arc<ReplicaManager>) -> Arc<GroupCoordinator> {
        let purgatory_config = PurgatoryConfig {
            purge_interval: rm.config.purge_interval_requests,
        };
        Arc::new_cyclic(|me| GroupCoordinator {
            me: me.clone(),
            timer: rm.timer.clone(),
            config: GroupConfig::from_broker(&rm.config),
            manager: GroupMetadataManager::new(rm),
            groups: RwLock::new(BTreeMap::new()),
            rebalance_purgatory: Purgatory::new("Rebalance", rm.timer.clone(), purgatory_config),
            heartbeat_purgatory: Purgatory::new("Heartbeat", rm.timer.clone(), purgatory_config),
            members: AtomicUsize::new(0),
            committed_offsets: AtomicUsize::new(0),
        })
    }

    fn ops(&self) -> Coordinator {
        self.me.clone()
    }

    fn now(&self) -> u64 {
        self.timer.now_ms()
    }

    /// FindCoordinator: this broker coordinates every group; `__consumer_offsets` is
    /// created now if it does not exist yet.
    pub fn find_coordinator(&self) -> Result<(), String> {
        self.manager.ensure_offsets_topic()
    }

    // ------------------------------------------------------------------ groups and locks

    /// A group by id.
    pub fn group(&self, group_id: &str) -> Option<Arc<GroupHandle>> {
        self.groups.read().get(group_id).cloned()
    }

    /// A group by id, created Empty if it does not exist (and `create`): then
    /// `__consumer_offsets` is created too, and the group cap applies.
    fn get_or_create(
        &self,
        group_id: &str,
        create: bool,
    ) -> Result<Option<Arc<GroupHandle>>, ResponseError> {
        if let Some(group) = self.group(group_id) {
            return Ok(Some(group));
        }
        if !create {
            return Ok(None);
        }
        if group_id.len() > i16::MAX as usize {
            // Its records in __consumer_offsets could not hold it.
            return Err(ResponseError::InvalidGroupId);
        }
        if let Err(why) = self.manager.ensure_offsets_topic() {
            warn!(target: TRACE_TARGET, group = group_id, %why, "cannot create the group");
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        let mut groups = self.groups.write();
        if let Some(group) = groups.get(group_id) {
            return Ok(Some(group.clone()));
        }
        if groups.len() >= self.config.max_groups {
            warn!(
                target: TRACE_TARGET,
                group = group_id,
                limit = self.config.max_groups,
                "refusing a new group: group.coordinator.max.groups reached (COORDINATOR_NOT_AVAILABLE)"
            );
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        let id: Arc<str> = Arc::from(group_id);
        let handle = Arc::new(GroupHandle {
            id: id.clone(),
            state: Mutex::new(GroupMetadata::new(id.clone(), self.now())),
        });
        groups.insert(id, handle.clone());
        Ok(Some(handle))
    }

    /// Runs `f` on the group under its lock, keeps the broker-wide counts, drops the group
    /// if it ended Dead or vacant, then runs the actions `f` collected — after the lock is
    /// released.
    fn locked<T>(
        &self,
        handle: &Arc<GroupHandle>,
        f: impl FnOnce(&Self, &mut GroupMetadata, &mut Fx) -> T,
    ) -> T {
        let mut fx = Fx {
            handle: handle.clone(),
            actions: Vec::new(),
        };
        let (out, drop_group) = {
            let mut g = handle.state.lock();
            let (members, offsets) = (g.member_count(), g.offset_count());
            let out = f(self, &mut g, &mut fx);
            adjust(&self.members, members, g.member_count());
            adjust(&self.committed_offsets, offsets, g.offset_count());
            if g.is_vacant() {
                let now = self.now();
                g.transition_to(GroupState::Dead, now);
            }
            (out, g.is(GroupState::Dead))
        };
        if drop_group {
            let mut groups = self.groups.write();
            if groups
                .get(&handle.id)
                .is_some_and(|h| Arc::ptr_eq(h, handle))
            {
                groups.remove(&handle.id);
            }
        }
        self.run(fx.actions);
        out
    }

    /// Does what the locked section asked for, in order.
    fn run(&self, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Heartbeat {
                    key,
                    epoch,
                    timeout_ms,
                    pending,
                } => {
                    if !pending {
                        self.heartbeat_purgatory.check_and_complete(&key);
                    }
                    let op = DelayedHeartbeat {
                        coordinator: self.ops(),
                        key: key.clone(),
                        epoch,
                        pending,
                        timeout_ms,
                    };
                    self.heartbeat_purgatory
                        .try_complete_else_watch(op, timeout_ms, vec![key]);
                }
                Action::CheckHeartbeat(key) => {
                    self.heartbeat_purgatory.check_and_complete(&key);
                }
                Action::Park(op) => {
                    let (key, timeout) = (op.key(), op.timeout_ms());
                    self.rebalance_purgatory
                        .try_complete_else_watch(op, timeout, vec![key]);
                }
                Action::CheckJoin(group) => {
                    self.rebalance_purgatory
                        .check_and_complete(&GroupKey::Join(group));
                }
                Action::CheckSync(group) => {
                    self.rebalance_purgatory
                        .check_and_complete(&GroupKey::Sync(group));
                }
                Action::Append {
                    ctx,
                    group,
                    records,
                    then,
                } => self.manager.append(&ctx, &group, &records, then),
            }
        }
    }

    /// Runs `f` under the group's lock later, from a log append's callback (which may run
    /// on any thread, after the coordinator is gone: then `f` does not run).
    fn later<T: Send + 'static>(
        &self,
        fx: &Fx,
        f: impl FnOnce(&Self, &mut GroupMetadata, &mut Fx, T) + Send + 'static,
    ) -> Box<dyn FnOnce(T) + Send> {
        let me = self.me.clone();
        let handle = fx.handle.clone();
        Box::new(move |value| {
            if let Some(c) = me.upgrade() {
                c.locked(&handle, |c, g, fx| f(c, g, fx, value));
            }
        })
    }

    // ------------------------------------------------------------------ heartbeats

    /// Kafka's `completeAndScheduleNextExpiration`: the member showed it is alive; its
    /// current DelayedHeartbeat completes and the next is parked `timeout_ms` away.
    fn schedule_heartbeat(
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

    fn session_heartbeat(&self, g: &mut GroupMetadata, member_id: &str, fx: &mut Fx) {
        let timeout = g
            .get(member_id)
            .map_or(0, |m| m.session_timeout_ms.max(0) as u64);
        self.schedule_heartbeat(g, member_id, timeout, fx);
    }

    fn check_heartbeat(g: &GroupMetadata, member_id: &str, fx: &mut Fx) {
        fx.push(Action::CheckHeartbeat(MemberKey {
            group: g.group_id.clone(),
            member: Arc::from(member_id),
        }));
    }

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
    fn accept_joining_member(&self, g: &GroupMetadata, member_id: &str) -> bool {
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

    fn do_new_member_join_group(
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

    fn do_current_member_join_group(
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

    fn add_member_and_rebalance(
        &self,
        g: &mut GroupMetadata,
        member_id: Arc<str>,
        p: JoinGroupParams,
        callback: JoinCallback,
        fx: &mut Fx,
    ) {
        let member = MemberMetadata {
            member_id: member_id.clone(),
            group_instance_id: p.group_instance_id.clone(),
            client_id: p.client_id.clone(),
            client_host: p.client_host.clone(),
            rebalance_timeout_ms: p.rebalance_timeout_ms,
            session_timeout_ms: p.session_timeout_ms,
            protocol_type: p.protocol_type.clone(),
            supported_protocols: p.protocols,
            assignment: Bytes::new(),
            awaiting_join: None,
            awaiting_sync: None,
            is_new: true,
            heartbeat_epoch: 0,
            session_deadline_ms: 0,
        };
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

    fn update_member_and_rebalance(
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
    fn update_static_member_and_rebalance(
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

    fn maybe_prepare_rebalance(&self, g: &mut GroupMetadata, reason: &str, fx: &mut Fx) {
        if g.can_rebalance() {
            self.prepare_rebalance(g, reason, fx);
        }
    }

    /// Kafka's `prepareRebalance`: members waiting for their assignment are sent back to
    /// rejoin, and a DelayedJoin (an InitialDelayedJoin for an Empty group) is parked.
    fn prepare_rebalance(&self, g: &mut GroupMetadata, reason: &str, fx: &mut Fx) {
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
    fn remove_member_and_update_group(
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
    fn complete_join(&self, g: &mut GroupMetadata, rebalance: u64, fx: &mut Fx) {
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
        let mut dropped_pending = Vec::new();
        if expired {
            dropped_pending = g.take_pending_members();
            for member in &dropped_pending {
                Self::check_heartbeat(g, member, fx);
            }
        }
        if expired {
            info!(
                target: TRACE_TARGET,
                group = %g.group_id, removed = ?failed, dropped_pending = ?dropped_pending,
                "rebalance: DelayedJoin expired; members that did not rejoin are removed"
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

    fn reset_and_propagate_assignment_error(
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

    fn set_and_propagate_assignment(
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
    fn propagate_assignment(
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
                    g.remove_pending_sync_member(&p.member_id);
                    fx.push(Action::CheckSync(g.group_id.clone()));
                    let assignment = g.get(&p.member_id).map(|m| m.assignment.clone()).unwrap_or_default();
                    callback(SyncGroupResult {
                        protocol_type: g.protocol_type.clone(),
                        protocol_name: g.protocol_name.clone(),
                        assignment,
                        error: None,
                    });
                    c.session_heartbeat(g, &p.member_id, fx);
                }
                GroupState::Dead => callback(SyncGroupResult::error(ResponseError::CoordinatorNotAvailable)),
            }
        });
    }

    fn store_leader_assignment(
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
            then,
        });
    }

    // ------------------------------------------------------------------ Heartbeat

    /// Heartbeat (Kafka's `handleHeartbeat`): restarts the member's session.
    pub fn handle_heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
    ) -> Option<ResponseError> {
        if group_id.is_empty() {
            return Some(ResponseError::InvalidGroupId);
        }
        let Some(handle) = self.group(group_id) else {
            return Some(ResponseError::UnknownMemberId);
        };
        self.locked(&handle, |c, g, fx| {
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
                    c.session_heartbeat(g, member_id, fx);
                    None
                }
                GroupState::PreparingRebalance => {
                    c.session_heartbeat(g, member_id, fx);
                    Some(ResponseError::RebalanceInProgress)
                }
                GroupState::Dead => Some(ResponseError::CoordinatorNotAvailable),
            }
        })
    }

    // ------------------------------------------------------------------ LeaveGroup

    /// LeaveGroup (Kafka's `handleLeaveGroup`): each member leaves at once, and the group
    /// rebalances without it. Returns the top-level error and one result per member.
    pub fn handle_leave_group(
        &self,
        group_id: &str,
        leaving: Vec<LeavingMember>,
    ) -> (
        Option<ResponseError>,
        Vec<(LeavingMember, Option<ResponseError>)>,
    ) {
        if group_id.is_empty() {
            return (Some(ResponseError::InvalidGroupId), Vec::new());
        }
        let Some(handle) = self.group(group_id) else {
            let results = leaving
                .into_iter()
                .map(|m| (m, Some(ResponseError::UnknownMemberId)))
                .collect();
            return (None, results);
        };
        self.locked(&handle, |c, g, fx| {
            if g.is(GroupState::Dead) {
                return (Some(ResponseError::CoordinatorNotAvailable), Vec::new());
            }
            let results = leaving
                .into_iter()
                .map(|m| {
                    let error = c.leave_one(g, &m, fx);
                    (m, error)
                })
                .collect();
            (None, results)
        })
    }

    fn leave_one(
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

    // ------------------------------------------------------------------ offsets

    /// OffsetCommit (Kafka's `handleCommitOffsets`). Every partition named must exist
    /// (the handler checks); the answer comes once the commit is replicated.
    #[allow(clippy::too_many_arguments)]
    pub fn handle_commit_offsets(
        &self,
        ctx: &RequestContext,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        offsets: Vec<(OffsetKey, OffsetAndMetadata)>,
        callback: CommitCallback,
    ) {
        let fail = |offsets: Vec<(OffsetKey, OffsetAndMetadata)>, error: ResponseError| {
            offsets.into_iter().map(|(k, _)| (k, Some(error))).collect()
        };
        let handle = match self.get_or_create(group_id, generation_id < 0) {
            Ok(Some(handle)) => handle,
            // Not a group member's commit and no such group: a stale generation.
            Ok(None) => return callback(fail(offsets, ResponseError::IllegalGeneration)),
            Err(e) => return callback(fail(offsets, e)),
        };
        self.locked(&handle, |c, g, fx| {
            if let Some(error) =
                validate_offset_commit(g, generation_id, member_id, group_instance_id)
            {
                return callback(fail(offsets, error));
            }
            match g.state() {
                GroupState::Empty => c.store_offsets(ctx, g, offsets, callback, fx),
                GroupState::Stable | GroupState::PreparingRebalance => {
                    if g.has(member_id) {
                        c.session_heartbeat(g, member_id, fx);
                    }
                    c.store_offsets(ctx, g, offsets, callback, fx)
                }
                GroupState::CompletingRebalance => {
                    callback(fail(offsets, ResponseError::RebalanceInProgress))
                }
                GroupState::Dead => callback(fail(offsets, ResponseError::CoordinatorNotAvailable)),
            }
        });
    }

    /// Kafka's `storeOffsets`: append the commits (acks=-1); the cache shows them when the
    /// append completes.
    fn store_offsets(
        &self,
        ctx: &RequestContext,
        g: &mut GroupMetadata,
        offsets: Vec<(OffsetKey, OffsetAndMetadata)>,
        callback: CommitCallback,
        fx: &mut Fx,
    ) {
        let mut refused: HashMap<OffsetKey, ResponseError> = HashMap::new();
        let mut room = self
            .config
            .max_committed_offsets
            .saturating_sub(self.committed_offsets.load(Ordering::Acquire));
        let mut accepted: Vec<(OffsetKey, OffsetAndMetadata)> = Vec::new();
        for (key, offset) in &offsets {
            if offset.metadata.len() > self.config.offset_metadata_max_bytes {
                refused.insert(key.clone(), ResponseError::OffsetMetadataTooLarge);
            } else if g.offset(key).is_none() && !g.has_pending_offset_commit(key) && room == 0 {
                refused.insert(key.clone(), ResponseError::InvalidCommitOffsetSize);
            } else {
                if g.offset(key).is_none() && !g.has_pending_offset_commit(key) {
                    room -= 1;
                }
                accepted.push((key.clone(), offset.clone()));
            }
        }
        if refused
            .values()
            .any(|e| *e == ResponseError::InvalidCommitOffsetSize)
        {
            warn!(
                target: TRACE_TARGET, group = %g.group_id, limit = self.config.max_committed_offsets,
                "offset commit refused for new partitions: group.coordinator.max.committed.offsets reached (INVALID_COMMIT_OFFSET_SIZE)"
            );
        }
        let order: Vec<OffsetKey> = offsets.into_iter().map(|(k, _)| k).collect();
        if accepted.is_empty() {
            return callback(
                order
                    .into_iter()
                    .map(|k| {
                        let e = refused.get(&k).copied();
                        (k, e)
                    })
                    .collect(),
            );
        }
        g.prepare_offset_commit(&accepted);
        let group_id = g.group_id.clone();
        let records = accepted
            .iter()
            .map(|((topic, partition), o)| {
                let key = records::offset_commit_key(&group_id, topic, *partition);
                let value = records::offset_commit_value(&records::OffsetCommitValue {
                    offset: o.offset,
                    leader_epoch: o.leader_epoch,
                    metadata: o.metadata.clone(),
                    commit_timestamp: o.commit_timestamp_ms,
                });
                (key, Some(value))
            })
            .collect();
        let then = self.later(fx, move |_c, g, _fx, stored: Result<i64, ResponseError>| {
            let error = match stored {
                Ok(_) => {
                    if !g.is(GroupState::Dead) {
                        for (key, offset) in &accepted {
                            g.on_offset_commit_append(key, offset);
                        }
                    }
                    None
                }
                Err(e) => {
                    for (key, offset) in &accepted {
                        g.fail_pending_offset_write(key, offset);
                    }
                    let mapped = offset_commit_error(e);
                    info!(target: TRACE_TARGET, group = %g.group_id, append_error = ?e, error = ?mapped, "offset commit failed");
                    Some(mapped)
                }
            };
            callback(
                order
                    .into_iter()
                    .map(|k| {
                        let e = refused.get(&k).copied().or(error);
                        (k, e)
                    })
                    .collect(),
            );
        });
        fx.push(Action::Append {
            ctx: ctx.clone(),
            group: g.group_id.clone(),
            records,
            then,
        });
    }

    /// OffsetFetch (Kafka's `handleFetchOffsets`): committed offsets of the partitions
    /// asked for (or all of them), answered from the cache, whatever the group's state.
    pub fn handle_fetch_offsets(
        &self,
        group_id: &str,
        require_stable: bool,
        partitions: Option<Vec<OffsetKey>>,
    ) -> Vec<(OffsetKey, FetchedOffset)> {
        let Some(handle) = self.group(group_id) else {
            return partitions
                .unwrap_or_default()
                .into_iter()
                .map(|k| (k, FetchedOffset::none(None)))
                .collect();
        };
        let g = handle.state.lock();
        if g.is(GroupState::Dead) {
            return partitions
                .unwrap_or_default()
                .into_iter()
                .map(|k| (k, FetchedOffset::none(None)))
                .collect();
        }
        let fetched = |o: &OffsetAndMetadata| FetchedOffset {
            offset: o.offset,
            leader_epoch: o.leader_epoch,
            metadata: o.metadata.clone(),
            error: None,
        };
        match partitions {
            None => g.offsets().map(|(k, o)| (k.clone(), fetched(o))).collect(),
            Some(keys) => keys
                .into_iter()
                .map(|k| {
                    let answer = if require_stable && g.has_pending_offset_commit(&k) {
                        FetchedOffset::none(Some(ResponseError::UnstableOffsetCommit))
                    } else {
                        g.offset(&k)
                            .map_or_else(|| FetchedOffset::none(None), fetched)
                    };
                    (k, answer)
                })
                .collect(),
        }
    }

    // ------------------------------------------------------------------ admin APIs

    /// ListGroups: every group, filtered by state names and group types (only `classic`
    /// groups exist here), case-insensitively.
    pub fn handle_list_groups(&self, states: &[String], types: &[String]) -> Vec<GroupOverview> {
        if !types.is_empty() && !types.iter().any(|t| t.eq_ignore_ascii_case("classic")) {
            return Vec::new();
        }
        let handles: Vec<Arc<GroupHandle>> = self.groups.read().values().cloned().collect();
        handles
            .into_iter()
            .filter_map(|h| {
                let g = h.state.lock();
                let state = g.state().name();
                let wanted =
                    states.is_empty() || states.iter().any(|s| s.eq_ignore_ascii_case(state));
                (wanted && !g.is(GroupState::Dead)).then(|| GroupOverview {
                    group_id: g.group_id.to_string(),
                    protocol_type: g.protocol_type.clone().unwrap_or_default(),
                    state,
                })
            })
            .collect()
    }

    /// DescribeGroups for one group. An unknown group is described as Dead (v6+:
    /// GROUP_ID_NOT_FOUND).
    pub fn handle_describe_group(&self, group_id: &str, api_version: i16) -> GroupDescription {
        let dead = || {
            let not_found = api_version >= 6;
            GroupDescription {
                error: not_found.then_some(ResponseError::GroupIdNotFound),
                error_message: not_found.then(|| format!("Group {group_id} not found.")),
                state: GroupState::Dead.name().to_string(),
                ..GroupDescription::default()
            }
        };
        let Some(handle) = self.group(group_id) else {
            return dead();
        };
        let g = handle.state.lock();
        if g.is(GroupState::Dead) {
            return dead();
        }
        let stable = g.is(GroupState::Stable);
        let protocol = if stable {
            g.protocol_name.clone().unwrap_or_default()
        } else {
            String::new()
        };
        let members = g
            .members()
            .map(|m| MemberDescription {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: if stable {
                    m.metadata(&protocol).cloned().unwrap_or_default()
                } else {
                    Bytes::new()
                },
                assignment: if stable {
                    m.assignment.clone()
                } else {
                    Bytes::new()
                },
            })
            .collect();
        GroupDescription {
            error: None,
            error_message: None,
            state: g.state().name().to_string(),
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol,
            members,
        }
    }

    /// DeleteGroups: an Empty group is deleted with its offsets (tombstones are appended to
    /// `__consumer_offsets`); a group with members is NON_EMPTY_GROUP.
    pub fn handle_delete_groups(&self, group_ids: &[String]) -> Vec<Option<ResponseError>> {
        group_ids
            .iter()
            .map(|group_id| {
                let Some(handle) = self.group(group_id) else {
                    return Some(ResponseError::GroupIdNotFound);
                };
                self.locked(&handle, |c, g, fx| match g.state() {
                    GroupState::Dead => Some(ResponseError::GroupIdNotFound),
                    GroupState::Empty => {
                        let now = c.now();
                        g.transition_to(GroupState::Dead, now);
                        let removed = g.remove_all_offsets();
                        info!(target: TRACE_TARGET, group = %g.group_id, offsets = removed.len(), "group deleted (DeleteGroups)");
                        let mut records: Vec<(Bytes, Option<Bytes>)> = removed
                            .iter()
                            .map(|(t, p)| (records::offset_commit_key(&g.group_id, t, *p), None))
                            .collect();
                        records.push((records::group_metadata_key(&g.group_id), None));
                        let group = g.group_id.clone();
                        fx.push(Action::Append {
                            ctx: RequestContext::internal("group-coordinator"),
                            group: g.group_id.clone(),
                            records,
                            then: Box::new(move |stored| {
                                if let Err(e) = stored {
                                    warn!(target: TRACE_TARGET, %group, error = ?e, "could not append the deleted group's tombstones");
                                }
                            }),
                        });
                        None
                    }
                    _ => Some(ResponseError::NonEmptyGroup),
                })
            })
            .collect()
    }

    /// Groups, members and committed offsets held, broker-wide.
    pub fn counts(&self) -> (usize, usize, usize) {
        (
            self.groups.read().len(),
            self.members.load(Ordering::Acquire),
            self.committed_offsets.load(Ordering::Acquire),
        )
    }
}

/// Kafka's `validateCurrentMember`: a static member's instance id must map to this member
/// id (else FENCED_INSTANCE_ID, or UNKNOWN_MEMBER_ID if the instance is unknown), and the
/// member id must be a member.
fn validate_current_member(
    g: &GroupMetadata,
    member_id: &str,
    group_instance_id: Option<&str>,
) -> Option<ResponseError> {
    if let Some(instance) = group_instance_id {
        match g.current_static_member_id(instance) {
            Some(current) if **current != *member_id => {
                info!(target: TRACE_TARGET, group = %g.group_id, member_id, instance, current = %current, "fenced: a newer member holds this group.instance.id");
                return Some(ResponseError::FencedInstanceId);
            }
            Some(_) => {}
            None => return Some(ResponseError::UnknownMemberId),
        }
    }
    (!g.has(member_id)).then_some(ResponseError::UnknownMemberId)
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

/// Kafka's `validateOffsetCommit` (non-transactional).
fn validate_offset_commit(
    g: &GroupMetadata,
    generation_id: i32,
    member_id: &str,
    group_instance_id: Option<&str>,
) -> Option<ResponseError> {
    if g.is(GroupState::Dead) {
        Some(ResponseError::CoordinatorNotAvailable)
    } else if generation_id < 0 && g.is(GroupState::Empty) {
        // A consumer that does not use group management (or an admin client).
        None
    } else if generation_id >= 0 || !member_id.is_empty() || group_instance_id.is_some() {
        validate_current_member(g, member_id, group_instance_id)
            .or((generation_id != g.generation_id).then_some(ResponseError::IllegalGeneration))
    } else if !g.is(GroupState::Empty) {
        // Only members may commit for a group that has members.
        Some(ResponseError::UnknownMemberId)
    } else {
        None
    }
}

/// The group's metadata record, with each member's assignment from `assignment`.
fn group_metadata_record(
    g: &GroupMetadata,
    assignment: &HashMap<Arc<str>, Bytes>,
) -> (Bytes, Option<Bytes>) {
    let protocol = g.protocol_name.clone();
    let members = g
        .members()
        .map(|m| records::MemberMetadataValue {
            member_id: m.member_id.to_string(),
            group_instance_id: m.group_instance_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            rebalance_timeout: m.rebalance_timeout_ms,
            session_timeout: m.session_timeout_ms,
            subscription: protocol
                .as_deref()
                .and_then(|p| m.metadata(p).cloned())
                .unwrap_or_default(),
            assignment: assignment.get(&m.member_id).cloned().unwrap_or_default(),
        })
        .collect();
    let value = records::GroupMetadataValue {
        protocol_type: g.protocol_type.clone().unwrap_or_default(),
        generation: g.generation_id,
        protocol,
        leader: g.leader_id().map(|l| l.to_string()),
        current_state_timestamp: manager::wall_clock_ms(),
        members,
    };
    (
        records::group_metadata_key(&g.group_id),
        Some(records::group_metadata_value(&value)),
    )
}

fn adjust(counter: &AtomicUsize, before: usize, after: usize) {
    if after > before {
        counter.fetch_add(after - before, Ordering::AcqRel);
    } else if before > after {
        counter.fetch_sub(before - after, Ordering::AcqRel);
    }
}

// ---------------------------------------------------------------------- GroupOperations

impl GroupOperations for GroupCoordinator {
    fn try_complete_join(&self, group: &str, rebalance: u64) -> bool {
        let Some(handle) = self.group(group) else {
            return true;
        };
        let g = handle.state.lock();
        g.rebalance != rebalance
            || !g.is(GroupState::PreparingRebalance)
            || g.has_all_members_joined()
    }

    fn on_complete_join(&self, group: &str, rebalance: u64) {
        if let Some(handle) = self.group(group) {
            self.locked(&handle, |c, g, fx| c.complete_join(g, rebalance, fx));
        }
    }

    fn on_complete_initial_join(&self, join: &InitialDelayedJoin) {
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

    fn try_complete_sync(&self, group: &str, generation: i32) -> bool {
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

    fn on_expire_sync(&self, group: &str, generation: i32) {
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

    fn try_complete_heartbeat(&self, key: &MemberKey, epoch: u64, pending: bool) -> bool {
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

    fn on_expire_heartbeat(&self, key: &MemberKey, epoch: u64, pending: bool) {
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

    fn describe_rebalance(&self, key: &GroupKey) -> String {
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

    fn describe_heartbeat(&self, key: &MemberKey, pending: bool) -> String {
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
