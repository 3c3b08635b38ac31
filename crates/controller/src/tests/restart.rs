//! Restart: a new incarnation, and no ISR membership until a leader grants it.

use super::{address, cluster, state, tp};
use crate::{Change, ErrorCode};

#[test]
fn restart_bumps_the_incarnation_and_puts_the_broker_in_no_isr() {
    let mut c = cluster(3);
    c.create_topic("t", 3, 3, false).unwrap();
    c.broker_failed(2).unwrap();
    let before = c.snapshot().topics;
    let changes = c.broker_restarted(2).unwrap();
    assert_eq!(
        changes,
        vec![Change::BrokerRegistered {
            id: 2,
            address: address(2),
            incarnation: 1
        }]
    );
    let b = c.image().broker(2).unwrap();
    assert_eq!((b.alive, b.incarnation), (true, 1));
    assert_eq!(c.snapshot().topics, before, "no partition changed");
    for p in 0..3 {
        assert!(!state(&c, "t", p).in_isr(2), "partition {p}");
        assert!(state(&c, "t", p).is_replica(2));
    }
    // Each restart is a new incarnation.
    c.broker_failed(2).unwrap();
    c.broker_restarted(2).unwrap();
    assert_eq!(c.image().broker(2).unwrap().incarnation, 2);
}

#[test]
fn a_restarted_broker_rejoins_the_isr_through_the_leaders_alter_partition() {
    let mut c = cluster(3);
    c.create_topic("t", 1, 3, false).unwrap();
    c.broker_failed(3).unwrap();
    c.broker_restarted(3).unwrap();
    let p = state(&c, "t", 0);
    let out = c
        .alter_partition(
            &tp("t", 0),
            1,
            p.leader_epoch,
            p.partition_epoch,
            &[1, 2, 3],
        )
        .unwrap();
    assert_eq!(out.state.isr, vec![1, 2, 3]);
    assert_eq!(
        out.state.leader_epoch, 0,
        "an ISR change keeps the leader epoch"
    );
}

#[test]
fn restarting_or_registering_a_live_broker_is_refused() {
    let mut c = cluster(2);
    let err = c.broker_restarted(1).unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_error_code()),
        (ErrorCode::DuplicateBrokerRegistration, 101)
    );
    assert_eq!(
        c.register_broker(2, "elsewhere:1").unwrap_err().code(),
        ErrorCode::DuplicateBrokerRegistration
    );
    assert_eq!(c.image().broker(1).unwrap().incarnation, 0);
    assert_eq!(
        c.broker_restarted(7).unwrap_err().code(),
        ErrorCode::BrokerIdNotRegistered
    );
    assert_eq!(
        c.register_broker(-1, "x:1").unwrap_err().code(),
        ErrorCode::InvalidRequest
    );
}

#[test]
fn registering_a_dead_broker_again_restarts_it_at_its_new_address() {
    let mut c = cluster(2);
    c.broker_failed(2).unwrap();
    let changes = c.register_broker(2, "10.0.0.2:9092").unwrap();
    assert_eq!(
        changes,
        vec![Change::BrokerRegistered {
            id: 2,
            address: "10.0.0.2:9092".into(),
            incarnation: 1
        }]
    );
    assert_eq!(c.image().broker(2).unwrap().address, "10.0.0.2:9092");
    assert_eq!(c.image().live_brokers(), vec![1, 2]);
}
