//! One classic group's state (Kafka's `GroupMetadata`): its state machine, generation,
//! protocol, leader, members, and the offsets committed for it. Pure data and rules; the
//! clock comes in as an argument and nothing here touches a purgatory or a log, so every
//! rule can be tested on its own. The coordinator ([`super`]) drives it under a lock.
//!
//! ```text
//!            first member joins                all members rejoined / DelayedJoin expires
//!   Empty ─────────────────────────► PreparingRebalance ─────────────────────► CompletingRebalance
//!     ▲                                 ▲  │ (no member left)                       │ leader's SyncGroup
//!     └─────────────────────────────────┼──┘                                        │ stored in __consumer_offsets
//!                                       │  member joins / leaves / changes / expires ▼
//!                                       └──────────────────────────────────────── Stable
//!   Dead: the group was deleted (DeleteGroups); nothing leaves Dead.
//! ```
//!
//! A *generation* is one completed join phase: the members that rejoined, the protocol
//! they voted for (the assignor every member supports that most of them prefer), and a
//! leader (the member that computes the assignment and hands it in with its SyncGroup).

mod txn_offsets;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use serde::{Deserialize, Serialize};

pub use super::member::CONSUMER_PROTOCOL_TYPE;
use super::member::{
    subscription_topics, JoinCallback, JoinGroupResult, JoinedMember, MemberMetadata, SyncCallback,
    SyncGroupResult,
};

/// The classic group states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum GroupState {
    /// No members (offsets may still be committed for it).
    Empty,
    /// Waiting for the members to (re)join: JoinGroups are parked in a DelayedJoin.
    PreparingRebalance,
    /// Joined; waiting for the leader's SyncGroup with the assignment.
    CompletingRebalance,
    /// Assignment stored and handed out; members heartbeat.
    Stable,
    /// Deleted.
    Dead,
}

impl GroupState {
    /// Kafka's name for the state (ListGroups, DescribeGroups).
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// The states a group may come from (Kafka's `validPreviousStates`).
    fn valid_previous(self) -> &'static [GroupState] {
        use GroupState::*;
        match self {
            PreparingRebalance => &[Stable, CompletingRebalance, Empty],
            CompletingRebalance => &[PreparingRebalance],
            Stable => &[CompletingRebalance],
            Empty => &[PreparingRebalance],
            Dead => &[Stable, PreparingRebalance, CompletingRebalance, Empty, Dead],
        }
    }
}

/// A partition a group commits offsets for.
pub type OffsetKey = (Arc<str>, i32);

/// A committed offset (Kafka's `OffsetAndMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetAndMetadata {
    /// The next offset to consume.
    pub offset: i64,
    /// The leader epoch of the record before it (-1 if unknown).
    pub leader_epoch: i32,
    /// The client's metadata string.
    pub metadata: String,
    /// When it was committed (wall clock, ms).
    pub commit_timestamp_ms: i64,
}

/// One classic group.
pub struct GroupMetadata {
    /// The group id.
    pub group_id: Arc<str>,
    state: GroupState,
    /// When the group entered its state (broker clock).
    pub state_timestamp_ms: u64,
    /// The members' protocol type, fixed by the first member (`consumer`).
    pub protocol_type: Option<String>,
    /// The current generation's protocol.
    pub protocol_name: Option<String>,
    /// Completed join phases so far.
    pub generation_id: i32,
    leader_id: Option<Arc<str>>,
    members: BTreeMap<Arc<str>, MemberMetadata>,
    /// `group.instance.id` → member id.
    static_members: HashMap<String, Arc<str>>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not yet rejoined with.
    pending_members: BTreeSet<Arc<str>>,
    /// Members of the current generation that have not sent SyncGroup yet.
    pending_sync_members: BTreeSet<Arc<str>>,
    /// A new member arrived during the first rebalance (InitialDelayedJoin waits again).
    pub new_member_added: bool,
    /// Counts rebalances, so that a delayed operation of an earlier one is recognised.
    pub rebalance: u64,
    offsets: BTreeMap<OffsetKey, OffsetAndMetadata>,
    pending_offset_commits: HashMap<OffsetKey, OffsetAndMetadata>,
    /// Offsets that open transactions wrote (TxnOffsetCommit), by producer id: in the log,
    /// not yet committed. The transaction's marker commits or drops them (Kafka's
    /// `pendingTransactionalOffsetCommits`).
    pending_txn_offsets: HashMap<i64, HashMap<OffsetKey, txn_offsets::PendingTxnOffset>>,
    /// The topics the current generation's consumers subscribe to (Kafka's
    /// `subscribedTopics`), `None` when unknown: not a consumer group, no generation yet,
    /// or a subscription that does not parse. Computed when a generation starts.
    subscribed_topics: Option<BTreeSet<String>>,
}

impl GroupMetadata {
    /// A new, Empty group.
    pub fn new(group_id: Arc<str>, now_ms: u64) -> Self {
        GroupMetadata {
            group_id,
            state: GroupState::Empty,
            state_timestamp_ms: now_ms,
            protocol_type: None,
            protocol_name: None,
            generation_id: 0,
            leader_id: None,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            pending_members: BTreeSet::new(),
            pending_sync_members: BTreeSet::new(),
            new_member_added: false,
            rebalance: 0,
            offsets: BTreeMap::new(),
            pending_offset_commits: HashMap::new(),
            pending_txn_offsets: HashMap::new(),
            subscribed_topics: None,
        }
    }

    /// Takes the generation a `__consumer_offsets` group record describes (Kafka's
    /// `GroupMetadata.loadGroup`): its members, with their subscriptions and assignments,
    /// and its leader. With members the group is Stable, without them Empty, whatever it
    /// was: a loaded group does not go through the state machine's transitions.
    pub fn load_generation(
        &mut self,
        generation: i32,
        protocol: Option<String>,
        leader: Option<String>,
        members: Vec<MemberMetadata>,
        now_ms: u64,
    ) {
        self.members.clear();
        self.static_members.clear();
        self.pending_members.clear();
        self.pending_sync_members.clear();
        self.generation_id = generation;
        self.protocol_name = protocol;
        for m in members {
            if let Some(instance) = &m.group_instance_id {
                self.static_members
                    .insert(instance.clone(), m.member_id.clone());
            }
            self.members.insert(m.member_id.clone(), m);
        }
        self.leader_id = leader
            .map(Arc::from)
            .filter(|l| self.members.contains_key(l))
            .or_else(|| self.members.keys().next().cloned());
        self.state = if self.members.is_empty() {
            GroupState::Empty
        } else {
            GroupState::Stable
        };
        self.state_timestamp_ms = now_ms;
        self.subscribed_topics = self.compute_subscribed_topics();
    }

    // ----------------------------------------------------------------- state machine

    /// The current state.
    pub fn state(&self) -> GroupState {
        self.state
    }

    /// Is the group in `state`?
    pub fn is(&self, state: GroupState) -> bool {
        self.state == state
    }

    /// May the group start a rebalance (Kafka's `canRebalance`)?
    pub fn can_rebalance(&self) -> bool {
        GroupState::PreparingRebalance
            .valid_previous()
            .contains(&self.state)
    }

    /// Moves to `state`. Transitions the state machine does not allow are a bug in the
    /// coordinator: caught in tests, ignored (the group keeps its state) in production.
    pub fn transition_to(&mut self, state: GroupState, now_ms: u64) {
        let valid = state.valid_previous().contains(&self.state);
        debug_assert!(
            valid,
            "group {}: {:?} -> {state:?}",
            self.group_id, self.state
        );
        if valid {
            self.state = state;
            self.state_timestamp_ms = now_ms;
        }
    }

    /// Starts the next generation (Kafka's `initNextGeneration`): with members, the
    /// protocol they vote for and CompletingRebalance; without, Empty.
    pub fn init_next_generation(&mut self, now_ms: u64) {
        self.generation_id = self.generation_id.wrapping_add(1);
        if self.members.is_empty() {
            self.protocol_name = None;
            self.transition_to(GroupState::Empty, now_ms);
        } else {
            self.protocol_name = self.select_protocol();
            self.transition_to(GroupState::CompletingRebalance, now_ms);
        }
        self.subscribed_topics = self.compute_subscribed_topics();
        self.pending_sync_members.clear();
    }

    /// Whether the group's consumers subscribe to `topic` (Kafka's
    /// `isSubscribedToTopic`): when the subscriptions are unknown, a `consumer` group is
    /// taken to subscribe to everything, any other group to nothing.
    pub fn is_subscribed_to_topic(&self, topic: &str) -> bool {
        match &self.subscribed_topics {
            Some(topics) => topics.contains(topic),
            None => self.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE),
        }
    }

    /// Kafka's `computeSubscribedTopics`: for a `consumer` group, the union of the
    /// members' subscriptions for the generation's protocol (none without members);
    /// `None` for other groups, before a protocol is chosen, or if one subscription does
    /// not parse.
    fn compute_subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if self.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
            return None;
        }
        if self.members.is_empty() {
            return Some(BTreeSet::new());
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut topics = BTreeSet::new();
        for m in self.members.values() {
            topics.extend(subscription_topics(m.metadata(protocol)?)?);
        }
        Some(topics)
    }

    // ----------------------------------------------------------------- members

    /// Is `member_id` a member?
    pub fn has(&self, member_id: &str) -> bool {
        self.members.contains_key(member_id)
    }

    /// A member.
    pub fn get(&self, member_id: &str) -> Option<&MemberMetadata> {
        self.members.get(member_id)
    }

    /// A member, to change.
    pub fn get_mut(&mut self, member_id: &str) -> Option<&mut MemberMetadata> {
        self.members.get_mut(member_id)
    }

    /// Every member.
    pub fn members(&self) -> impl Iterator<Item = &MemberMetadata> {
        self.members.values()
    }

    /// Every member id.
    pub fn member_ids(&self) -> Vec<Arc<str>> {
        self.members.keys().cloned().collect()
    }

    /// Number of members.
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// Members plus pending members: what the broker-wide member cap counts.
    pub fn member_count(&self) -> usize {
        self.members.len() + self.pending_members.len()
    }

    /// The leader's member id.
    pub fn leader_id(&self) -> Option<&Arc<str>> {
        self.leader_id.as_ref()
    }

    /// Is `member_id` the leader?
    pub fn is_leader(&self, member_id: &str) -> bool {
        self.leader_id.as_deref() == Some(member_id)
    }

    /// Adds a member, parking its JoinGroup `callback`. The first member fixes the
    /// protocol type and becomes the leader.
    pub fn add(&mut self, mut member: MemberMetadata, callback: Option<JoinCallback>) {
        if let Some(instance) = &member.group_instance_id {
            self.static_members
                .insert(instance.clone(), member.member_id.clone());
        }
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader_id.is_none() {
            self.leader_id = Some(member.member_id.clone());
        }
        self.pending_members.remove(&member.member_id);
        member.awaiting_join = callback;
        self.members.insert(member.member_id.clone(), member);
    }

    /// Removes a member (or a pending member); a new leader is picked if it led.
    pub fn remove(&mut self, member_id: &str) -> Option<MemberMetadata> {
        let removed = self.members.remove(member_id);
        if let Some(instance) = removed.as_ref().and_then(|m| m.group_instance_id.as_ref()) {
            self.static_members.remove(instance);
        }
        if self.is_leader(member_id) {
            self.leader_id = self.members.keys().next().cloned();
        }
        self.pending_members.remove(member_id);
        self.pending_sync_members.remove(member_id);
        removed
    }

    /// A new member id, as Kafka makes them: `<client.id or group.instance.id>-<uuid>`.
    pub fn generate_member_id(client_id: &str, group_instance_id: Option<&str>) -> String {
        let prefix = group_instance_id.unwrap_or(client_id);
        format!("{prefix}-{}", uuid::Uuid::new_v4())
    }

    /// Replaces a static member's id (it rejoined without its old id, e.g. after a
    /// restart), fencing whatever the old id still had parked with FENCED_INSTANCE_ID.
    /// Returns false if `old` is not a member.
    pub fn replace_static_member(&mut self, instance: &str, old: &str, new: Arc<str>) -> bool {
        let Some(mut member) = self.members.remove(old) else {
            return false;
        };
        if let Some(callback) = member.awaiting_join.take() {
            callback(JoinGroupResult::error(old, ResponseError::FencedInstanceId));
        }
        if let Some(callback) = member.awaiting_sync.take() {
            callback(SyncGroupResult::error(ResponseError::FencedInstanceId));
        }
        member.member_id = new.clone();
        if self.is_leader(old) {
            self.leader_id = Some(new.clone());
        }
        if self.pending_sync_members.remove(old) {
            self.pending_sync_members.insert(new.clone());
        }
        self.static_members
            .insert(instance.to_string(), new.clone());
        self.members.insert(new, member);
        true
    }

    /// The member id a `group.instance.id` currently maps to.
    pub fn current_static_member_id(&self, instance: &str) -> Option<&Arc<str>> {
        self.static_members.get(instance)
    }

    /// Is `member_id` a pending member (handed out, not yet rejoined with)?
    pub fn is_pending_member(&self, member_id: &str) -> bool {
        self.pending_members.contains(member_id)
    }

    /// Records a member id handed out with MEMBER_ID_REQUIRED.
    pub fn add_pending_member(&mut self, member_id: Arc<str>) {
        self.pending_members.insert(member_id);
    }

    /// The pending member ids.
    pub fn pending_members(&self) -> impl Iterator<Item = &Arc<str>> {
        self.pending_members.iter()
    }

    /// How many member ids are pending.
    pub fn pending_member_count(&self) -> usize {
        self.pending_members.len()
    }

    /// Members whose JoinGroup is not parked: they have not rejoined this rebalance.
    pub fn not_yet_rejoined_members(&self) -> Vec<Arc<str>> {
        self.members
            .values()
            .filter(|m| !m.is_awaiting_join())
            .map(|m| m.member_id.clone())
            .collect()
    }

    /// Members whose JoinGroup is parked.
    pub fn num_awaiting_join(&self) -> usize {
        self.members
            .values()
            .filter(|m| m.is_awaiting_join())
            .count()
    }

    /// Has every member rejoined, with no member id still pending (Kafka's
    /// `hasAllMembersJoined`)?
    pub fn has_all_members_joined(&self) -> bool {
        self.num_awaiting_join() == self.members.len() && self.pending_members.is_empty()
    }

    /// The largest rebalance timeout of the members: how long a DelayedJoin waits.
    pub fn rebalance_timeout_ms(&self) -> i32 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0)
            .max(0)
    }

    /// Kafka's `maybeElectNewJoinedLeader`: if the leader has not rejoined, a member that
    /// has becomes leader. False if nobody rejoined (or there is no leader at all).
    pub fn maybe_elect_new_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader_id.clone() else {
            return false;
        };
        if self
            .get(&leader)
            .is_some_and(MemberMetadata::is_awaiting_join)
        {
            return true;
        }
        match self.members.values().find(|m| m.is_awaiting_join()) {
            Some(joined) => {
                self.leader_id = Some(joined.member_id.clone());
                true
            }
            None => false,
        }
    }

    /// Changes a member's protocols and timeouts and parks (or clears) its JoinGroup
    /// (Kafka's `updateMember`).
    pub fn update_member(
        &mut self,
        member_id: &str,
        protocols: Vec<(String, Bytes)>,
        rebalance_timeout_ms: i32,
        session_timeout_ms: i32,
        callback: Option<JoinCallback>,
    ) {
        if let Some(member) = self.members.get_mut(member_id) {
            member.supported_protocols = protocols;
            member.rebalance_timeout_ms = rebalance_timeout_ms;
            member.session_timeout_ms = session_timeout_ms;
            member.awaiting_join = callback;
        }
    }

    /// Answers a member's parked JoinGroup, if it has one.
    pub fn maybe_invoke_join_callback(&mut self, member_id: &str, result: JoinGroupResult) {
        if let Some(callback) = self
            .members
            .get_mut(member_id)
            .and_then(|m| m.awaiting_join.take())
        {
            callback(result);
        }
    }

    /// Answers a member's parked SyncGroup, if it has one; true if it had.
    pub fn maybe_invoke_sync_callback(&mut self, member_id: &str, result: SyncGroupResult) -> bool {
        match self
            .members
            .get_mut(member_id)
            .and_then(|m| m.awaiting_sync.take())
        {
            Some(callback) => {
                callback(result);
                true
            }
            None => false,
        }
    }

    /// Parks a member's SyncGroup.
    pub fn set_awaiting_sync(&mut self, member_id: &str, callback: SyncCallback) {
        if let Some(member) = self.members.get_mut(member_id) {
            member.awaiting_sync = Some(callback);
        }
    }

    /// The members (id, instance id, metadata for the chosen protocol) the leader is told
    /// about in its JoinGroup response.
    pub fn current_member_metadata(&self) -> Vec<JoinedMember> {
        let protocol = self.protocol_name.as_deref().unwrap_or_default();
        self.members
            .values()
            .map(|m| JoinedMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata(protocol).cloned().unwrap_or_default(),
            })
            .collect()
    }

    /// A JoinGroup answer for `member_id` in the current generation: the leader also gets
    /// the member list.
    pub fn join_result(&self, member_id: &str, leader_gets_members: bool) -> JoinGroupResult {
        JoinGroupResult {
            members: if leader_gets_members && self.is_leader(member_id) {
                self.current_member_metadata()
            } else {
                Vec::new()
            },
            member_id: member_id.to_string(),
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader_id: self.leader_id.as_deref().unwrap_or_default().to_string(),
            skip_assignment: false,
            error: None,
        }
    }

    // ----------------------------------------------------------------- SyncGroup phase

    /// Expects a SyncGroup from `member_id`.
    pub fn add_pending_sync_member(&mut self, member_id: Arc<str>) {
        if self.has(&member_id) {
            self.pending_sync_members.insert(member_id);
        }
    }

    /// `member_id` sent its SyncGroup.
    pub fn remove_pending_sync_member(&mut self, member_id: &str) {
        self.pending_sync_members.remove(member_id);
    }

    /// Has every member of this generation sent SyncGroup?
    pub fn has_received_sync_from_all_members(&self) -> bool {
        self.pending_sync_members.is_empty()
    }

    /// The members that have not sent SyncGroup.
    pub fn pending_sync_members(&self) -> Vec<Arc<str>> {
        self.pending_sync_members.iter().cloned().collect()
    }

    /// Forgets the expected SyncGroups (a new rebalance began).
    pub fn clear_pending_sync_members(&mut self) {
        self.pending_sync_members.clear();
    }

    // ----------------------------------------------------------------- protocols

    /// The protocols every member supports.
    fn candidate_protocols(&self) -> Vec<&str> {
        let mut members = self.members.values();
        let Some(first) = members.next() else {
            return Vec::new();
        };
        let others: Vec<&MemberMetadata> = members.collect();
        first
            .supported_protocols
            .iter()
            .map(|(name, _)| name.as_str())
            .filter(|name| others.iter().all(|m| m.metadata(name).is_some()))
            .collect()
    }

    /// The protocol for the next generation (Kafka's `selectProtocol`): each member votes
    /// for its most preferred protocol among those all members support; most votes wins
    /// (ties go to the protocol the most preferred by the first member).
    pub fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: Vec<(&str, usize)> = candidates.iter().map(|c| (*c, 0)).collect();
        for member in self.members.values() {
            if let Some(vote) = member.vote(&candidates) {
                if let Some(count) = votes.iter_mut().find(|(c, _)| *c == vote) {
                    count.1 += 1;
                }
            }
        }
        let max = votes.iter().map(|(_, n)| *n).max()?;
        votes
            .into_iter()
            .find(|(_, n)| *n == max)
            .map(|(c, _)| c.to_string())
    }

    /// Can a member with this protocol type and these protocols join (Kafka's
    /// `supportsProtocols`)? An Empty group takes any non-empty offer; otherwise the type
    /// must match and one of the protocols must be supported by every member.
    pub fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.is(GroupState::Empty) || self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols
                .iter()
                .any(|(name, _)| self.members.values().all(|m| m.metadata(name).is_some()))
    }

    // ----------------------------------------------------------------- offsets

    /// The committed offset of a partition.
    pub fn offset(&self, key: &OffsetKey) -> Option<&OffsetAndMetadata> {
        self.offsets.get(key)
    }

    /// Every committed offset.
    pub fn offsets(&self) -> impl Iterator<Item = (&OffsetKey, &OffsetAndMetadata)> {
        self.offsets.iter()
    }

    /// Committed offsets plus commits waiting for replication or for their transaction:
    /// what the broker-wide offset cap counts.
    pub fn offset_count(&self) -> usize {
        self.offsets.len() + self.pending_offset_commits.len() + self.pending_txn_offset_count()
    }

    /// Is a commit of this partition waiting for replication?
    pub fn has_pending_offset_commit(&self, key: &OffsetKey) -> bool {
        self.pending_offset_commits.contains_key(key)
    }

    /// Number of commits waiting for replication.
    pub fn pending_offset_commit_count(&self) -> usize {
        self.pending_offset_commits.len()
    }

    /// A commit was appended to `__consumer_offsets` and waits for replication.
    pub fn prepare_offset_commit(&mut self, offsets: &[(OffsetKey, OffsetAndMetadata)]) {
        for (key, offset) in offsets {
            self.pending_offset_commits
                .insert(key.clone(), offset.clone());
        }
    }

    /// The commit is replicated: only now does the cache show it.
    pub fn on_offset_commit_append(&mut self, key: &OffsetKey, offset: &OffsetAndMetadata) {
        if self.pending_offset_commits.get(key) == Some(offset) {
            self.pending_offset_commits.remove(key);
        }
        self.offsets.insert(key.clone(), offset.clone());
    }

    /// Forgets one committed offset (a tombstone replayed from `__consumer_offsets`).
    pub fn remove_offset(&mut self, key: &OffsetKey) {
        self.offsets.remove(key);
    }

    /// The commit failed: forget it.
    pub fn fail_pending_offset_write(&mut self, key: &OffsetKey, offset: &OffsetAndMetadata) {
        if self.pending_offset_commits.get(key) == Some(offset) {
            self.pending_offset_commits.remove(key);
        }
    }

    /// Drops every offset (DeleteGroups), returning the partitions that had one.
    pub fn remove_all_offsets(&mut self) -> Vec<OffsetKey> {
        self.pending_offset_commits.clear();
        self.pending_txn_offsets.clear();
        std::mem::take(&mut self.offsets).into_keys().collect()
    }

    /// Nothing at all is left in this group: no member, no pending member, no offset, no
    /// commit in flight, and it never completed a generation. Such a group (made by a
    /// JoinGroup that was refused) is dropped at once rather than kept, so refused joins
    /// cannot fill the broker-wide group cap.
    pub fn is_vacant(&self) -> bool {
        self.is(GroupState::Empty)
            && self.generation_id == 0
            && self.members.is_empty()
            && self.pending_members.is_empty()
            && self.offsets.is_empty()
            && self.pending_offset_commits.is_empty()
            && self.pending_txn_offsets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::JoinGroupParams;

    fn member(id: &str, protocols: &[(&str, &[u8])]) -> MemberMetadata {
        let join = JoinGroupParams {
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: 1000,
            session_timeout_ms: 6000,
            protocol_type: "consumer".into(),
            protocols: protocols
                .iter()
                .map(|(n, m)| (n.to_string(), Bytes::copy_from_slice(m)))
                .collect(),
            ..JoinGroupParams::default()
        };
        MemberMetadata::joining(Arc::from(id), &join)
    }

    #[test]
    fn the_protocol_is_voted_among_those_every_member_supports() {
        let mut g = GroupMetadata::new(Arc::from("g"), 0);
        g.add(member("a", &[("range", b""), ("roundrobin", b"")]), None);
        g.add(member("b", &[("roundrobin", b""), ("range", b"")]), None);
        g.add(member("c", &[("sticky", b""), ("roundrobin", b"")]), None);
        g.transition_to(GroupState::PreparingRebalance, 1);
        // "range" is not supported by c; every member votes roundrobin.
        assert_eq!(g.select_protocol().as_deref(), Some("roundrobin"));
        assert!(g.supports_protocols("consumer", &[("roundrobin".into(), Bytes::new())]));
        assert!(!g.supports_protocols("consumer", &[("range".into(), Bytes::new())]));
        assert!(!g.supports_protocols("connect", &[("roundrobin".into(), Bytes::new())]));
    }

    #[test]
    fn the_first_member_leads_and_a_rejoined_member_takes_over_from_a_missing_leader() {
        let mut g = GroupMetadata::new(Arc::from("g"), 0);
        g.add(member("a", &[("range", b"")]), None);
        g.add(member("b", &[("range", b"")]), Some(Box::new(|_| {})));
        assert!(g.is_leader("a"));
        assert!(!g.has_all_members_joined());
        assert!(g.maybe_elect_new_joined_leader());
        assert!(g.is_leader("b"));
        g.remove("b");
        assert!(g.is_leader("a"));
        assert!(!g.maybe_elect_new_joined_leader(), "nobody rejoined");
    }

    #[test]
    fn states_follow_kafkas_transitions() {
        let mut g = GroupMetadata::new(Arc::from("g"), 0);
        assert!(g.can_rebalance());
        g.transition_to(GroupState::PreparingRebalance, 5);
        assert!(!g.can_rebalance());
        g.add(member("a", &[("range", b"")]), None);
        g.init_next_generation(7);
        assert_eq!(
            (g.state(), g.generation_id),
            (GroupState::CompletingRebalance, 1)
        );
        assert_eq!(g.protocol_name.as_deref(), Some("range"));
        assert_eq!(g.state_timestamp_ms, 7);
        g.remove("a");
        g.transition_to(GroupState::PreparingRebalance, 8);
        g.init_next_generation(9);
        assert_eq!((g.state(), g.generation_id), (GroupState::Empty, 2));
        assert_eq!(g.protocol_name, None);
    }

    #[test]
    fn an_offset_shows_only_once_its_commit_is_replicated() {
        let mut g = GroupMetadata::new(Arc::from("g"), 0);
        let key: OffsetKey = (Arc::from("t"), 0);
        let offset = OffsetAndMetadata {
            offset: 42,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: 0,
        };
        g.prepare_offset_commit(&[(key.clone(), offset.clone())]);
        assert!(g.offset(&key).is_none());
        assert!(g.has_pending_offset_commit(&key));
        assert!(!g.is_vacant());
        g.on_offset_commit_append(&key, &offset);
        assert_eq!(g.offset(&key).map(|o| o.offset), Some(42));
        assert!(!g.has_pending_offset_commit(&key));
    }
}
