//! The coordinator's rules on a manual clock, through its domain API (no sockets): the
//! initial delay, rebalances when members join, leave or expire, DelayedJoin expiry, the
//! session timeout to the millisecond, static membership, and Kafka's errors.
//!
//! `__consumer_offsets` has one replica here, so group metadata and commits are replicated
//! as soon as they are appended; waiting for followers is tested over the wire
//! (`tests/groups.rs`).

use std::sync::mpsc;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::group::{GroupState, OffsetAndMetadata, OffsetKey};
use super::member::{JoinGroupResult, SyncGroupResult};
use super::{GroupCoordinator, JoinGroupParams, LeavingMember, SyncGroupParams};
use crate::config::BrokerConfig;
use crate::replica_manager::ReplicaManager;
use crate::request::RequestContext;
use crate::test_util::manual_broker;

const SESSION: i32 = 6_000;
const REBALANCE: i32 = 10_000;

struct Harness {
    rm: Arc<ReplicaManager>,
    c: Arc<GroupCoordinator>,
}

fn harness(configure: impl FnOnce(&mut BrokerConfig)) -> Harness {
    let rm = manual_broker(
        |c| {
            c.offsets_topic_replication_factor = 1;
            c.offsets_topic_num_partitions = 3;
            configure(c);
        },
        &[("t", 4, 1)],
    );
    let c = GroupCoordinator::new(&rm);
    Harness { rm, c }
}

/// An answer that may come later.
struct Pending<T>(mpsc::Receiver<T>);

impl<T: std::fmt::Debug> Pending<T> {
    fn now(&self) -> Option<T> {
        self.0.try_recv().ok()
    }

    fn expect(&self, what: &str) -> T {
        self.now()
            .unwrap_or_else(|| panic!("{what}: no answer yet"))
    }

    fn assert_waiting(&self, what: &str) {
        if let Some(answer) = self.now() {
            panic!("{what}: expected no answer yet, got {answer:?}");
        }
    }
}

fn ctx(client: &str) -> RequestContext {
    RequestContext::internal(client)
}

impl Harness {
    fn advance(&self, ms: u64) {
        self.rm.timer.advance_by(ms);
    }

    fn join_params(&self, group: &str, member: &str, instance: Option<&str>) -> JoinGroupParams {
        JoinGroupParams {
            group_id: group.into(),
            member_id: member.into(),
            group_instance_id: instance.map(str::to_string),
            require_known_member_id: false,
            support_skipping_assignment: false,
            client_id: "client".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: REBALANCE,
            session_timeout_ms: SESSION,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::from_static(b"sub"))],
            reason: None,
        }
    }

    fn join_with(&self, p: JoinGroupParams) -> Pending<JoinGroupResult> {
        let (tx, rx) = mpsc::channel();
        self.c.handle_join_group(
            &ctx("client"),
            p,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        Pending(rx)
    }

    fn join(&self, group: &str, member: &str) -> Pending<JoinGroupResult> {
        self.join_with(self.join_params(group, member, None))
    }

    fn sync(
        &self,
        group: &str,
        generation: i32,
        member: &str,
        assignments: &[(&str, &[u8])],
    ) -> Pending<SyncGroupResult> {
        let (tx, rx) = mpsc::channel();
        self.c.handle_sync_group(
            &ctx("client"),
            SyncGroupParams {
                group_id: group.into(),
                generation_id: generation,
                member_id: member.into(),
                group_instance_id: None,
                protocol_type: None,
                protocol_name: None,
                assignments: assignments
                    .iter()
                    .map(|(m, a)| (m.to_string(), Bytes::copy_from_slice(a)))
                    .collect(),
            },
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        Pending(rx)
    }

    fn heartbeat(&self, group: &str, member: &str, generation: i32) -> Option<ResponseError> {
        self.static_heartbeat(group, member, None, generation)
    }

    /// A heartbeat's answer, which comes at once here: `__consumer_offsets` has one
    /// replica, so nothing the coordinator wrote is ever waiting for replication.
    fn static_heartbeat(
        &self,
        group: &str,
        member: &str,
        instance: Option<&str>,
        generation: i32,
    ) -> Option<ResponseError> {
        let (tx, rx) = mpsc::channel();
        self.c.handle_heartbeat(
            &ctx("client"),
            group,
            member,
            instance,
            generation,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        Pending(rx).expect("heartbeat")
    }

    fn leave(
        &self,
        group: &str,
        members: Vec<LeavingMember>,
    ) -> (
        Option<ResponseError>,
        Vec<(LeavingMember, Option<ResponseError>)>,
    ) {
        let (tx, rx) = mpsc::channel();
        self.c.handle_leave_group(
            &ctx("client"),
            group,
            members,
            Box::new(move |top, results| {
                let _ = tx.send((top, results));
            }),
        );
        Pending(rx).expect("leave")
    }

    fn delete_groups(&self, groups: &[&str]) -> Vec<Option<ResponseError>> {
        let ids: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        let (tx, rx) = mpsc::channel();
        self.c.handle_delete_groups(
            &ctx("client"),
            &ids,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        Pending(rx).expect("delete groups")
    }

    fn state(&self, group: &str) -> Option<(GroupState, i32, usize)> {
        let handle = self.c.group(group)?;
        let g = handle.state.lock();
        Some((g.state(), g.generation_id, g.size()))
    }

    fn has_member(&self, group: &str, member: &str) -> bool {
        self.c
            .group(group)
            .is_some_and(|h| h.state.lock().has(member))
    }

    fn commit(
        &self,
        group: &str,
        member: &str,
        generation: i32,
        offset: i64,
    ) -> Pending<Vec<(OffsetKey, Option<ResponseError>)>> {
        let (tx, rx) = mpsc::channel();
        self.c.handle_commit_offsets(
            &ctx("client"),
            group,
            member,
            None,
            generation,
            None,
            vec![(
                (Arc::from("t"), 0),
                OffsetAndMetadata {
                    offset,
                    leader_epoch: -1,
                    metadata: String::new(),
                    commit_timestamp_ms: 0,
                },
            )],
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        Pending(rx)
    }

    /// Two dynamic members, `a` (leader) and `b`, Stable at generation 1 with an
    /// assignment each. Returns their member ids.
    fn stable_pair(&self, group: &str) -> (String, String) {
        let a = self.join(group, "");
        let b = self.join(group, "");
        self.advance(self.rm.config.group_initial_rebalance_delay_ms.max(0) as u64);
        let (a, b) = (a.expect("a joins"), b.expect("b joins"));
        assert_eq!((a.error, b.error), (None, None));
        assert_eq!(a.leader_id, a.member_id, "the first member leads");
        let (a, b) = (a.member_id, b.member_id);
        let follower = self.sync(group, 1, &b, &[]);
        let leader = self.sync(group, 1, &a, &[(&a, b"pa"), (&b, b"pb")]);
        assert_eq!(&leader.expect("leader synced").assignment[..], b"pa");
        assert_eq!(&follower.expect("follower synced").assignment[..], b"pb");
        assert_eq!(self.state(group), Some((GroupState::Stable, 1, 2)));
        (a, b)
    }
}

#[test]
fn two_members_join_one_generation_thanks_to_the_initial_delay() {
    let h = harness(|c| c.group_initial_rebalance_delay_ms = 3_000);
    let a = h.join("g", "");
    assert_eq!(
        h.state("g").map(|s| s.0),
        Some(GroupState::PreparingRebalance)
    );
    let pending = h.c.rebalance_purgatory.snapshot(10).pending;
    assert_eq!(pending.len(), 1);
    assert!(
        pending[0].description.starts_with("InitialDelayedJoin"),
        "{}",
        pending[0].description
    );
    assert_eq!(pending[0].deadline_ms, 3_000);

    h.advance(1_000);
    let b = h.join("g", "");
    // The first delay ends at 3000 ms, but a member arrived meanwhile: it waits again,
    // up to another group.initial.rebalance.delay.ms.
    h.advance(1_999);
    a.assert_waiting("a at 2999 ms");
    h.advance(1);
    a.assert_waiting("a at 3000 ms: re-armed because b joined");
    b.assert_waiting("b at 3000 ms");
    h.advance(2_999);
    a.assert_waiting("a at 5999 ms");
    h.advance(1);
    let (a, b) = (a.expect("a at 6000 ms"), b.expect("b at 6000 ms"));
    assert_eq!((a.error, b.error), (None, None));
    assert_eq!((a.generation_id, b.generation_id), (1, 1));
    assert_eq!(a.leader_id, a.member_id);
    assert_eq!(b.leader_id, a.member_id);
    assert_eq!(
        a.members.len(),
        2,
        "the leader gets every member's metadata"
    );
    assert!(b.members.is_empty(), "a follower gets none");
    assert_eq!(a.protocol_name.as_deref(), Some("range"));
    assert_eq!(h.state("g"), Some((GroupState::CompletingRebalance, 1, 2)));
    // Now a DelayedSync waits for both SyncGroups.
    let pending = h.c.rebalance_purgatory.snapshot(10).pending;
    assert!(
        pending[0].description.starts_with("DelayedSync"),
        "{pending:?}"
    );
}

#[test]
fn a_lone_member_waits_exactly_the_initial_delay() {
    let h = harness(|c| c.group_initial_rebalance_delay_ms = 3_000);
    let a = h.join("g", "");
    h.advance(2_999);
    a.assert_waiting("at 2999 ms");
    h.advance(1);
    assert_eq!(a.expect("at 3000 ms").generation_id, 1);
}

#[test]
fn a_third_member_makes_the_group_rebalance() {
    let h = harness(|c| c.group_initial_rebalance_delay_ms = 0);
    let (a, b) = h.stable_pair("g");
    let c = h.join("g", "");
    assert_eq!(
        h.state("g").map(|s| s.0),
        Some(GroupState::PreparingRebalance)
    );
    // Heartbeats tell the old members to rejoin.
    assert_eq!(
        h.heartbeat("g", &a, 1),
        Some(ResponseError::RebalanceInProgress)
    );
    assert_eq!(
        h.heartbeat("g", &b, 1),
        Some(ResponseError::RebalanceInProgress)
    );
    let a_again = h.join("g", &a);
    c.assert_waiting("c: b has not rejoined");
    let b_again = h.join("g", &b);
    // The last one in completes the DelayedJoin at once, no timeout needed.
    let (a2, b2, c2) = (a_again.expect("a"), b_again.expect("b"), c.expect("c"));
    assert_eq!(
        (a2.generation_id, b2.generation_id, c2.generation_id),
        (2, 2, 2)
    );
    assert_eq!(a2.members.len(), 3);
    assert_eq!(h.state("g"), Some((GroupState::CompletingRebalance, 2, 3)));
    // The old generation is over.
    assert_eq!(
        h.heartbeat("g", &a, 1),
        Some(ResponseError::IllegalGeneration)
    );
    assert_eq!(h.heartbeat("g", &a, 2), None);
}

#[test]
fn delayed_join_expiry_removes_the_member_that_did_not_rejoin() {
    let h = harness(|c| c.group_initial_rebalance_delay_ms = 0);
    let (a, b) = h.stable_pair("g");
    // b keeps its session alive but never rejoins.
    let c = h.join("g", "");
    let a_again = h.join("g", &a);
    h.advance(5_000);
    assert_eq!(
        h.heartbeat("g", &b, 1),
        Some(ResponseError::RebalanceInProgress)
    );
    h.advance(4_999);
    a_again.assert_waiting("at 9999 ms: the rebalance timeout is 10000 ms");
    assert!(h.has_member("g", &b));
    h.advance(1);
    let (a2, c2) = (a_again.expect("a at 10000 ms"), c.expect("c at 10000 ms"));
    assert_eq!((a2.generation_id, c2.generation_id), (2, 2));
    assert_eq!(a2.members.len(), 2, "b is gone");
    assert!(!h.has_member("g", &b));
    assert_eq!(
        h.heartbeat("g", &b, 2),
        Some(ResponseError::UnknownMemberId)
    );
}

#[test]
fn a_member_expires_exactly_at_its_session_timeout() {
    let h = harness(|c| c.group_initial_rebalance_delay_ms = 0);
    let (a, b) = h.stable_pair("g");
    h.advance(1_000);
    assert_eq!(h.heartbeat("g", &b, 1), None);
    let last_heartbeat = h.rm.now_ms();
    let deadline = {
        let handle = h.c.group("g").unwrap();
        let g = handle.state.lock();
        g.get(&b).unwrap().session_deadline_ms
    };
    assert_eq!(deadline, last_heartbeat + SESSION as u64);
    // a heartbeats every 2 s; b goes silent.
    for _ in 0..2 {
        h.advance(2_000);
        assert_eq!(h.heartbeat("g", &a, 1), None);
    }
    h.advance(deadline - 1 - h.rm.now_ms());
    assert!(
        h.has_member("g", &b),
        "at session timeout - 1 ms b is still a member"
    );
    assert_eq!(h.state("g").map(|s| s.0), Some(GroupState::Stable));
    h.advance(1);
    assert!(
        !h.has_member("g", &b),
        "at the session timeout b is removed"
    );
    assert_eq!(
        h.state("g").map(|s| s.0),
        Some(GroupState::PreparingRebalance)
    );
    assert_eq!(
        h.heartbeat("g", &a, 1),
        Some(ResponseError::RebalanceInProgress)
    );
    assert_eq!(h.c.heartbeat_purgatory.expired(), 1);
    // a alone rejoins: the DelayedJoin completes at once.
    let a2 = h.join("g", &a).expect("a rejoins");
    assert_eq!((a2.generation_id, a2.members.len()), (2, 1));
}

#[test]
fn leave_group_rebalances_at_once() {
    let h = harness(|c| c.group_initial_rebalance_delay_ms = 0);
    let (a, b) = h.stable_pair("g");
    let (top, results) = h.leave(
        "g",
        vec![LeavingMember {
            member_id: b.clone(),
            group_instance_id: None,
            reason: Some("shutting down".into()),
        }],
    );
    assert_eq!((top, results[0].1), (None, None));
    assert!(!h.has_member("g", &b));
    assert_eq!(
        h.state("g").map(|s| s.0),
        Some(GroupState::PreparingRebalance)
    );
    assert_eq!(
        h.heartbeat("g", &a, 1),
        Some(ResponseError::RebalanceInProgress)
    );
    let a2 = h
        .join("g", &a)
        .expect("a rejoins, completing the rebalance at once");
    assert_eq!((a2.generation_id, a2.members.len()), (2, 1));
    // The last member leaving empties the group.
    h.sync("g", 2, &a, &[(&a, b"all")]).expect("synced");
    h.leave(
        "g",
        vec![LeavingMember {
            member_id: a.clone(),
            group_instance_id: None,
            reason: None,
        }],
    );
    assert_eq!(h.state("g"), Some((GroupState::Empty, 3, 0)));
}

#[test]
fn a_static_member_rejoins_without_a_rebalance() {
    let h = harness(|c| c.group_initial_rebalance_delay_ms = 0);
    let join_static = |member: &str| h.join_with(h.join_params("g", member, Some("host-1")));
    let a = join_static("");
    let b = h.join("g", "");
    h.advance(0);
    let (a, b) = (a.expect("a").member_id, b.expect("b").member_id);
    h.sync("g", 1, &b, &[]);
    h.sync("g", 1, &a, &[(&a, b"pa"), (&b, b"pb")])
        .expect("stable");
    let appended =
        h.rm.partition("__consumer_offsets", h.c.manager.partition_for("g"))
            .unwrap()
            .lock()
            .log_end_offset();

    // The static member restarts: it rejoins with its instance id and no member id.
    let again = join_static("").expect("answered without waiting for a rebalance");
    assert_eq!(again.error, None);
    assert_ne!(again.member_id, a, "a new member id");
    assert_eq!(again.generation_id, 1, "same generation: no rebalance");
    assert_eq!(
        again.leader_id, a,
        "before JoinGroup v9 the old leader id, so it does not reassign"
    );
    assert_eq!(h.state("g"), Some((GroupState::Stable, 1, 2)));
    let after =
        h.rm.partition("__consumer_offsets", h.c.manager.partition_for("g"))
            .unwrap()
            .lock()
            .log_end_offset();
    assert_eq!(
        after,
        appended + 1,
        "its new member id was stored in __consumer_offsets"
    );
    // Its old id is fenced, its new one works, and it keeps its assignment.
    assert_eq!(
        h.static_heartbeat("g", &a, Some("host-1"), 1),
        Some(ResponseError::FencedInstanceId)
    );
    assert_eq!(
        h.static_heartbeat("g", &again.member_id, Some("host-1"), 1),
        None
    );
    let synced = h.sync("g", 1, &again.member_id, &[]).expect("stable sync");
    assert_eq!(&synced.assignment[..], b"pa");
    // A join naming the old member id with the instance id is fenced too.
    let stale = join_static(&a).expect("fenced");
    assert_eq!(stale.error, Some(ResponseError::FencedInstanceId));
}

#[test]
fn stale_generations_and_unknown_members_are_refused() {
    let h = harness(|c| c.group_initial_rebalance_delay_ms = 0);
    let (a, _b) = h.stable_pair("g");
    assert_eq!(
        h.heartbeat("g", &a, 0),
        Some(ResponseError::IllegalGeneration)
    );
    assert_eq!(
        h.heartbeat("g", "stranger", 1),
        Some(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        h.heartbeat("nope", &a, 1),
        Some(ResponseError::UnknownMemberId)
    );
    assert_eq!(h.heartbeat("", &a, 1), Some(ResponseError::InvalidGroupId));
    assert_eq!(
        h.sync("g", 7, &a, &[]).expect("sync").error,
        Some(ResponseError::IllegalGeneration)
    );
    assert_eq!(
        h.sync("g", 1, "stranger", &[]).expect("sync").error,
        Some(ResponseError::UnknownMemberId)
    );
    let commit = h.commit("g", &a, 0, 5).expect("commit");
    assert_eq!(commit[0].1, Some(ResponseError::IllegalGeneration));
    let commit = h.commit("g", "", -1, 5).expect("commit");
    assert_eq!(
        commit[0].1,
        Some(ResponseError::UnknownMemberId),
        "only members commit for a group with members"
    );
    assert_eq!(h.commit("g", &a, 1, 5).expect("commit")[0].1, None);
    assert_eq!(
        h.join("g", "stranger").expect("join").error,
        Some(ResponseError::UnknownMemberId)
    );
    let mut p = h.join_params("g", "", None);
    p.protocols = vec![("roundrobin".into(), Bytes::new())];
    assert_eq!(
        h.join_with(p).expect("join").error,
        Some(ResponseError::InconsistentGroupProtocol)
    );
    let mut p = h.join_params("g", "", None);
    p.session_timeout_ms = 5_999;
    assert_eq!(
        h.join_with(p).expect("join").error,
        Some(ResponseError::InvalidSessionTimeout)
    );
    assert_eq!(
        h.join("", "").expect("join").error,
        Some(ResponseError::InvalidGroupId)
    );
    assert_eq!(
        h.delete_groups(&["g", "nope"]),
        vec![
            Some(ResponseError::NonEmptyGroup),
            Some(ResponseError::GroupIdNotFound)
        ]
    );
}

#[test]
fn member_id_required_then_the_pending_member_expires() {
    let h = harness(|c| c.group_initial_rebalance_delay_ms = 0);
    let mut p = h.join_params("g", "", None);
    p.require_known_member_id = true;
    let first = h.join_with(p.clone()).expect("at once");
    assert_eq!(first.error, Some(ResponseError::MemberIdRequired));
    assert!(first.member_id.starts_with("client-"));
    let pending = h.c.heartbeat_purgatory.snapshot(10).pending;
    assert_eq!(
        pending.len(),
        1,
        "a DelayedHeartbeat for the pending member"
    );
    assert_eq!(pending[0].deadline_ms, SESSION as u64);
    // It never comes back: after the session timeout its id is forgotten, and the group,
    // which never had a member, with it.
    h.advance(SESSION as u64);
    assert_eq!(h.state("g"), None);
    let mut again = p.clone();
    again.member_id = first.member_id.clone();
    assert_eq!(
        h.join_with(again).expect("too late").error,
        Some(ResponseError::UnknownMemberId)
    );
    // In time, the id is accepted.
    let first = h.join_with(p.clone()).expect("at once");
    let mut again = p;
    again.member_id = first.member_id.clone();
    let joined = h.join_with(again);
    h.advance(0);
    let joined = joined.expect("joined");
    assert_eq!((joined.error, joined.member_id), (None, first.member_id));
}

#[test]
fn a_pending_member_id_outlives_a_rebalance_that_completes_without_it() {
    // Two consumers start together: each gets MEMBER_ID_REQUIRED and an id. The first
    // comes back first and generation 1 completes with it alone (no initial delay). The
    // second's id is still good: Kafka keeps pending ids until their own session times
    // out, so its JoinGroup starts the next rebalance, which takes both.
    let h = harness(|c| c.group_initial_rebalance_delay_ms = 0);
    let mut p = h.join_params("g", "", None);
    p.require_known_member_id = true;
    let with_id = |id: &str| {
        let mut q = p.clone();
        q.member_id = id.to_string();
        q
    };
    let a = h.join_with(p.clone()).expect("a gets an id").member_id;
    let b = h.join_with(p.clone()).expect("b gets an id").member_id;
    let a1 = h.join_with(with_id(&a));
    h.advance(0);
    let a1 = a1.expect("generation 1 completes with a alone");
    assert_eq!((a1.error, a1.generation_id, a1.members.len()), (None, 1, 1));
    let b2 = h.join_with(with_id(&b));
    b2.assert_waiting("b's JoinGroup waits for a to rejoin");
    assert_eq!(
        h.state("g").map(|s| s.0),
        Some(GroupState::PreparingRebalance)
    );
    assert_eq!(
        h.heartbeat("g", &a, 1),
        Some(ResponseError::RebalanceInProgress)
    );
    let a2 = h.join_with(with_id(&a)).expect("a rejoins: everyone is in");
    let b2 = b2.expect("b joined");
    assert_eq!((a2.generation_id, a2.members.len()), (2, 2));
    assert_eq!((b2.error, b2.generation_id), (None, 2));
}

#[test]
fn group_max_size_and_the_broker_wide_caps_refuse_clearly() {
    let h = harness(|c| {
        c.group_initial_rebalance_delay_ms = 0;
        c.group_max_size = 2;
        c.group_coordinator_max_groups = 2;
        c.group_coordinator_max_members = 3;
    });
    let (_a, _b) = h.stable_pair("g");
    assert_eq!(
        h.join("g", "").expect("third").error,
        Some(ResponseError::GroupMaxSizeReached)
    );
    let one = h.join("h", "");
    h.advance(0);
    assert_eq!(one.expect("fits").error, None);
    assert_eq!(
        h.join("h", "").expect("fourth member broker-wide").error,
        Some(ResponseError::GroupMaxSizeReached)
    );
    assert_eq!(
        h.join("i", "").expect("third group").error,
        Some(ResponseError::CoordinatorNotAvailable)
    );
    assert_eq!(h.c.counts(), (2, 3, 0));
}

#[test]
fn refused_joins_leave_no_group_behind() {
    let h = harness(|c| c.group_initial_rebalance_delay_ms = 0);
    for i in 0..100 {
        let mut p = h.join_params(&format!("g{i}"), "", None);
        p.protocols.clear();
        assert_eq!(
            h.join_with(p).expect("refused").error,
            Some(ResponseError::InconsistentGroupProtocol)
        );
    }
    assert_eq!(h.c.counts(), (0, 0, 0));
}

#[test]
fn an_offset_commit_is_visible_only_once_appended_and_survives_the_group_emptying() {
    let h = harness(|c| c.group_initial_rebalance_delay_ms = 0);
    // A consumer without group management commits with generation -1.
    assert_eq!(h.commit("solo", "", -1, 17).expect("commit")[0].1, None);
    let fetched =
        h.c.handle_fetch_offsets("solo", Some(vec![(Arc::from("t"), 0), (Arc::from("t"), 1)]));
    assert_eq!(fetched[0].1.offset, 17);
    assert_eq!(fetched[1].1.offset, -1);
    let all = h.c.handle_fetch_offsets("solo", None);
    assert_eq!(all.len(), 1);
    assert_eq!(h.state("solo"), Some((GroupState::Empty, 0, 0)));
    assert_eq!(h.delete_groups(&["solo"]), vec![None]);
    assert_eq!(h.c.handle_fetch_offsets("solo", None).len(), 0);
    assert_eq!(h.c.counts(), (0, 0, 0));
}

#[test]
fn a_static_leader_rejoining_with_join_group_v9_is_told_to_skip_the_assignment() {
    let h = harness(|c| c.group_initial_rebalance_delay_ms = 0);
    let mut p = h.join_params("g", "", Some("leader-pod"));
    p.support_skipping_assignment = true;
    let a = h.join_with(p.clone());
    h.advance(0);
    let a = a.expect("a").member_id;
    h.sync("g", 1, &a, &[(&a, b"pa")]).expect("stable");
    let again = h.join_with(p).expect("answered at once");
    assert_eq!(again.error, None);
    assert_eq!(again.generation_id, 1, "no rebalance");
    assert!(again.skip_assignment, "v9: it leads, but must not reassign");
    assert_eq!(again.leader_id, again.member_id);
    assert_eq!(
        again.members.len(),
        1,
        "it gets the members, to keep watching them"
    );
    assert_eq!(h.state("g"), Some((GroupState::Stable, 1, 1)));
}

#[test]
fn a_new_coordinator_rebuilds_offsets_and_generations_from_the_offsets_topic() {
    let h = harness(|c| c.group_initial_rebalance_delay_ms = 0);
    // A Stable group at generation 1 that commits 5, then 9; a simple consumer that
    // commits 17; a group deleted after committing.
    let (a, _b) = h.stable_pair("grp");
    assert_eq!(h.commit("grp", &a, 1, 5).expect("commit")[0].1, None);
    assert_eq!(h.commit("grp", &a, 1, 9).expect("commit")[0].1, None);
    assert_eq!(h.commit("solo", "", -1, 17).expect("commit")[0].1, None);
    assert_eq!(h.commit("gone", "", -1, 3).expect("commit")[0].1, None);
    assert_eq!(h.delete_groups(&["gone"]), vec![None]);

    // Leadership of __consumer_offsets moves: a coordinator with an empty memory, on the
    // same replica manager (the same logs), loads every partition.
    let fresh = GroupCoordinator::new(&h.rm);
    let topic =
        h.rm.topic(crate::topics::OFFSETS_TOPIC)
            .expect("offsets topic");
    let mut loaded = super::load::LoadSummary::default();
    for p in &topic.partitions {
        let s = fresh.load_groups(p);
        loaded.records += s.records;
        loaded.groups += s.groups;
        loaded.offsets += s.offsets;
        loaded.unreadable += s.unreadable;
    }
    assert_eq!(loaded.unreadable, 0);
    assert_eq!(
        (loaded.groups, loaded.offsets),
        (2, 2),
        "grp and solo, one offset each"
    );
    let offset = |group: &str| {
        fresh.handle_fetch_offsets(group, Some(vec![(Arc::from("t"), 0)]))[0]
            .1
            .offset
    };
    assert_eq!(offset("grp"), 9, "the last commit wins");
    assert_eq!(offset("solo"), 17);
    assert_eq!(offset("gone"), -1, "a deleted group's offsets stay deleted");
    // The group comes back Stable at its generation, with both members, its leader and
    // their assignments; each member's session restarts from the load.
    let handle = fresh.group("grp").expect("grp loaded");
    {
        let g = handle.state.lock();
        assert_eq!((g.state(), g.generation_id), (GroupState::Stable, 1));
        assert_eq!(g.protocol_type.as_deref(), Some("consumer"));
        assert_eq!(g.size(), 2);
        assert!(g.is_leader(&a), "the leader stays the leader");
        assert!(g.members().all(|m| !m.assignment.is_empty()));
    }
    assert_eq!(fresh.counts().1, 2, "two members held");
    // A member that stops heartbeating expires one session timeout after the load.
    h.advance(SESSION as u64);
    assert_eq!(fresh.group("grp").map(|g| g.state.lock().size()), Some(0));
}
