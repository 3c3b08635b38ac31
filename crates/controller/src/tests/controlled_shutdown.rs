//! Controlled shutdown: leadership moves away while the broker still runs, so only
//! partitions with no other live ISR member go offline.

use super::{about, cluster, state, tp};
use crate::{Change, ElectionReason, NO_LEADER};

#[test]
fn controlled_shutdown_hands_leadership_over_before_the_broker_dies() {
    let mut c = cluster(3);
    c.create_topic("t", 6, 3, false).unwrap();
    let changes = c.controlled_shutdown(1).unwrap();
    assert_eq!(
        changes.last(),
        Some(&Change::BrokerDied {
            id: 1,
            incarnation: 0,
            controlled: true
        }),
        "every move happens while broker 1 still runs"
    );
    assert_eq!(changes.len(), 7, "one change per partition, then the death");
    // Partition 0 is [1, 2, 3]; partition 3 is [1, 3, 2].
    assert_eq!(
        about(&changes, "t", 0),
        vec![&Change::LeaderElected {
            tp: tp("t", 0),
            old_leader: 1,
            new_leader: 2,
            leader_epoch: 1,
            isr: vec![2, 3],
            partition_epoch: 1,
            clean: true,
            reason: ElectionReason::ControlledShutdown,
        }]
    );
    assert_eq!(state(&c, "t", 3).leader, 3);
    assert!(c.image().leaderless_partitions().is_empty());
    for p in 0..6 {
        assert!(!state(&c, "t", p).in_isr(1), "partition {p}");
    }
    assert!(!c.image().is_alive(1));
}

#[test]
fn the_last_isr_member_leads_until_its_controlled_shutdown_ends() {
    let mut c = cluster(2);
    c.create_topic("t", 1, 2, false).unwrap();
    c.create_topic("solo", 1, 1, false).unwrap();
    c.broker_failed(2).unwrap();
    let changes = c.controlled_shutdown(1).unwrap();
    // Nobody can take over: the death comes first, then the partitions go offline.
    assert!(matches!(
        changes[0],
        Change::BrokerDied {
            id: 1,
            controlled: true,
            ..
        }
    ));
    assert!(matches!(
        about(&changes, "t", 0)[..],
        [Change::NoLeader { .. }]
    ));
    assert!(matches!(
        about(&changes, "solo", 0)[..],
        [Change::NoLeader { .. }]
    ));
    let p = state(&c, "t", 0);
    assert_eq!((p.leader, p.isr), (NO_LEADER, vec![1]));
}

#[test]
fn a_controlled_shutdown_on_an_unclean_topic_ends_in_an_unclean_election() {
    let mut c = cluster(2);
    c.create_topic("t", 1, 2, true).unwrap();
    c.broker_failed(2).unwrap();
    c.broker_restarted(2).unwrap();
    let changes = c.controlled_shutdown(1).unwrap();
    assert!(matches!(
        about(&changes, "t", 0)[..],
        [Change::LeaderElected {
            new_leader: 2,
            clean: false,
            reason: ElectionReason::LeaderFailed,
            ..
        }]
    ));
}

#[test]
fn a_controlled_shutdown_of_a_dead_broker_changes_nothing() {
    let mut c = cluster(2);
    c.create_topic("t", 2, 2, false).unwrap();
    c.broker_failed(2).unwrap();
    let before = c.snapshot();
    assert_eq!(c.controlled_shutdown(2).unwrap(), vec![]);
    assert_eq!(c.snapshot(), before);
}

#[test]
fn a_shut_down_broker_restarts_like_a_failed_one() {
    let mut c = cluster(3);
    c.create_topic("t", 3, 3, false).unwrap();
    c.controlled_shutdown(2).unwrap();
    assert_eq!(c.broker_restarted(2).unwrap().len(), 1);
    assert_eq!(c.image().broker(2).unwrap().incarnation, 1);
    assert!(c.image().partitions().all(|(_, p)| !p.in_isr(2)));
}
