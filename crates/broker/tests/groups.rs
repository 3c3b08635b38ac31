//! The group coordinator over the wire, on a manual clock, with the followers of
//! `__consumer_offsets` played by hand (`ManualFollower`): what a rebalance waits for, when a
//! session expires, and that SyncGroup and OffsetCommit wait for replication exactly like an
//! `acks=all` produce — held while both followers are paused, answered when they fetch.

mod common;

use bytes::Bytes;
use common::*;
use followersim::wire::KafkaConnection;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;
use kafka_protocol::ResponseError;
use purgatory::coordinator::records::{self, RecordKey};
use purgatory::coordinator::GroupCoordinator;

const GROUP: &str = "wire-group";
/// `__consumer_offsets` has 3 partitions in these tests; the group lives in this one.
const OFFSETS_PARTITIONS: i32 = 3;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn join_request(member: &str, session_ms: i32) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_session_timeout_ms(session_ms)
        .with_rebalance_timeout_ms(30_000)
        .with_member_id(text(member))
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(text("range"))
            .with_metadata(Bytes::from_static(b"subscription"))])
}

async fn broker(initial_delay_ms: i32) -> TestBroker {
    TestBroker::start_manual(|c| {
        c.group_initial_rebalance_delay_ms = initial_delay_ms;
        c.offsets_topic_num_partitions = OFFSETS_PARTITIONS;
    })
    .await
}

fn coordinator(tb: &TestBroker) -> std::sync::Arc<GroupCoordinator> {
    tb.broker.group_coordinator().clone()
}

/// (state, generation, members) of the group.
fn group_state(tb: &TestBroker) -> Option<(&'static str, i32, usize)> {
    let snapshot = coordinator(tb).snapshot(100);
    snapshot
        .list
        .iter()
        .find(|g| g.group_id == GROUP)
        .map(|g| (g.state, g.generation_id, g.members.len()))
}

fn members_awaiting_join(tb: &TestBroker) -> usize {
    coordinator(tb)
        .snapshot(100)
        .list
        .iter()
        .find(|g| g.group_id == GROUP)
        .map_or(0, |g| g.members.iter().filter(|m| m.awaiting_join).count())
}

/// JoinGroup v3 (no MEMBER_ID_REQUIRED): written now, answered later.
async fn start_join(conn: &mut KafkaConnection, member: &str, session_ms: i32) {
    conn.write_request(&join_request(member, session_ms), 3)
        .await
        .expect("JoinGroup sent");
}

async fn read_join(conn: &mut KafkaConnection) -> JoinGroupResponse {
    conn.read_response::<JoinGroupRequest>(3)
        .await
        .expect("JoinGroup answered")
        .1
}

async fn heartbeat(conn: &mut KafkaConnection, member: &StrBytes, generation: i32) -> i16 {
    let request = HeartbeatRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_member_id(member.clone())
        .with_generation_id(generation);
    conn.send(&request, 3).await.expect("Heartbeat").error_code
}

/// Two members join an Empty group; the second arrives during the initial delay, so the
/// InitialDelayedJoin waits again and both land in generation 1. Returns their
/// connections and member ids, leader first.
async fn two_members(
    tb: &TestBroker,
) -> ((KafkaConnection, StrBytes), (KafkaConnection, StrBytes)) {
    let mut a = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    let mut b = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    start_join(&mut a, "", 10_000).await;
    wait_until("a's JoinGroup parked", || members_awaiting_join(tb) == 1).await;
    tb.rm().timer.advance_by(1_000);
    start_join(&mut b, "", 10_000).await;
    wait_until("b's JoinGroup parked", || members_awaiting_join(tb) == 2).await;
    // The first delay (3000 ms) ends with b new: wait another 3000 ms.
    tb.rm().timer.advance_by(2_000);
    assert_eq!(group_state(tb), Some(("PreparingRebalance", 0, 2)));
    tb.rm().timer.advance_by(2_999);
    assert_eq!(
        group_state(tb),
        Some(("PreparingRebalance", 0, 2)),
        "at 5999 ms"
    );
    tb.rm().timer.advance_by(1);
    let (ja, jb) = (read_join(&mut a).await, read_join(&mut b).await);
    assert_eq!((ja.error_code, jb.error_code), (0, 0));
    assert_eq!((ja.generation_id, jb.generation_id), (1, 1));
    assert_eq!(ja.leader, ja.member_id);
    assert_eq!(ja.members.len(), 2);
    assert!(jb.members.is_empty());
    assert_eq!(group_state(tb), Some(("CompletingRebalance", 1, 2)));
    ((a, ja.member_id), (b, jb.member_id))
}

#[tokio::test]
async fn two_members_join_over_the_wire_after_the_initial_delay_and_one_expires_at_its_session_timeout(
) {
    let tb = broker(3_000).await;
    let ((mut a, a_id), (mut b, b_id)) = two_members(&tb).await;
    // Both heartbeat (the group is CompletingRebalance: that is allowed).
    assert_eq!(heartbeat(&mut a, &a_id, 1).await, 0);
    assert_eq!(heartbeat(&mut b, &b_id, 1).await, 0);
    let now = tb.rm().now_ms();
    // a keeps heartbeating; b closes its connection, which removes nothing.
    drop(b);
    for _ in 0..4 {
        tb.rm().timer.advance_by(2_499);
        assert_eq!(heartbeat(&mut a, &a_id, 1).await, 0);
    }
    assert_eq!(tb.rm().now_ms(), now + 9_996);
    tb.rm().timer.advance_by(3);
    assert_eq!(
        group_state(&tb),
        Some(("CompletingRebalance", 1, 2)),
        "at 9999 ms b is still there"
    );
    tb.rm().timer.advance_by(1);
    // b's DelayedHeartbeat expired at exactly session.timeout.ms: it is removed and the
    // group rebalances; a is told so by its next heartbeat.
    assert_eq!(group_state(&tb), Some(("PreparingRebalance", 1, 1)));
    assert_eq!(
        heartbeat(&mut a, &a_id, 1).await,
        ResponseError::RebalanceInProgress.code()
    );
    start_join(&mut a, &a_id.to_string(), 10_000).await;
    let rejoined = read_join(&mut a).await;
    assert_eq!((rejoined.generation_id, rejoined.members.len()), (2, 1));
}

/// A follower replica of `__consumer_offsets-p` fetching by hand.
struct OffsetsFollowers {
    followers: Vec<ManualFollower>,
    partition: i32,
    leo: i64,
}

impl OffsetsFollowers {
    async fn new(tb: &TestBroker) -> Self {
        let partition = records::partition_for(GROUP, OFFSETS_PARTITIONS);
        let mut followers = Vec::new();
        for id in [2, 3] {
            followers.push(ManualFollower::connect(tb.addr, id).await);
        }
        OffsetsFollowers {
            followers,
            partition,
            leo: 0,
        }
    }

    /// Both followers fetch everything new, then report their new log end: the HW moves.
    /// Returns the records fetched.
    async fn replicate(&mut self) -> Bytes {
        let mut fetched = Bytes::new();
        for f in &mut self.followers {
            let data = f
                .fetch("__consumer_offsets", self.partition, self.leo)
                .await;
            fetched = data.records.unwrap_or_default();
        }
        let mut end = self.leo;
        let mut buf = fetched.clone();
        for set in RecordBatchDecoder::decode_all(&mut buf).expect("batches decode") {
            end = end.max(
                set.records
                    .iter()
                    .map(|r| r.offset + 1)
                    .max()
                    .unwrap_or(end),
            );
        }
        self.leo = end;
        for f in &mut self.followers {
            f.fetch("__consumer_offsets", self.partition, self.leo)
                .await;
        }
        fetched
    }
}

#[tokio::test]
async fn sync_group_and_offset_commits_wait_for_the_followers_like_an_acks_all_produce() {
    let tb = broker(0).await;
    let mut conn = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    create(&mut conn, "t", 1, &[]).await;
    let found = conn
        .send(&FindCoordinatorRequest::default().with_key(text(GROUP)), 2)
        .await
        .unwrap();
    assert_eq!((found.error_code, found.node_id), (0, BrokerId(1)));
    let offsets_topic = tb
        .rm()
        .topic("__consumer_offsets")
        .expect("created by FindCoordinator");
    assert!(offsets_topic.internal);
    assert_eq!(offsets_topic.partitions.len(), OFFSETS_PARTITIONS as usize);
    assert_eq!(offsets_topic.replication_factor, 3);
    let mut followers = OffsetsFollowers::new(&tb).await;
    followers.replicate().await; // both in sync with the empty log

    // One member: JoinGroup v5 asks for a member id first.
    let first = conn.send(&join_request("", 10_000), 5).await.unwrap();
    assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
    conn.write_request(&join_request(&first.member_id.to_string(), 10_000), 5)
        .await
        .unwrap();
    wait_until("JoinGroup parked", || members_awaiting_join(&tb) == 1).await;
    tb.rm().timer.advance_by(0);
    let (_, joined) = conn.read_response::<JoinGroupRequest>(5).await.unwrap();
    assert_eq!((joined.error_code, joined.generation_id), (0, 1));
    let me = joined.member_id.clone();

    // The leader's SyncGroup: its assignment is appended to __consumer_offsets, and the
    // answer waits in the produce purgatory while the followers do not fetch.
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_generation_id(1)
        .with_member_id(me.clone())
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(me.clone())
            .with_assignment(Bytes::from_static(b"t-0"))]);
    conn.write_request(&sync, 3).await.unwrap();
    wait_until(
        "the group metadata append parked as a DelayedProduce",
        || tb.rm().produce_purgatory.delayed() == 1,
    )
    .await;
    tb.rm().timer.advance_by(4_999);
    assert_eq!(
        group_state(&tb),
        Some(("CompletingRebalance", 1, 1)),
        "SyncGroup still held"
    );
    let pending = tb.rm().produce_purgatory.snapshot(10).pending;
    assert_eq!(
        pending[0].keys,
        vec![format!("__consumer_offsets-{}", followers.partition)]
    );
    let fetched = followers.replicate().await;
    let (_, synced) = conn.read_response::<SyncGroupRequest>(3).await.unwrap();
    assert_eq!(
        (synced.error_code, &synced.assignment[..]),
        (0, &b"t-0"[..])
    );
    assert_eq!(group_state(&tb), Some(("Stable", 1, 1)));
    // What the followers replicated is Kafka's group metadata record.
    let mut buf = fetched;
    let record = RecordBatchDecoder::decode_all(&mut buf)
        .unwrap()
        .remove(0)
        .records
        .remove(0);
    assert_eq!(
        records::read_key(record.key.unwrap()).unwrap(),
        RecordKey::GroupMetadata {
            group: GROUP.into()
        }
    );
    let value = records::read_group_metadata_value(record.value.unwrap()).unwrap();
    assert_eq!(
        (value.generation, value.protocol.as_deref()),
        (1, Some("range"))
    );
    assert_eq!(&value.members[0].assignment[..], b"t-0");

    // An offset commit waits the same way: not visible, not answered, until replicated.
    let commit = |offset: i64| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(text(GROUP)))
            .with_generation_id_or_member_epoch(1)
            .with_member_id(me.clone())
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(offset)])])
    };
    let mut reader = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    let fetch_offset = |require_stable: bool| {
        OffsetFetchRequest::default()
            .with_group_id(GroupId(text(GROUP)))
            .with_require_stable(require_stable)
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(name("t"))
                .with_partition_indexes(vec![0])]))
    };
    conn.write_request(&commit(42), 8).await.unwrap();
    wait_until("the commit parked as a DelayedProduce", || {
        tb.rm().produce_purgatory.delayed() == 1
    })
    .await;
    let before = reader.send(&fetch_offset(false), 7).await.unwrap();
    assert_eq!(
        before.topics[0].partitions[0].committed_offset, -1,
        "not replicated yet"
    );
    // With require_stable, the fetch waits behind the commit (as Kafka 4.4's coordinator
    // orders a partition's answers): a second wait in the produce purgatory.
    reader.write_request(&fetch_offset(true), 7).await.unwrap();
    wait_until("the stable OffsetFetch waits behind the commit", || {
        tb.rm().produce_purgatory.delayed() == 2
    })
    .await;
    let fetched = followers.replicate().await;
    let (_, committed) = conn.read_response::<OffsetCommitRequest>(8).await.unwrap();
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    let (_, stable) = reader.read_response::<OffsetFetchRequest>(7).await.unwrap();
    assert_eq!(
        (
            stable.error_code,
            stable.topics[0].partitions[0].committed_offset
        ),
        (0, 42),
        "answered once the commit was replicated, and sees it"
    );
    let mut buf = fetched;
    let record = RecordBatchDecoder::decode_all(&mut buf)
        .unwrap()
        .remove(0)
        .records
        .remove(0);
    assert_eq!(
        records::read_key(record.key.unwrap()).unwrap(),
        RecordKey::OffsetCommit {
            group: GROUP.into(),
            topic: "t".into(),
            partition: 0
        }
    );
    assert_eq!(
        records::read_offset_commit_value(record.value.unwrap())
            .unwrap()
            .offset,
        42
    );

    // With the followers still paused past offsets.commit.timeout.ms, the commit fails
    // with COORDINATOR_NOT_AVAILABLE (Kafka's mapping of REQUEST_TIMED_OUT), and the cache
    // keeps the last replicated offset.
    conn.write_request(&commit(43), 8).await.unwrap();
    wait_until("the commit parked", || {
        tb.rm().produce_purgatory.delayed() == 1
    })
    .await;
    tb.rm().timer.advance_by(4_999);
    assert_eq!(
        tb.rm().produce_purgatory.delayed(),
        1,
        "still parked at offsets.commit.timeout.ms - 1"
    );
    tb.rm().timer.advance_by(1);
    let (_, failed) = conn.read_response::<OffsetCommitRequest>(8).await.unwrap();
    assert_eq!(
        failed.topics[0].partitions[0].error_code,
        ResponseError::CoordinatorNotAvailable.code()
    );
    let after = reader.send(&fetch_offset(false), 7).await.unwrap();
    assert_eq!(after.topics[0].partitions[0].committed_offset, 42);
    // The failed commit's records are still in the log, unreplicated: a heartbeat and a
    // stable OffsetFetch wait behind them, and fail at offsets.commit.timeout.ms — what
    // Kafka 4.4 answers (COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR).
    let mut beater = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    let beat = HeartbeatRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_member_id(me.clone())
        .with_generation_id(1);
    beater.write_request(&beat, 3).await.unwrap();
    reader.write_request(&fetch_offset(true), 7).await.unwrap();
    wait_until("the heartbeat and the stable fetch wait", || {
        tb.rm().produce_purgatory.delayed() == 2
    })
    .await;
    tb.rm().timer.advance_by(4_999);
    assert_eq!(
        tb.rm().produce_purgatory.delayed(),
        2,
        "both still wait at 4999 ms"
    );
    tb.rm().timer.advance_by(1);
    let (_, beaten) = beater.read_response::<HeartbeatRequest>(3).await.unwrap();
    assert_eq!(
        beaten.error_code,
        ResponseError::CoordinatorNotAvailable.code()
    );
    let (_, refused) = reader.read_response::<OffsetFetchRequest>(7).await.unwrap();
    assert_eq!(refused.error_code, ResponseError::NotCoordinator.code());
    // Once the followers fetch again, a heartbeat is answered at once.
    followers.replicate().await;
    assert_eq!(heartbeat(&mut beater, &me, 1).await, 0);
}

#[tokio::test]
async fn a_static_member_restarting_keeps_its_generation_over_the_wire() {
    let tb = TestBroker::start_manual(|c| {
        c.group_initial_rebalance_delay_ms = 0;
        c.offsets_topic_num_partitions = OFFSETS_PARTITIONS;
        c.offsets_topic_replication_factor = 1;
    })
    .await;
    let mut conn = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    let join =
        |member: &str| join_request(member, 10_000).with_group_instance_id(Some(text("pod-1")));
    conn.write_request(&join(""), 5).await.unwrap();
    wait_until("parked", || members_awaiting_join(&tb) == 1).await;
    tb.rm().timer.advance_by(0);
    let (_, joined) = conn.read_response::<JoinGroupRequest>(5).await.unwrap();
    assert_eq!((joined.error_code, joined.generation_id), (0, 1));
    let old = joined.member_id.clone();
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_generation_id(1)
        .with_member_id(old.clone())
        .with_group_instance_id(Some(text("pod-1")))
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(old.clone())
            .with_assignment(Bytes::from_static(b"all"))]);
    assert_eq!(conn.send(&sync, 3).await.unwrap().error_code, 0);
    assert_eq!(group_state(&tb), Some(("Stable", 1, 1)));

    // The process restarts: a new connection, the same group.instance.id, no member id.
    let mut restarted = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    let again = restarted.send(&join(""), 5).await.unwrap();
    assert_eq!(again.error_code, 0, "answered at once: no rebalance");
    assert_eq!(again.generation_id, 1);
    assert_ne!(again.member_id, old);
    assert_eq!(group_state(&tb), Some(("Stable", 1, 1)));
    let beat = |member: &StrBytes| {
        HeartbeatRequest::default()
            .with_group_id(GroupId(text(GROUP)))
            .with_member_id(member.clone())
            .with_group_instance_id(Some(text("pod-1")))
            .with_generation_id(1)
    };
    assert_eq!(
        conn.send(&beat(&old), 3).await.unwrap().error_code,
        ResponseError::FencedInstanceId.code()
    );
    assert_eq!(
        restarted
            .send(&beat(&again.member_id), 3)
            .await
            .unwrap()
            .error_code,
        0
    );
}

#[tokio::test]
async fn sync_group_errors_when_the_followers_do_not_replicate_its_assignment() {
    let tb = TestBroker::start_manual(|c| {
        c.group_initial_rebalance_delay_ms = 0;
        c.offsets_topic_num_partitions = 1;
        c.replica_lag_time_max_ms = 2_000;
    })
    .await;
    let mut conn = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    conn.write_request(&join_request("", 10_000), 3)
        .await
        .unwrap();
    wait_until("parked", || members_awaiting_join(&tb) == 1).await;
    tb.rm().timer.advance_by(0);
    let joined = read_join(&mut conn).await;
    let me = joined.member_id.clone();
    let sync = |generation: i32| {
        SyncGroupRequest::default()
            .with_group_id(GroupId(text(GROUP)))
            .with_generation_id(generation)
            .with_member_id(me.clone())
            .with_assignments(vec![SyncGroupRequestAssignment::default()
                .with_member_id(me.clone())
                .with_assignment(Bytes::from_static(b"all"))])
    };
    // No follower fetches __consumer_offsets. The assignment is appended and waits; the
    // ISR shrinks to the leader (replica.lag.time.max.ms, checked every half of it), below
    // min.insync.replicas, so the high watermark cannot pass it: at offsets.commit.timeout.ms
    // the SyncGroup fails with COORDINATOR_NOT_AVAILABLE (Kafka 4.4's answer to a group it
    // could not store in time), and the group rebalances.
    conn.write_request(&sync(1), 3).await.unwrap();
    wait_until("parked", || tb.rm().produce_purgatory.delayed() == 1).await;
    tb.rm().timer.advance_by(4_999);
    assert_eq!(tb.isr("__consumer_offsets", 0), vec![1]);
    tb.rm().timer.advance_by(1);
    let (_, timed_out) = conn.read_response::<SyncGroupRequest>(3).await.unwrap();
    assert_eq!(
        timed_out.error_code,
        ResponseError::CoordinatorNotAvailable.code()
    );
    assert_eq!(group_state(&tb), Some(("PreparingRebalance", 1, 1)));
    // It rejoins; now the append is refused up front (NOT_ENOUGH_REPLICAS), which
    // SyncGroup answers as COORDINATOR_NOT_AVAILABLE.
    start_join(&mut conn, &me.to_string(), 10_000).await;
    let rejoined = read_join(&mut conn).await;
    assert_eq!(rejoined.generation_id, 2);
    let refused = conn.send(&sync(2), 3).await.unwrap();
    assert_eq!(
        refused.error_code,
        ResponseError::CoordinatorNotAvailable.code()
    );
    assert_eq!(
        tb.rm().produce_purgatory.delayed(),
        0,
        "refused up front, nothing parked"
    );
}
