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
//! the same timer as the produce and fetch purgatories ([`delayed`]):
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
//! (`GroupCoordinator::locked`). What must happen *outside* it — parking or completing
//! delayed operations, appending to the log, whose callbacks take the group lock again — is
//! collected as `Action`s while the lock is held and run right after it is released. So a
//! purgatory never calls back into a group whose lock its caller holds, and no lock is ever
//! taken twice. Response callbacks, which only send on a channel, run under the lock.
//!
//! Layers: handlers call this module; it appends through the replica manager
//! ([`manager`]); its delayed operations ([`delayed`]) call it back (`operations.rs`). Its
//! pieces: [`group`] and [`member`] (the state
//! machine, pure), [`records`] (Kafka's `__consumer_offsets` schemas), [`manager`] (the
//! log), this file (the rules that tie them together, named after Kafka's methods).

mod admin_apis;
pub mod delayed;
pub mod group;
mod heartbeat;
mod join;
pub mod load;
pub mod manager;
pub mod member;
mod offset_delete;
mod offsets;
mod operations;
pub mod records;
mod snapshot;
mod sync;

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

use crate::replica_manager::ReplicaManager;
use crate::request::RequestContext;
use delayed::{Coordinator, DelayedHeartbeat, DelayedRebalance, GroupKey, MemberKey};
use group::{GroupMetadata, GroupState, OffsetKey};
pub use heartbeat::{HeartbeatCallback, LeaveCallback};
use manager::GroupMetadataManager;
pub use offset_delete::DeleteOffsetsCallback;
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
#[derive(Debug, Clone, Default)]
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
    /// An error for this partition (none yet: UNSTABLE_OFFSET_COMMIT will come with
    /// transactional commits).
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
    /// Append to `__consumer_offsets` (acks=-1) and call back; as a transactional batch
    /// of (producer id, epoch) for a transaction's offsets.
    Append {
        ctx: RequestContext,
        group: Arc<str>,
        records: Vec<(Bytes, Option<Bytes>)>,
        transaction: Option<(i64, i16)>,
        then: manager::AppendCallback,
    },
    /// Call back once what the coordinator wrote to the group's partition is replicated.
    AfterPendingWrites {
        ctx: RequestContext,
        kind: &'static str,
        group: Arc<str>,
        then: manager::WaitCallback,
    },
}

/// One group and its lock.
pub struct GroupHandle {
    /// The group id.
    pub id: Arc<str>,
    state: Mutex<GroupMetadata>,
}

/// The group coordinator. One per broker, held beside the replica manager in
/// [`KafkaApis`](crate::apis::KafkaApis).
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
                    transaction,
                    then,
                } => self
                    .manager
                    .append(&ctx, &group, &records, transaction, then),
                Action::AfterPendingWrites {
                    ctx,
                    kind,
                    group,
                    then,
                } => self.manager.after_pending_writes(&ctx, kind, &group, then),
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
}

/// Collects `n` results that arrive in any order, on any thread, and hands them to `done`
/// in slot order once the last has arrived: one callback per slot. (A request naming
/// several groups, each of which may wait for its own partition.)
pub(crate) fn gather<T: Send + 'static>(
    n: usize,
    done: Box<dyn FnOnce(Vec<T>) + Send>,
) -> Vec<Box<dyn FnOnce(T) + Send>> {
    struct Slots<T> {
        filled: Vec<Option<T>>,
        missing: usize,
        done: Option<Box<dyn FnOnce(Vec<T>) + Send>>,
    }
    let slots = Arc::new(Mutex::new(Slots {
        filled: (0..n).map(|_| None).collect(),
        missing: n,
        done: Some(done),
    }));
    if n == 0 {
        if let Some(done) = slots.lock().done.take() {
            done(Vec::new());
        }
        return Vec::new();
    }
    (0..n)
        .map(|i| {
            let slots = slots.clone();
            Box::new(move |value: T| {
                let finished = {
                    let mut s = slots.lock();
                    debug_assert!(s.filled[i].is_none(), "a slot is filled once");
                    s.filled[i] = Some(value);
                    s.missing -= 1;
                    if s.missing == 0 {
                        let values: Vec<T> = s.filled.drain(..).flatten().collect();
                        s.done.take().map(|done| (done, values))
                    } else {
                        None
                    }
                };
                if let Some((done, values)) = finished {
                    done(values);
                }
            }) as Box<dyn FnOnce(T) + Send>
        })
        .collect()
}

/// Kafka's `validateCurrentMember`: a static member's instance id must map to this member
/// id (else FENCED_INSTANCE_ID, or UNKNOWN_MEMBER_ID if the instance is unknown), and the
/// member id must be a member.
pub(super) fn validate_current_member(
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

/// The group's metadata record, with each member's assignment from `assignment`.
pub(super) fn group_metadata_record(
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
        current_state_timestamp: crate::record_batch::wall_clock_ms(),
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
