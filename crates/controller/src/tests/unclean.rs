//! Unclean leader election: a live replica outside the ISR may lead only when the
//! topic allows it, and the change says the election was not clean.

use super::{about, cluster, state, tp};
use crate::{Change, Controller, ElectionReason, NO_LEADER};

/// Three brokers, topic `t` with one partition [1, 2, 3]; 2 and 3 die and come back,
/// so they are alive but out of sync, and 1 is the whole ISR.
fn only_the_leader_in_sync(unclean: bool) -> Controller {
    let mut c = cluster(3);
    c.create_topic("t", 1, 3, unclean).unwrap();
    for id in [2, 3] {
        c.broker_failed(id).unwrap();
        c.broker_restarted(id).unwrap();
    }
    assert_eq!(state(&c, "t", 0).isr, vec![1]);
    c
}

#[test]
fn a_clean_topic_stays_leaderless_when_only_out_of_sync_replicas_live() {
    let mut c = only_the_leader_in_sync(false);
    let changes = c.broker_failed(1).unwrap();
    assert!(matches!(
        about(&changes, "t", 0)[..],
        [Change::NoLeader { .. }]
    ));
    assert_eq!(state(&c, "t", 0).leader, NO_LEADER);
}

#[test]
fn an_unclean_topic_elects_a_live_out_of_sync_replica_and_says_so() {
    let mut c = only_the_leader_in_sync(true);
    let changes = c.broker_failed(1).unwrap();
    assert_eq!(
        about(&changes, "t", 0),
        vec![&Change::LeaderElected {
            tp: tp("t", 0),
            old_leader: 1,
            new_leader: 2,
            leader_epoch: 1,
            isr: vec![2],
            partition_epoch: 3,
            clean: false,
            reason: ElectionReason::LeaderFailed,
        }]
    );
    let p = state(&c, "t", 0);
    assert_eq!(
        (p.leader, p.isr),
        (2, vec![2]),
        "the ISR is just the new leader"
    );
}

#[test]
fn an_unclean_topic_still_prefers_an_isr_member() {
    let mut c = cluster(3);
    c.create_topic("t", 1, 3, true).unwrap();
    let changes = c.broker_failed(1).unwrap();
    assert!(matches!(
        about(&changes, "t", 0)[..],
        [Change::LeaderElected {
            new_leader: 2,
            clean: true,
            ..
        }]
    ));
    assert_eq!(state(&c, "t", 0).isr, vec![2, 3]);
}

#[test]
fn an_unclean_topic_with_no_live_replica_waits_and_takes_the_first_to_return() {
    let mut c = cluster(2);
    c.create_topic("t", 1, 2, true).unwrap();
    c.broker_failed(2).unwrap();
    c.broker_failed(1).unwrap();
    assert_eq!(state(&c, "t", 0).leader, NO_LEADER);
    // 2 left the ISR before 1 died; on an unclean topic it may lead anyway.
    let changes = c.broker_restarted(2).unwrap();
    assert!(matches!(
        about(&changes, "t", 0)[..],
        [Change::LeaderElected {
            new_leader: 2,
            clean: false,
            reason: ElectionReason::BrokerReturned,
            ..
        }]
    ));
    assert_eq!(state(&c, "t", 0).isr, vec![2]);
    // 1, the old ISR, returns as a follower outside the ISR.
    assert_eq!(c.broker_restarted(1).unwrap().len(), 1);
    let p = state(&c, "t", 0);
    assert_eq!((p.leader, p.isr), (2, vec![2]));
}

#[test]
fn turning_unclean_election_on_elects_a_leader_for_an_offline_partition() {
    let mut c = only_the_leader_in_sync(false);
    c.broker_failed(1).unwrap();
    let changes = c.set_unclean_leader_election("t", true).unwrap();
    assert_eq!(
        changes[0],
        Change::TopicConfigChanged {
            topic: "t".into(),
            unclean_leader_election: true
        }
    );
    assert!(matches!(
        changes[1],
        Change::LeaderElected {
            new_leader: 2,
            clean: false,
            reason: ElectionReason::UncleanEnabled,
            ..
        }
    ));
    assert_eq!(c.set_unclean_leader_election("t", true).unwrap(), vec![]);
    // Turning it off again changes the setting only.
    assert_eq!(c.set_unclean_leader_election("t", false).unwrap().len(), 1);
    assert_eq!(state(&c, "t", 0).leader, 2);
}
