//! Preferred leader election: leadership goes back to the first replica when it can.

use super::{about, cluster, state, tp};
use crate::{Change, ElectionReason, ErrorCode};

#[test]
fn the_first_replica_gets_leadership_back_once_it_is_in_sync_again() {
    let mut c = cluster(3);
    c.create_topic("t", 1, 3, false).unwrap();
    let t = tp("t", 0);
    c.broker_failed(1).unwrap();
    c.broker_restarted(1).unwrap();
    let err = c.elect_preferred(&t).unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_error_code()),
        (ErrorCode::PreferredLeaderNotAvailable, 80),
        "1 is alive but not in the ISR"
    );
    let p = state(&c, "t", 0);
    c.alter_partition(&t, 2, p.leader_epoch, p.partition_epoch, &[1, 2, 3])
        .unwrap();
    let changes = c.elect_preferred(&t).unwrap();
    assert_eq!(
        changes,
        vec![Change::LeaderElected {
            tp: t.clone(),
            old_leader: 2,
            new_leader: 1,
            leader_epoch: 2,
            isr: vec![1, 2, 3],
            partition_epoch: 3,
            clean: true,
            reason: ElectionReason::Preferred,
        }]
    );
    let err = c.elect_preferred(&t).unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_error_code()),
        (ErrorCode::ElectionNotNeeded, 84)
    );
    let err = c.elect_preferred(&tp("t", 5)).unwrap_err();
    assert_eq!(err.code(), ErrorCode::UnknownTopicOrPartition);
}

#[test]
fn a_dead_preferred_replica_is_not_available() {
    let mut c = cluster(2);
    c.create_topic("t", 1, 2, false).unwrap();
    c.broker_failed(1).unwrap();
    let err = c.elect_preferred(&tp("t", 0)).unwrap_err();
    assert_eq!(err.code(), ErrorCode::PreferredLeaderNotAvailable);
}

#[test]
fn elect_preferred_leaders_rebalances_every_partition_it_can() {
    let mut c = cluster(3);
    c.create_topic("t", 3, 3, false).unwrap();
    c.controlled_shutdown(1).unwrap();
    c.broker_restarted(1).unwrap();
    // Partition 0 ([1, 2, 3]) now has leader 2; let 1 back into its ISR only.
    let p = state(&c, "t", 0);
    c.alter_partition(
        &tp("t", 0),
        2,
        p.leader_epoch,
        p.partition_epoch,
        &[1, 2, 3],
    )
    .unwrap();
    let changes = c.elect_preferred_leaders();
    assert_eq!(changes.len(), 1);
    assert!(matches!(
        about(&changes, "t", 0)[..],
        [Change::LeaderElected {
            new_leader: 1,
            reason: ElectionReason::Preferred,
            ..
        }]
    ));
    assert!(c.elect_preferred_leaders().is_empty());
}
