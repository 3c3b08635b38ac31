//! Transactions on one partition: the last stable offset an open transaction holds back,
//! markers that end it (only once the high watermark passes them), the aborted list a
//! `read_committed` fetch carries, fencing by epoch, and followers and truncation that
//! arrive at the same picture from the log alone.

use super::{both_fetch, three_replicas};
use crate::batch::{batch_headers, ATTR_TRANSACTIONAL};
use crate::test_util::BatchBuilder;
use crate::transactions::{control_type, encode_marker};
use crate::{AbortedTxn, AppendError, ControlType, LogConfig, Partition, ReadBound};

const A: i64 = 7000;
const B: i64 = 8000;

/// `count` records of a transaction of `producer` in `epoch`, from `sequence`.
fn txn(count: usize, producer: i64, epoch: i16, sequence: i32) -> bytes::Bytes {
    BatchBuilder::new(count)
        .producer(producer, epoch, sequence)
        .attributes(ATTR_TRANSACTIONAL)
        .bytes()
}

/// Offsets of every batch a read of `bound` from 0 returns.
fn readable(p: &Partition, bound: ReadBound) -> Vec<i64> {
    batch_headers(&p.read(0, usize::MAX, bound).unwrap().records)
        .map(|h| h.base_offset)
        .collect()
}

#[test]
fn an_open_transaction_holds_the_lso_at_its_first_offset_until_its_marker_is_replicated() {
    let mut p = three_replicas();
    p.append(BatchBuilder::new(2).bytes(), 1).unwrap(); // 0..=1, not transactional
    p.append(txn(3, A, 0, 0), 1).unwrap(); // 2..=4, A's transaction
    p.append(BatchBuilder::new(1).bytes(), 1).unwrap(); // 5
    both_fetch(&mut p, 6, 2);
    assert_eq!((p.high_watermark(), p.last_stable_offset()), (6, 2));
    assert_eq!(readable(&p, ReadBound::HighWatermark), vec![0, 2, 5]);
    assert_eq!(readable(&p, ReadBound::LastStable), vec![0]);
    assert_eq!(p.open_transactions()[0].first_offset, 2);

    let commit = p.append_marker(A, 0, 0, ControlType::Commit, 3).unwrap();
    assert_eq!(commit.base_offset, 6);
    assert!(p.open_transactions().is_empty());
    // The marker is on the leader alone: the transaction still holds the LSO back.
    assert_eq!(p.last_stable_offset(), 2);
    both_fetch(&mut p, 7, 4);
    assert_eq!((p.high_watermark(), p.last_stable_offset()), (7, 7));
    assert_eq!(readable(&p, ReadBound::LastStable), vec![0, 2, 5, 6]);
    // A committed transaction is not listed as aborted.
    assert!(p.aborted_transactions(0, 7).is_empty());
}

#[test]
fn the_lso_moving_shows_in_the_change_of_the_fetch_that_moved_it() {
    let mut p = three_replicas();
    p.append(txn(1, A, 0, 0), 1).unwrap();
    p.append_marker(A, 0, 0, ControlType::Commit, 1).unwrap();
    p.update_follower_fetch(2, 2, 2).unwrap();
    let change = p.update_follower_fetch(3, 2, 2).unwrap().change;
    assert!(change.high_watermark_advanced());
    assert!(change.last_stable_offset_advanced());
    assert_eq!(
        (
            change.before.last_stable_offset,
            change.after.last_stable_offset
        ),
        (0, 2)
    );
}

#[test]
fn aborted_transactions_are_listed_for_every_read_that_overlaps_them() {
    let mut p = three_replicas();
    p.append(txn(2, A, 0, 0), 1).unwrap(); // 0..=1
    p.append(txn(2, B, 0, 0), 1).unwrap(); // 2..=3
    p.append_marker(A, 0, 0, ControlType::Abort, 1).unwrap(); // 4
    p.append(txn(1, B, 0, 2), 1).unwrap(); // 5
    p.append_marker(B, 0, 0, ControlType::Commit, 1).unwrap(); // 6
    both_fetch(&mut p, 7, 2);
    assert_eq!(p.last_stable_offset(), 7);
    let a = AbortedTxn {
        producer_id: A,
        first_offset: 0,
        last_offset: 4,
    };
    assert_eq!(p.aborted_transactions(0, 7), vec![a]);
    assert_eq!(p.aborted_transactions(3, 5), vec![a]);
    assert_eq!(p.aborted_transactions(5, 7), vec![]);
    // A second transaction of A, aborted too, after B's.
    p.append(txn(1, A, 0, 2), 3).unwrap(); // 7
    p.append_marker(A, 0, 0, ControlType::Abort, 3).unwrap(); // 8
    both_fetch(&mut p, 9, 4);
    let later = AbortedTxn {
        producer_id: A,
        first_offset: 7,
        last_offset: 8,
    };
    assert_eq!(p.aborted_transactions(0, 9), vec![a, later]);
}

#[test]
fn a_marker_of_an_older_epoch_is_fenced_and_a_newer_one_fences_the_producer() {
    let mut p = three_replicas();
    p.append(txn(1, A, 3, 0), 1).unwrap();
    assert!(matches!(
        p.append_marker(A, 2, 0, ControlType::Commit, 1),
        Err(AppendError::InvalidProducerEpoch {
            current_epoch: 3,
            ..
        })
    ));
    assert_eq!(p.log_end_offset(), 1, "nothing appended");
    // The coordinator aborts with a bumped epoch (a timed-out transaction): the old
    // epoch's late batches are refused from then on.
    p.append_marker(A, 4, 0, ControlType::Abort, 2).unwrap();
    assert!(matches!(
        p.append(txn(1, A, 3, 1), 3),
        Err(AppendError::InvalidProducerEpoch {
            current_epoch: 4,
            ..
        })
    ));
    // The new epoch starts its sequences at 0.
    p.append(txn(1, A, 4, 0), 3).unwrap();
    assert_eq!(p.open_transactions()[0].first_offset, 2);
}

#[test]
fn a_follower_and_a_truncated_log_derive_the_same_transactions_from_the_batches() {
    let config = LogConfig {
        replica_lag_time_max_ms: 1_000_000,
        ..LogConfig::default()
    };
    let mut leader = Partition::new("t", 0, 1, vec![1, 2, 3], config.clone(), 0);
    let mut follower = Partition::new("t", 0, 2, vec![1, 2, 3], config, 0);
    follower.make_follower(1, 0, 0).unwrap();
    leader.append(txn(2, A, 0, 0), 1).unwrap(); // 0..=1
    leader
        .append_marker(A, 0, 0, ControlType::Abort, 1)
        .unwrap(); // 2
    leader.append(txn(1, B, 0, 0), 1).unwrap(); // 3, open
    let read = leader.read(0, usize::MAX, ReadBound::LogEnd).unwrap();
    follower.append_as_follower(read.records, 2).unwrap();
    follower.update_high_watermark_as_follower(4).unwrap();
    leader.update_follower_fetch(2, 4, 2).unwrap();
    leader.update_follower_fetch(3, 4, 2).unwrap();
    assert_eq!(follower.high_watermark(), 4);
    for p in [&leader, &follower] {
        assert_eq!(p.last_stable_offset(), 3, "B's open transaction holds it");
        assert_eq!(p.aborted_transactions(0, 4).len(), 1);
        assert_eq!(p.open_transactions().len(), 1);
    }
    // Truncating below A's marker leaves A's transaction open again and forgets B's.
    follower.truncate_to(2).unwrap();
    assert_eq!(follower.open_transactions()[0].producer_id, A);
    assert!(follower.aborted_transactions(0, 2).is_empty());
    assert_eq!(follower.last_stable_offset(), 0);
}

#[test]
fn retention_forgets_aborted_transactions_whose_marker_it_removed() {
    let config = LogConfig {
        retention_bytes: 0,
        ..LogConfig::default()
    };
    let mut p = Partition::new("t", 0, 1, vec![1, 2, 3], config, 0);
    p.append(txn(1, A, 0, 0), 1).unwrap();
    p.append_marker(A, 0, 0, ControlType::Abort, 1).unwrap();
    p.append(BatchBuilder::new(1).bytes(), 1).unwrap();
    both_fetch(&mut p, 3, 2);
    assert_eq!(p.aborted_transactions(0, 3).len(), 1);
    p.enforce_retention();
    assert_eq!(p.log_start_offset(), 3);
    assert!(p.aborted_transactions(0, 3).is_empty());
}

#[test]
fn a_marker_round_trips_and_clients_still_cannot_write_one() {
    let marker = encode_marker(A, 5, 2, ControlType::Commit, 1234);
    let header = batch_headers(&marker).next().unwrap();
    assert!(header.is_control() && header.is_transactional());
    assert_eq!((header.producer_id, header.producer_epoch), (A, 5));
    assert_eq!(control_type(&marker, &header), Some(ControlType::Commit));
    let abort = encode_marker(A, 5, 2, ControlType::Abort, 1234);
    assert_eq!(
        control_type(&abort, &batch_headers(&abort).next().unwrap()),
        Some(ControlType::Abort)
    );
    let mut p = three_replicas();
    assert!(matches!(
        p.append(bytes::Bytes::from(marker), 1),
        Err(AppendError::InvalidRecord { .. })
    ));
}
