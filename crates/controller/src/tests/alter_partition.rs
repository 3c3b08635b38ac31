//! AlterPartition: the leader changes its ISR, if its view of the partition is current.

use super::{cluster, state, tp};
use crate::{Change, Controller, ErrorCode, TopicPartition};

/// Three brokers, topic `t` with one partition [1, 2, 3], led by 1 at epochs 0/0.
fn three() -> (Controller, TopicPartition) {
    let mut c = cluster(3);
    c.create_topic("t", 1, 3, false).unwrap();
    (c, tp("t", 0))
}

#[test]
fn the_leader_shrinks_and_expands_the_isr_each_step_one_partition_epoch() {
    let (mut c, t) = three();
    let out = c.alter_partition(&t, 1, 0, 0, &[1, 2]).unwrap();
    assert_eq!(out.state.isr, vec![1, 2]);
    assert_eq!((out.state.leader_epoch, out.state.partition_epoch), (0, 1));
    assert_eq!(
        out.change,
        Some(Change::IsrChanged {
            tp: t.clone(),
            leader: 1,
            leader_epoch: 0,
            old: vec![1, 2, 3],
            new: vec![1, 2],
            partition_epoch: 1,
        })
    );
    assert_eq!(state(&c, "t", 0), out.state);
    let out = c.alter_partition(&t, 1, 0, 1, &[3, 1, 2]).unwrap();
    assert_eq!(out.state.isr, vec![1, 2, 3], "stored in replica order");
    assert_eq!(out.state.partition_epoch, 2);
}

#[test]
fn an_unchanged_isr_is_accepted_and_changes_nothing() {
    let (mut c, t) = three();
    let out = c.alter_partition(&t, 1, 0, 0, &[2, 3, 1]).unwrap();
    assert_eq!(out.change, None);
    assert_eq!(out.state.partition_epoch, 0);
}

#[test]
fn a_deposed_leaders_stale_leader_epoch_is_fenced() {
    let (mut c, t) = three();
    c.broker_failed(1).unwrap();
    c.broker_restarted(1).unwrap();
    // 1 still thinks it leads at epoch 0; 2 leads at epoch 1.
    let err = c.alter_partition(&t, 1, 0, 0, &[1]).unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_error_code()),
        (ErrorCode::FencedLeaderEpoch, 74)
    );
    // Even with the current partition epoch.
    let pe = state(&c, "t", 0).partition_epoch;
    let err = c.alter_partition(&t, 1, 0, pe, &[1]).unwrap_err();
    assert_eq!(err.code(), ErrorCode::FencedLeaderEpoch);
}

#[test]
fn a_leader_epoch_newer_than_the_controllers_is_answered_not_controller() {
    let (mut c, t) = three();
    let err = c.alter_partition(&t, 1, 1, 0, &[1, 2]).unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_error_code()),
        (ErrorCode::NotController, 41)
    );
}

#[test]
fn a_stale_partition_epoch_is_an_invalid_update_version() {
    let (mut c, t) = three();
    // The controller removes dead follower 3 (partition epoch 1) before the leader's
    // own shrink to [1, 2], based on epoch 0, arrives.
    c.broker_failed(3).unwrap();
    let err = c.alter_partition(&t, 1, 0, 0, &[1, 2]).unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_error_code()),
        (ErrorCode::InvalidUpdateVersion, 95)
    );
    let err = c.alter_partition(&t, 1, 0, 7, &[1, 2]).unwrap_err();
    assert_eq!(
        err.code(),
        ErrorCode::InvalidUpdateVersion,
        "a future epoch too"
    );
    assert!(c.alter_partition(&t, 1, 0, 1, &[1]).is_ok());
}

#[test]
fn a_request_from_a_follower_is_refused_as_not_leader() {
    let (mut c, t) = three();
    let err = c.alter_partition(&t, 2, 0, 0, &[1, 2]).unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_error_code()),
        (ErrorCode::NotLeaderOrFollower, 6)
    );
}

#[test]
fn an_isr_that_is_empty_repeats_or_leaves_out_the_leader_is_an_invalid_request() {
    let (mut c, t) = three();
    for bad in [&[][..], &[1, 2, 2], &[2, 3]] {
        let err = c.alter_partition(&t, 1, 0, 0, bad).unwrap_err();
        assert_eq!(
            (err.code(), err.kafka_error_code()),
            (ErrorCode::InvalidRequest, 42),
            "{bad:?}"
        );
    }
}

#[test]
fn adding_a_dead_broker_or_a_non_replica_is_ineligible() {
    let mut c = cluster(4);
    c.create_topic_with_assignment("t", &[vec![1, 2, 3]], false)
        .unwrap();
    let t = tp("t", 0);
    c.broker_failed(3).unwrap();
    let err = c.alter_partition(&t, 1, 0, 1, &[1, 2, 3]).unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_error_code()),
        (ErrorCode::IneligibleReplica, 107)
    );
    let err = c.alter_partition(&t, 1, 0, 1, &[1, 2, 4]).unwrap_err();
    assert_eq!(
        err.code(),
        ErrorCode::IneligibleReplica,
        "4 is alive but not a replica"
    );
    let err = c.alter_partition(&t, 1, 0, 1, &[1, 9]).unwrap_err();
    assert_eq!(
        err.code(),
        ErrorCode::IneligibleReplica,
        "9 is no broker at all"
    );
}

#[test]
fn an_unknown_topic_or_partition_is_refused() {
    let (mut c, _) = three();
    for bad in [tp("nope", 0), tp("t", 1), tp("t", -1)] {
        let err = c.alter_partition(&bad, 1, 0, 0, &[1]).unwrap_err();
        assert_eq!(
            (err.code(), err.kafka_error_code()),
            (ErrorCode::UnknownTopicOrPartition, 3)
        );
    }
}

#[test]
fn a_refused_alter_partition_changes_nothing() {
    let (mut c, t) = three();
    let before = c.snapshot();
    for (from, le, pe, isr) in [(1, 0, 0, &[1, 4][..]), (1, 0, 3, &[1]), (2, 0, 0, &[2])] {
        assert!(c.alter_partition(&t, from, le, pe, isr).is_err());
    }
    assert_eq!(c.snapshot(), before);
}

#[test]
fn a_leaderless_partition_takes_no_alter_partition() {
    let mut c = cluster(1);
    c.create_topic("t", 1, 1, false).unwrap();
    c.broker_failed(1).unwrap();
    c.broker_restarted(1).unwrap();
    c.broker_failed(1).unwrap();
    // Leader epoch 3 now, leader -1.
    let err = c.alter_partition(&tp("t", 0), 1, 2, 3, &[1]).unwrap_err();
    assert_eq!(err.code(), ErrorCode::FencedLeaderEpoch);
    let err = c.alter_partition(&tp("t", 0), 1, 3, 3, &[1]).unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotLeaderOrFollower);
}
