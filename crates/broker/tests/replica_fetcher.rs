//! A broker following another over the wire: the `followersim` fetch loop, fetching from a
//! leader broker's listener with this broker's id, appending into this broker's own
//! partition log (in the follower role) through `BrokerLogs`. What a user of a cluster
//! relies on: the follower's copy is the leader's, batch for batch; an acks=all produce is
//! answered once it has fetched; its memory is counted; and a broker that led, took
//! records, and now follows a new leader that never had them truncates them (KIP-101).
//!
//! Broker 1 runs on a manual clock, so a parked follower fetch waits for data, never for a
//! timeout; a real-time limit only turns a hang into a failure.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use followersim::wire::KafkaConnection;
use followersim::{Follower, FollowerConfig, FollowerHandle};
use purgatory::config::{BrokerConfig, ClockMode};
use purgatory::partition::PartitionHandle;
use purgatory::replica_fetcher::BrokerLogs;
use purgatory::replica_manager::{AppendOrigin, ReplicaManager};
use purgatory::request::RequestContext;
use purgatory::topics::NewTopic;
use replog::ReadBound;

/// Broker 2, on a manual clock and without a listener, hosting `t` with `replication`.
fn broker_2(replication: i16) -> Arc<ReplicaManager> {
    let rm = ReplicaManager::new(BrokerConfig {
        broker_id: 2,
        clock: ClockMode::Manual,
        ..BrokerConfig::default()
    });
    let topic = NewTopic {
        name: "t".into(),
        partitions: 1,
        replication_factor: replication,
        configs: vec![],
    };
    rm.create_topic(topic, false)
        .expect("t created on broker 2");
    rm
}

/// Broker 2's fetcher of what broker 1 (at `leader`) leads.
fn fetcher(leader: &TestBroker, follower: &Arc<ReplicaManager>) -> FollowerHandle {
    let config = FollowerConfig {
        leader_id: Some(1),
        metadata_refresh_ms: 50,
        fetch_backoff_ms: 20,
        ..FollowerConfig::new(2, leader.bootstrap())
    };
    Follower::spawn_with_logs(config, BrokerLogs::new(follower))
}

/// Every record batch of a partition's log, as stored.
fn all_batches(handle: &PartitionHandle) -> bytes::Bytes {
    let log = handle.lock();
    log.read(log.log_start_offset(), usize::MAX, ReadBound::LogEnd)
        .expect("readable")
        .records
}

/// Produces `count` records to partition 0 of `topic` on `conn` with `acks`, failing
/// instead of hanging if no answer comes.
async fn produce_now(conn: &mut KafkaConnection, topic: &str, acks: i16, count: usize) -> i16 {
    let request = produce(topic, acks, 30_000, batch(count, 20, None));
    let send = conn.send(&request, 9);
    let response = tokio::time::timeout(Duration::from_secs(20), send)
        .await
        .expect("the produce was answered")
        .expect("a produce response");
    partition_result(&response).0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_following_a_leader_holds_its_batches_and_acks_all_waits_for_it() {
    let (leader, mut conn) = broker_with_topic("t", 2, &[("min.insync.replicas", "2")]).await;
    let follower = broker_2(2);
    let copy = follower.partition("t", 0).expect("broker 2 hosts t-0");
    follower
        .make_follower(&copy, 1, 0)
        .expect("follows broker 1");
    let f = fetcher(&leader, &follower);

    // Broker 2 is in the ISR: the write is answered only once it has fetched it.
    assert_eq!(produce_now(&mut conn, "t", -1, 3).await, 0);
    assert_eq!(produce_now(&mut conn, "t", -1, 2).await, 0);
    let original = leader.rm().partition("t", 0).expect("t-0");
    assert_eq!(original.lock().high_watermark(), 5);

    // The fetch that moved the leader's HW to 5 carried none of it back; the next answer
    // does, when the follower's parked fetch (no new data) reaches its max_wait_ms.
    wait_until("the follower's copy and HW to catch up", || {
        leader.rm().timer.advance_by(100);
        let log = copy.lock();
        log.log_end_offset() == 5 && log.high_watermark() == 5
    })
    .await;
    assert_eq!(
        all_batches(&copy),
        all_batches(&original),
        "the same batches, byte for byte"
    );
    assert_eq!(copy.lock().latest_epoch(), Some(0));
    assert_eq!(
        follower.log_memory.used(),
        copy.lock().size_bytes(),
        "broker 2's memory counts its follower copy"
    );
    assert!(copy.lock().size_bytes() > 0);
    // A follower serves no clients: a produce to it is refused.
    assert!(copy.lock().ensure_leader().is_err());
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_former_leader_truncates_what_the_new_leader_never_had() {
    let (leader, mut conn) = broker_with_topic("t", 2, &[("min.insync.replicas", "1")]).await;
    let original = leader.rm().partition("t", 0).expect("t-0");
    // Broker 1 has offsets 0..3 in epoch 0; then it is elected for epoch 1, with broker 2
    // out of the ISR, and takes offsets 3..5 in epoch 1.
    assert_eq!(produce_now(&mut conn, "t", 1, 3).await, 0);
    leader
        .rm()
        .make_leader(&original, 1, vec![1, 2], vec![1])
        .expect("leader for epoch 1");
    assert_eq!(produce_now(&mut conn, "t", 1, 2).await, 0);

    // Broker 2 led epoch 0 and took five records in it, acks=1, that nobody fetched.
    let follower = broker_2(1);
    let copy = follower.partition("t", 0).expect("broker 2 hosts t-0");
    follower.append_records(
        &RequestContext::internal("test"),
        30_000,
        1,
        AppendOrigin::Client,
        vec![(copy.tp.clone(), batch(3, 20, None))],
        Box::new(|_| {}),
    );
    follower.append_records(
        &RequestContext::internal("test"),
        30_000,
        1,
        AppendOrigin::Client,
        vec![(copy.tp.clone(), batch(2, 20, None))],
        Box::new(|_| {}),
    );
    assert_eq!(copy.lock().log_end_offset(), 5);
    let lost = all_batches(&copy);

    // It comes back as broker 1's follower in epoch 1: its epoch 0 ends at 5, broker 1's
    // at 3. It truncates its two last records and fetches broker 1's epoch 1 instead.
    follower
        .make_follower(&copy, 1, 1)
        .expect("follows broker 1");
    let f = fetcher(&leader, &follower);
    wait_until("the copy to match the leader's log", || {
        all_batches(&copy) == all_batches(&original)
    })
    .await;
    assert_eq!(copy.lock().log_end_offset(), 5);
    assert_ne!(all_batches(&copy), lost, "offsets 3 and 4 were replaced");
    let epochs: Vec<(i32, i64)> = copy
        .lock()
        .epoch_cache()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect();
    assert_eq!(epochs, vec![(0, 0), (1, 3)]);
    assert_eq!(follower.log_memory.used(), copy.lock().size_bytes());
    f.shutdown().await;
}
