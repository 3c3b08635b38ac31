//! A broker dies: leaders fail over along the replica order, ISRs shrink, and a
//! partition whose whole ISR is dead waits, leaderless, for its last leader.

use super::{about, cluster, state, tp};
use crate::{Change, ElectionReason, ErrorCode, NO_LEADER};

#[test]
fn a_leader_kill_elects_the_next_isr_member_with_the_leader_epoch_plus_one() {
    let mut c = cluster(3);
    c.create_topic("t", 3, 3, false).unwrap();
    // Partition 1 is [2, 3, 1], led by 2.
    let changes = c.broker_failed(2).unwrap();
    assert_eq!(
        changes[0],
        Change::BrokerDied {
            id: 2,
            incarnation: 0,
            controlled: false
        },
        "the death comes first, then what it causes"
    );
    assert_eq!(
        about(&changes, "t", 1),
        vec![&Change::LeaderElected {
            tp: tp("t", 1),
            old_leader: 2,
            new_leader: 3,
            leader_epoch: 1,
            isr: vec![3, 1],
            partition_epoch: 1,
            clean: true,
            reason: ElectionReason::LeaderFailed,
        }]
    );
    let p1 = state(&c, "t", 1);
    assert_eq!((p1.leader, p1.leader_epoch, p1.partition_epoch), (3, 1, 1));
    assert_eq!(p1.isr, vec![3, 1]);
    assert_eq!(p1.replicas, vec![2, 3, 1], "the assignment does not change");
    assert!(!c.image().is_alive(2));
    assert!(c.image().partitions_led_by(2).is_empty());
}

#[test]
fn the_election_follows_the_replica_order_not_the_broker_ids() {
    let mut c = cluster(4);
    c.create_topic_with_assignment("t", &[vec![1, 4, 2, 3]], false)
        .unwrap();
    c.broker_failed(1).unwrap();
    assert_eq!(state(&c, "t", 0).leader, 4);
    c.broker_failed(4).unwrap();
    assert_eq!(state(&c, "t", 0).leader, 2);
    assert_eq!(state(&c, "t", 0).leader_epoch, 2);
}

#[test]
fn a_followers_death_shrinks_the_isr_and_keeps_the_leader_epoch() {
    let mut c = cluster(3);
    c.create_topic("t", 3, 3, false).unwrap();
    let changes = c.broker_failed(3).unwrap();
    // Partition 0 is [1, 2, 3]: 3 follows.
    assert_eq!(
        about(&changes, "t", 0),
        vec![&Change::IsrChanged {
            tp: tp("t", 0),
            leader: 1,
            leader_epoch: 0,
            old: vec![1, 2, 3],
            new: vec![1, 2],
            partition_epoch: 1,
        }]
    );
    let p0 = state(&c, "t", 0);
    assert_eq!((p0.leader, p0.leader_epoch, p0.partition_epoch), (1, 0, 1));
    // One change per partition: two shrinks and one failover.
    assert_eq!(changes.len(), 4);
}

#[test]
fn the_last_isr_members_death_leaves_no_leader_and_keeps_it_in_the_isr() {
    let mut c = cluster(3);
    c.create_topic("t", 1, 3, false).unwrap();
    c.broker_failed(2).unwrap();
    c.broker_failed(3).unwrap();
    assert_eq!(state(&c, "t", 0).isr, vec![1]);
    let changes = c.broker_failed(1).unwrap();
    assert_eq!(
        about(&changes, "t", 0),
        vec![&Change::NoLeader {
            tp: tp("t", 0),
            old_leader: 1,
            leader_epoch: 1,
            isr: vec![1],
            partition_epoch: 3,
        }]
    );
    let p = state(&c, "t", 0);
    assert_eq!((p.leader, p.leader_epoch, p.isr), (NO_LEADER, 1, vec![1]));
    assert_eq!(c.image().leaderless_partitions(), vec![tp("t", 0)]);
}

#[test]
fn the_last_isr_member_comes_back_as_the_clean_leader() {
    let mut c = cluster(3);
    c.create_topic("t", 1, 3, false).unwrap();
    for id in [2, 3, 1] {
        c.broker_failed(id).unwrap();
    }
    // Out-of-sync replicas returning do not make a leader on a clean topic.
    assert_eq!(
        c.broker_restarted(3).unwrap().len(),
        1,
        "only the registration"
    );
    assert_eq!(state(&c, "t", 0).leader, NO_LEADER);
    let changes = c.broker_restarted(1).unwrap();
    assert_eq!(
        about(&changes, "t", 0),
        vec![&Change::LeaderElected {
            tp: tp("t", 0),
            old_leader: NO_LEADER,
            new_leader: 1,
            leader_epoch: 2,
            isr: vec![1],
            partition_epoch: 4,
            clean: true,
            reason: ElectionReason::BrokerReturned,
        }]
    );
    assert!(c.image().leaderless_partitions().is_empty());
}

#[test]
fn a_single_replica_partition_goes_offline_with_its_broker_and_returns_with_it() {
    let mut c = cluster(2);
    c.create_topic("t", 2, 1, false).unwrap();
    c.broker_failed(2).unwrap();
    let p1 = state(&c, "t", 1);
    assert_eq!(
        (p1.leader, p1.isr.clone(), p1.leader_epoch),
        (NO_LEADER, vec![2], 1)
    );
    assert_eq!(
        state(&c, "t", 0).partition_epoch,
        0,
        "broker 1's partition is untouched"
    );
    c.broker_restarted(2).unwrap();
    let p1 = state(&c, "t", 1);
    assert_eq!((p1.leader, p1.leader_epoch, p1.partition_epoch), (2, 2, 2));
}

#[test]
fn killing_a_dead_broker_changes_nothing_and_an_unknown_one_is_refused() {
    let mut c = cluster(3);
    c.create_topic("t", 3, 3, false).unwrap();
    c.broker_failed(1).unwrap();
    let before = c.snapshot();
    assert_eq!(c.broker_failed(1).unwrap(), vec![]);
    assert_eq!(c.snapshot(), before);
    let err = c.broker_failed(9).unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_error_code()),
        (ErrorCode::BrokerIdNotRegistered, 102)
    );
}

#[test]
fn successive_failures_walk_leadership_down_the_replicas() {
    let mut c = cluster(3);
    c.create_topic("t", 1, 3, false).unwrap();
    let mut epochs = vec![state(&c, "t", 0).leader_epoch];
    for (dead, next) in [(1, 2), (2, 3)] {
        c.broker_failed(dead).unwrap();
        let p = state(&c, "t", 0);
        assert_eq!(p.leader, next);
        epochs.push(p.leader_epoch);
    }
    assert_eq!(epochs, vec![0, 1, 2]);
    assert_eq!(state(&c, "t", 0).isr, vec![3]);
}
