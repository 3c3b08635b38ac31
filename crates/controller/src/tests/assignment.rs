//! Kafka's rack-unaware assignment: exact layouts for small cases, and the spread.

use crate::{assign_partitions, assign_replicas, AssignmentParams, ErrorCode};

const DEFAULT: AssignmentParams = AssignmentParams {
    start_index: 0,
    start_shift: 0,
};

#[test]
fn three_brokers_and_six_partitions_wrap_once_with_the_shift_going_up() {
    let layout = assign_replicas(&[1, 2, 3], 6, 3, DEFAULT).unwrap();
    assert_eq!(
        layout,
        vec![
            vec![1, 2, 3],
            vec![2, 3, 1],
            vec![3, 1, 2],
            // Partition 3 wraps around: shift 1, so followers start two brokers on.
            vec![1, 3, 2],
            vec![2, 1, 3],
            vec![3, 2, 1],
        ]
    );
}

#[test]
fn five_brokers_and_ten_partitions_give_the_layout_kafka_documents() {
    // The example in the documentation of Kafka's assignReplicasToBrokers: brokers 0-4,
    // replication factor 3, start index 0, shift 0.
    let layout = assign_replicas(&[0, 1, 2, 3, 4], 10, 3, DEFAULT).unwrap();
    assert_eq!(
        layout,
        vec![
            vec![0, 1, 2],
            vec![1, 2, 3],
            vec![2, 3, 4],
            vec![3, 4, 0],
            vec![4, 0, 1],
            vec![0, 2, 3],
            vec![1, 3, 4],
            vec![2, 4, 0],
            vec![3, 0, 1],
            vec![4, 1, 2],
        ]
    );
}

#[test]
fn brokers_are_sorted_and_repeats_ignored_before_assignment() {
    assert_eq!(
        assign_replicas(&[3, 1, 2, 1], 3, 2, DEFAULT).unwrap(),
        assign_replicas(&[1, 2, 3], 3, 2, DEFAULT).unwrap()
    );
}

#[test]
fn the_start_index_moves_the_first_leader_and_the_shift_moves_the_followers() {
    let moved = AssignmentParams {
        start_index: 1,
        start_shift: 0,
    };
    assert_eq!(
        assign_replicas(&[1, 2, 3], 3, 2, moved).unwrap(),
        vec![vec![2, 3], vec![3, 1], vec![1, 2]]
    );
    let shifted = AssignmentParams {
        start_index: 0,
        start_shift: 1,
    };
    assert_eq!(
        assign_replicas(&[1, 2, 3], 3, 2, shifted).unwrap(),
        vec![vec![1, 3], vec![2, 1], vec![3, 2]]
    );
}

#[test]
fn a_single_broker_holds_every_partition_alone() {
    assert_eq!(
        assign_replicas(&[7], 3, 1, DEFAULT).unwrap(),
        vec![vec![7], vec![7], vec![7]]
    );
}

#[test]
fn each_broker_leads_about_partitions_over_n_and_no_partition_repeats_a_broker() {
    for n in 1..=7 {
        let brokers: Vec<i32> = (1..=n).collect();
        for partitions in 1..=30 {
            for rf in 1..=n as i16 {
                let layout = assign_replicas(&brokers, partitions, rf, DEFAULT).unwrap();
                assert_eq!(layout.len(), partitions as usize);
                let mut led = vec![0; n as usize];
                for replicas in &layout {
                    assert_eq!(replicas.len(), rf as usize);
                    let mut sorted = replicas.clone();
                    sorted.sort_unstable();
                    sorted.dedup();
                    assert_eq!(
                        sorted.len(),
                        replicas.len(),
                        "{replicas:?} repeats a broker"
                    );
                    led[(replicas[0] - 1) as usize] += 1;
                }
                let (min, max) = (led.iter().min().unwrap(), led.iter().max().unwrap());
                assert!(
                    max - min <= 1,
                    "n={n} p={partitions} rf={rf}: leaders {led:?}"
                );
            }
        }
    }
}

#[test]
fn every_broker_holds_about_the_same_number_of_replicas() {
    // 4 brokers, 12 partitions, rf 3: 36 replicas, 9 each.
    let layout = assign_replicas(&[1, 2, 3, 4], 12, 3, DEFAULT).unwrap();
    let mut held = [0; 4];
    for b in layout.iter().flatten() {
        held[(*b - 1) as usize] += 1;
    }
    assert_eq!(held, [9, 9, 9, 9]);
}

#[test]
fn partitions_added_later_continue_the_layout_of_a_single_creation() {
    let brokers = [1, 2, 3, 4];
    let all = assign_replicas(&brokers, 11, 3, DEFAULT).unwrap();
    let mut pieces = assign_partitions(&brokers, 0..5, 3, DEFAULT).unwrap();
    pieces.extend(assign_partitions(&brokers, 5..11, 3, DEFAULT).unwrap());
    assert_eq!(pieces, all);
}

#[test]
fn bad_counts_are_refused_with_kafkas_codes() {
    let code = |r: Result<Vec<Vec<i32>>, crate::Error>| r.unwrap_err().code();
    assert_eq!(
        code(assign_replicas(&[1, 2, 3], 3, 0, DEFAULT)),
        ErrorCode::InvalidReplicationFactor
    );
    assert_eq!(
        code(assign_replicas(&[1, 2, 3], 3, -1, DEFAULT)),
        ErrorCode::InvalidReplicationFactor
    );
    assert_eq!(
        code(assign_replicas(&[1, 2, 3], 3, 4, DEFAULT)),
        ErrorCode::InvalidReplicationFactor
    );
    assert_eq!(
        code(assign_replicas(&[], 3, 1, DEFAULT)),
        ErrorCode::InvalidReplicationFactor
    );
    assert_eq!(
        code(assign_replicas(&[1, 2, 3], 0, 1, DEFAULT)),
        ErrorCode::InvalidPartitions
    );
    assert_eq!(
        code(assign_replicas(&[1, 2, 3], -4, 1, DEFAULT)),
        ErrorCode::InvalidPartitions
    );
    assert_eq!(
        code(assign_partitions(&[1, 2, 3], 3..3, 1, DEFAULT)),
        ErrorCode::InvalidPartitions
    );
    assert_eq!(ErrorCode::InvalidReplicationFactor.value(), 38);
    assert_eq!(ErrorCode::InvalidPartitions.value(), 37);
}

#[test]
fn manual_replicas_are_checked_in_kafkas_words_lowest_offending_broker_first() {
    let registered = |b: i32| (1..=3).contains(&b);
    assert_eq!(
        crate::check_manual_replicas(&[3, 1, 2], 3, registered),
        Ok(())
    );
    let reason =
        |replicas: &[i32], rf| crate::check_manual_replicas(replicas, rf, registered).unwrap_err();
    assert_eq!(
        reason(&[], 3),
        "The manual partition assignment includes an empty replica list."
    );
    assert_eq!(
        reason(&[9, 1, 7], 3),
        "The manual partition assignment includes broker 7, but no such broker is registered."
    );
    assert_eq!(
        reason(&[2, 1, 2], 3),
        "The manual partition assignment includes the broker 2 more than once."
    );
    assert_eq!(
        reason(&[1, 2], 3),
        "The manual partition assignment includes a partition with 2 replica(s), but this is not consistent with previous partitions, which have 3 replica(s)."
    );
}
