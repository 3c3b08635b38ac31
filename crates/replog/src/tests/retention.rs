//! Retention and eviction never lose data that is not on the whole ISR.

use super::{both_fetch, three_replicas, three_replicas_with};
use crate::test_util::BatchBuilder;
use crate::{LogConfig, ReadBound, ReadError};

#[test]
fn retention_never_drops_data_at_or_above_the_hw() {
    let mut p = three_replicas_with(LogConfig {
        retention_bytes: 0,
        ..Default::default()
    });
    let sizes: Vec<usize> = (0..3)
        .map(|_| p.append(BatchBuilder::new(2).bytes(), 1).unwrap().bytes)
        .collect();
    // Nothing is replicated: nothing may go, however far over the limit.
    assert_eq!(p.enforce_retention(), 0);
    assert_eq!(p.batch_count(), 3);

    both_fetch(&mut p, 3, 2); // HW 3: batch 0-1 is below, batch 2-3 straddles it
    assert_eq!(p.enforce_retention(), sizes[0]);
    assert_eq!(p.batch_count(), 2);
    assert_eq!(p.log_start_offset(), 2);
    assert_eq!(p.size_bytes(), sizes[1] + sizes[2]);

    both_fetch(&mut p, 6, 3);
    assert_eq!(p.enforce_retention(), sizes[1] + sizes[2]);
    assert_eq!((p.batch_count(), p.size_bytes()), (0, 0));
    assert_eq!((p.log_start_offset(), p.log_end_offset()), (6, 6));
    // Appending continues from the LEO.
    assert_eq!(
        p.append(BatchBuilder::new(1).bytes(), 4)
            .unwrap()
            .base_offset,
        6
    );
}

#[test]
fn retention_keeps_the_newest_batches_within_the_limit() {
    let batch = BatchBuilder::new(1).bytes();
    let size = batch.len();
    let mut p = three_replicas_with(LogConfig {
        retention_bytes: (2 * size) as i64,
        ..Default::default()
    });
    for _ in 0..5 {
        p.append(batch.clone(), 1).unwrap();
    }
    both_fetch(&mut p, 5, 2);
    assert_eq!(p.enforce_retention(), 3 * size);
    assert_eq!((p.log_start_offset(), p.batch_count()), (3, 2));
    assert_eq!(p.enforce_retention(), 0);
}

#[test]
fn reads_below_the_log_start_are_out_of_range() {
    let mut p = three_replicas_with(LogConfig {
        retention_bytes: 0,
        ..Default::default()
    });
    p.append(BatchBuilder::new(2).bytes(), 1).unwrap();
    p.append(BatchBuilder::new(2).bytes(), 1).unwrap();
    both_fetch(&mut p, 2, 2);
    p.enforce_retention();
    let err = p.read(1, 100, ReadBound::HighWatermark).unwrap_err();
    assert!(matches!(
        err,
        ReadError::OffsetOutOfRange {
            log_start_offset: 2,
            ..
        }
    ));
    assert!(p.read(2, 100, ReadBound::LogEnd).is_ok());
    assert!(p.update_follower_fetch(2, 1, 3).is_err(), "followers too");
}

#[test]
fn unlimited_retention_keeps_everything() {
    let mut p = three_replicas();
    for _ in 0..3 {
        p.append(BatchBuilder::new(1).bytes(), 1).unwrap();
    }
    both_fetch(&mut p, 3, 2);
    assert_eq!(p.enforce_retention(), 0);
    assert_eq!(p.batch_count(), 3);
}

#[test]
fn evict_oldest_batch_only_takes_replicated_batches() {
    let mut p = three_replicas();
    let size = p.append(BatchBuilder::new(1).bytes(), 1).unwrap().bytes;
    p.append(BatchBuilder::new(1).bytes(), 1).unwrap();
    assert_eq!(p.evict_oldest_batch(), 0);
    both_fetch(&mut p, 1, 2);
    assert_eq!(p.evict_oldest_batch(), size);
    assert_eq!(p.log_start_offset(), 1);
    assert_eq!(p.evict_oldest_batch(), 0, "offset 1 is at the HW");
    assert_eq!(p.batch_count(), 1);
}
