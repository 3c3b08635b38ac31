//! Creating and deleting topics, adding partitions.

use super::{cluster, state, tp};
use crate::{Change, ErrorCode, PartitionState};

#[test]
fn a_new_topic_has_every_replica_in_sync_led_by_the_first_at_epoch_zero() {
    let mut c = cluster(3);
    let changes = c.create_topic("orders", 3, 3, false).unwrap();
    assert_eq!(
        changes[0],
        Change::TopicCreated {
            topic: "orders".into(),
            unclean_leader_election: false
        }
    );
    assert_eq!(changes.len(), 4, "the topic, then one change per partition");
    for (p, replicas) in [[1, 2, 3], [2, 3, 1], [3, 1, 2]].into_iter().enumerate() {
        let expected = PartitionState {
            replicas: replicas.to_vec(),
            isr: replicas.to_vec(),
            leader: replicas[0],
            leader_epoch: 0,
            partition_epoch: 0,
        };
        assert_eq!(state(&c, "orders", p as i32), expected);
        assert_eq!(
            changes[p + 1],
            Change::PartitionCreated {
                tp: tp("orders", p as i32),
                state: expected
            }
        );
    }
    let topic = c.image().topic("orders").unwrap();
    assert_eq!(
        (topic.partition_count(), topic.replication_factor()),
        (3, 3)
    );
    assert!(!topic.unclean_leader_election);
}

#[test]
fn the_automatic_assignment_uses_live_brokers_only() {
    let mut c = cluster(3);
    c.broker_failed(2).unwrap();
    c.create_topic("t", 2, 2, false).unwrap();
    assert_eq!(state(&c, "t", 0).replicas, vec![1, 3]);
    assert_eq!(state(&c, "t", 1).replicas, vec![3, 1]);
    let err = c.create_topic("u", 1, 3, false).unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidReplicationFactor);
    assert!(
        c.image().topic("u").is_none(),
        "a refused topic is not created"
    );
}

#[test]
fn an_explicit_assignment_keeps_its_order_and_leaves_dead_replicas_out_of_the_isr() {
    let mut c = cluster(4);
    c.broker_failed(3).unwrap();
    c.create_topic_with_assignment("t", &[vec![3, 1, 2], vec![4, 2, 1]], true)
        .unwrap();
    let p0 = state(&c, "t", 0);
    assert_eq!(
        (p0.replicas, p0.isr, p0.leader),
        (vec![3, 1, 2], vec![1, 2], 1)
    );
    let p1 = state(&c, "t", 1);
    assert_eq!(
        (p1.replicas, p1.isr, p1.leader),
        (vec![4, 2, 1], vec![4, 2, 1], 4)
    );
    assert!(c.image().topic("t").unwrap().unclean_leader_election);
}

#[test]
fn explicit_assignments_that_cannot_be_used_are_refused() {
    let mut c = cluster(3);
    c.broker_failed(3).unwrap();
    let code = |c: &mut crate::Controller, a: &[Vec<i32>]| {
        c.create_topic_with_assignment("t", a, false)
            .unwrap_err()
            .code()
    };
    assert_eq!(code(&mut c, &[]), ErrorCode::InvalidPartitions);
    for bad in [
        vec![vec![]],
        vec![vec![1, 2], vec![2]],
        vec![vec![1, 1]],
        vec![vec![1, 9]],
        vec![vec![1], vec![3]],
    ] {
        assert_eq!(
            code(&mut c, &bad),
            ErrorCode::InvalidReplicaAssignment,
            "{bad:?}"
        );
    }
    assert!(c.image().topic("t").is_none());
}

#[test]
fn invalid_and_taken_topic_names_are_refused() {
    let mut c = cluster(1);
    let long = "x".repeat(250);
    for bad in ["", ".", "..", "a b", "é", "a/b", long.as_str()] {
        let err = c.create_topic(bad, 1, 1, false).unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidTopicException, "{bad:?}");
    }
    c.create_topic(&"x".repeat(249), 1, 1, false).unwrap();
    c.create_topic("a.b_c-D9", 1, 1, false).unwrap();
    let err = c.create_topic("a.b_c-D9", 2, 1, false).unwrap_err();
    assert_eq!(err.code(), ErrorCode::TopicAlreadyExists);
    assert_eq!(c.image().topic("a.b_c-D9").unwrap().partition_count(), 1);
}

#[test]
fn create_partitions_continues_the_round_robin_at_the_next_index() {
    let mut c = cluster(3);
    c.create_topic("t", 2, 2, false).unwrap();
    let changes = c.create_partitions("t", 5).unwrap();
    assert_eq!(changes.len(), 3);
    let replicas: Vec<Vec<i32>> = (0..5).map(|p| state(&c, "t", p).replicas).collect();
    // The same as a topic created with five partitions at once.
    let mut d = cluster(3);
    d.create_topic("t", 5, 2, false).unwrap();
    let direct: Vec<Vec<i32>> = (0..5).map(|p| state(&d, "t", p).replicas).collect();
    assert_eq!(replicas, direct);
    assert_eq!(replicas[2..], [vec![3, 1], vec![1, 3], vec![2, 1]]);
    match &changes[0] {
        Change::PartitionCreated { tp: t, state: s } => {
            assert_eq!(*t, tp("t", 2));
            assert_eq!((s.leader, s.leader_epoch, s.partition_epoch), (3, 0, 0));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn create_partitions_refuses_a_total_not_above_the_current_count_and_unknown_topics() {
    let mut c = cluster(3);
    c.create_topic("t", 3, 3, false).unwrap();
    for total in [2, 3, 0, -1] {
        let err = c.create_partitions("t", total).unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidPartitions, "{total}");
    }
    assert_eq!(
        c.create_partitions("nope", 4).unwrap_err().code(),
        ErrorCode::UnknownTopicOrPartition
    );
    c.broker_failed(1).unwrap();
    let err = c.create_partitions("t", 4).unwrap_err();
    assert_eq!(
        err.code(),
        ErrorCode::InvalidReplicationFactor,
        "3 replicas, 2 live brokers"
    );
    assert_eq!(c.image().topic("t").unwrap().partition_count(), 3);
}

#[test]
fn delete_topic_removes_it_and_all_its_partitions() {
    let mut c = cluster(2);
    c.create_topic("t", 4, 2, false).unwrap();
    c.create_topic("u", 1, 1, false).unwrap();
    assert_eq!(
        c.delete_topic("t").unwrap(),
        vec![Change::TopicDeleted {
            topic: "t".into(),
            partitions: 4
        }]
    );
    assert!(c.image().topic("t").is_none());
    assert!(c.image().partition(&tp("t", 0)).is_none());
    assert_eq!(c.image().partitions().count(), 1);
    assert_eq!(
        c.delete_topic("t").unwrap_err().code(),
        ErrorCode::UnknownTopicOrPartition
    );
    // The name can be used again.
    c.create_topic("t", 1, 2, false).unwrap();
}

#[test]
fn manual_partition_assignments_are_taken_in_order_or_refused_in_kafkas_words() {
    let mut c = cluster(3);
    c.create_topic("t", 1, 2, false).unwrap();
    let refused = |c: &mut crate::Controller, a: &[Vec<i32>]| {
        let err = c.create_partitions_with_assignment("t", a).unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidReplicaAssignment, "{a:?}");
        err.to_string()
    };
    assert_eq!(
        refused(&mut c, &[vec![]]),
        "The manual partition assignment includes an empty replica list."
    );
    assert_eq!(
        refused(&mut c, &[vec![7, 1]]),
        "The manual partition assignment includes broker 7, but no such broker is registered."
    );
    assert_eq!(
        refused(&mut c, &[vec![2, 2]]),
        "The manual partition assignment includes the broker 2 more than once."
    );
    assert_eq!(
        refused(&mut c, &[vec![3, 1], vec![1]]),
        "The manual partition assignment includes a partition with 1 replica(s), but this is \
         not consistent with previous partitions, which have 2 replica(s)."
    );
    assert_eq!(
        c.image().topic("t").unwrap().partition_count(),
        1,
        "nothing added"
    );

    let changes = c
        .create_partitions_with_assignment("t", &[vec![3, 1], vec![2, 3]])
        .unwrap();
    assert_eq!(changes.len(), 2);
    assert_eq!(state(&c, "t", 1).replicas, vec![3, 1]);
    assert_eq!(state(&c, "t", 1).leader, 3, "the first replica leads");
    assert_eq!(state(&c, "t", 2).replicas, vec![2, 3]);

    // A dead first replica: the next live one leads, and the dead one is out of the ISR.
    c.broker_failed(2).unwrap();
    c.create_partitions_with_assignment("t", &[vec![2, 1]])
        .unwrap();
    let s = state(&c, "t", 3);
    assert_eq!((s.leader, s.isr.clone()), (1, vec![1]));
    c.broker_failed(1).unwrap();
    assert!(refused(&mut c, &[vec![2, 1]]).contains("partition 4 are fenced"));
    assert_eq!(
        c.create_partitions_with_assignment("nope", &[vec![3]])
            .unwrap_err()
            .code(),
        ErrorCode::UnknownTopicOrPartition
    );
}
