//! Idempotent producers: duplicates, gaps, epochs, sequence wrap, atomicity, bounds.

use bytes::Bytes;

use super::three_replicas;
use crate::batch::BatchHeader;
use crate::producer_state::{
    check_sequence, BatchMetadata, PendingProducerUpdates, ProducerStateEntry,
    ProducerStateManager, SequenceCheck,
};
use crate::test_util::{concat, BatchBuilder};
use crate::AppendError;

const PID: i64 = 1000;

/// An idempotent batch of `count` records from producer PID.
fn idem(count: usize, epoch: i16, seq: i32) -> Bytes {
    BatchBuilder::new(count).producer(PID, epoch, seq).bytes()
}

#[test]
fn a_retried_batch_is_acknowledged_with_its_original_offsets() {
    let mut p = three_replicas();
    p.append(BatchBuilder::new(2).bytes(), 1).unwrap(); // offsets 0-1, not idempotent
    let first = p.append(idem(3, 0, 0), 2).unwrap(); // seq 0-2 -> offsets 2-4
    assert_eq!((first.base_offset, first.last_offset), (2, 4));
    let size = p.size_bytes();

    let retry = p.append(idem(3, 0, 0), 3).unwrap();
    assert!(retry.duplicate);
    assert_eq!(
        (retry.base_offset, retry.last_offset, retry.record_count),
        (2, 4, 3)
    );
    assert_eq!(retry.bytes, 0);
    assert_eq!(p.log_end_offset(), 5, "nothing appended");
    assert_eq!(p.size_bytes(), size);
}

#[test]
fn any_of_the_last_five_batches_is_recognised_as_a_duplicate() {
    let mut p = three_replicas();
    for i in 0..6 {
        p.append(idem(2, 0, 2 * i), 1).unwrap(); // seqs 0-1, 2-3, ..., 10-11 -> same offsets
    }
    let entry = p.producer_state(PID).unwrap();
    assert_eq!(entry.batches.len(), 5);
    assert_eq!(entry.next_sequence(), 12);
    // Batch seq 2-3 (offsets 2-3) is the oldest of the last five.
    let dup = p.append(idem(2, 0, 2), 2).unwrap();
    assert!(dup.duplicate);
    assert_eq!((dup.base_offset, dup.last_offset), (2, 3));
    // Batch seq 0-1 is no longer remembered: a retry that old is out of order.
    let err = p.append(idem(2, 0, 0), 2).unwrap_err();
    assert_eq!(err.kafka_error_code(), 45);
    // Same first sequence but a different length is not a duplicate either.
    assert!(p.append(idem(3, 0, 10), 2).is_err());
    assert_eq!(p.log_end_offset(), 12);
}

#[test]
fn a_sequence_gap_is_out_of_order_and_appends_nothing() {
    let mut p = three_replicas();
    p.append(idem(2, 0, 0), 1).unwrap();
    let err = p.append(idem(1, 0, 3), 2).unwrap_err(); // expected 2
    assert_eq!(
        err,
        AppendError::OutOfOrderSequence {
            producer_id: PID,
            producer_epoch: 0,
            expected_sequence: 2,
            first_sequence: 3
        }
    );
    assert_eq!(err.kafka_error_code(), 45);
    assert_eq!(p.log_end_offset(), 2);
    assert!(p.append(idem(1, 0, 2), 3).is_ok());
}

#[test]
fn an_unknown_producer_may_start_at_any_sequence() {
    // Kafka 2.5+: a partition with no state for a producer id (lost to retention or
    // expiry while the producer lived on) takes whatever sequence it starts with.
    let mut p = three_replicas();
    p.append(BatchBuilder::new(1).bytes(), 1).unwrap(); // offset 0, not idempotent
    let info = p.append(idem(2, 0, 5), 2).unwrap(); // seqs 5-6 -> offsets 1-2
    assert!(!info.duplicate);
    assert_eq!((info.base_offset, info.last_offset), (1, 2));
    assert_eq!(p.producer_state(PID).unwrap().next_sequence(), 7);
    // From there on the usual rules hold: a gap is out of order...
    let err = p.append(idem(1, 0, 9), 3).unwrap_err();
    assert!(matches!(
        err,
        AppendError::OutOfOrderSequence {
            expected_sequence: 7,
            first_sequence: 9,
            ..
        }
    ));
    // ...and a retry of that first batch is a duplicate.
    let retry = p.append(idem(2, 0, 5), 4).unwrap();
    assert!(retry.duplicate);
    assert_eq!((retry.base_offset, retry.last_offset), (1, 2));
    assert_eq!(p.log_end_offset(), 3);
}

#[test]
fn a_new_epoch_restarts_at_zero_and_fences_the_old_one() {
    let mut p = three_replicas();
    p.append(idem(3, 0, 0), 1).unwrap();
    // A bumped epoch must start over at sequence 0.
    let err = p.append(idem(1, 1, 3), 2).unwrap_err();
    assert!(matches!(
        err,
        AppendError::OutOfOrderSequence {
            producer_epoch: 1,
            ..
        }
    ));
    let info = p.append(idem(2, 1, 0), 3).unwrap();
    assert!(!info.duplicate, "seq 0 of a new epoch is new data");
    assert_eq!(info.base_offset, 3);
    let entry = p.producer_state(PID).unwrap();
    assert_eq!((entry.producer_epoch, entry.batches.len()), (1, 1));
    // The old epoch is fenced.
    let err = p.append(idem(1, 0, 3), 4).unwrap_err();
    assert_eq!(
        err,
        AppendError::InvalidProducerEpoch {
            producer_id: PID,
            producer_epoch: 0,
            current_epoch: 1
        }
    );
    assert_eq!(err.kafka_error_code(), 47);
    assert_eq!(p.log_end_offset(), 5);
}

#[test]
fn sequence_numbers_wrap_from_i32_max_to_zero() {
    let mut p = three_replicas();
    // A batch claiming i32::MAX records covers sequences 0 ..= i32::MAX - 1.
    let huge = BatchBuilder::new(1)
        .producer(PID, 0, 0)
        .claim_count(i32::MAX)
        .bytes();
    let info = p.append(huge, 1).unwrap();
    assert_eq!(info.last_offset, i64::from(i32::MAX) - 1);
    assert_eq!(p.producer_state(PID).unwrap().next_sequence(), i32::MAX);
    // Two records at i32::MAX: sequences i32::MAX and 0.
    let wrap = BatchBuilder::new(2).producer(PID, 0, i32::MAX).bytes();
    p.append(wrap.clone(), 2).unwrap();
    assert_eq!(p.producer_state(PID).unwrap().next_sequence(), 1);
    assert!(p.append(wrap, 3).unwrap().duplicate);
    assert!(
        p.append(idem(1, 0, 0), 4).is_err(),
        "0 was used by the wrapped batch"
    );
    let next = p.append(idem(1, 0, 1), 5).unwrap();
    assert_eq!(next.base_offset, i64::from(i32::MAX) + 2);
}

#[test]
fn the_check_handles_a_producer_ending_exactly_at_i32_max() {
    let entry = ProducerStateEntry {
        producer_id: PID,
        producer_epoch: 0,
        batches: [BatchMetadata {
            first_sequence: i32::MAX - 4,
            last_sequence: i32::MAX,
            base_offset: 0,
            last_offset: 4,
        }]
        .into(),
        last_append_time_ms: 0,
        last_timestamp: -1,
    };
    let header = |seq| BatchHeader::parse(&idem(1, 0, seq)).unwrap();
    assert_eq!(
        check_sequence(Some(&entry), &header(0)),
        Ok(SequenceCheck::Append)
    );
    assert!(check_sequence(Some(&entry), &header(i32::MAX)).is_err());
}

#[test]
fn batches_in_one_blob_are_checked_in_order_and_all_or_nothing() {
    let mut p = three_replicas();
    let b0 = BatchBuilder::new(2).producer(PID, 0, 0).build();
    let b1 = BatchBuilder::new(2).producer(PID, 0, 2).build();
    let info = p.append(concat(&[b0.clone(), b1.clone()]), 1).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (0, 3));
    assert_eq!(p.producer_state(PID).unwrap().next_sequence(), 4);

    // seq 4-5 is fine but seq 9 leaves a gap: neither is appended, state unchanged.
    let ok = BatchBuilder::new(2).producer(PID, 0, 4).build();
    let gap = BatchBuilder::new(1).producer(PID, 0, 9).build();
    assert!(p.append(concat(&[ok.clone(), gap]), 2).is_err());
    assert_eq!(p.log_end_offset(), 4);
    assert_eq!(p.producer_state(PID).unwrap().next_sequence(), 4);
    assert!(p.append(Bytes::from(ok), 3).is_ok());

    // A duplicate beside a new batch: answering "duplicate" would acknowledge the new
    // batch without appending it, so the whole blob is refused and nothing changes.
    let fresh = BatchBuilder::new(1).producer(PID, 0, 6).build();
    for blob in [
        concat(&[fresh.clone(), b1.clone()]),
        concat(&[b1.clone(), fresh.clone()]),
    ] {
        let err = p.append(blob, 4).unwrap_err();
        assert_eq!(err.error(), kafka_protocol::ResponseError::InvalidRecord);
        assert_eq!(p.log_end_offset(), 6);
        assert_eq!(p.producer_state(PID).unwrap().next_sequence(), 6);
    }
    // Alone, the retry is a duplicate with the original offsets, and the new batch appends.
    let dup = p.append(Bytes::from(b1), 5).unwrap();
    assert!(dup.duplicate);
    assert_eq!((dup.base_offset, dup.last_offset), (2, 3));
    let info = p.append(Bytes::from(fresh), 6).unwrap();
    assert!(!info.duplicate);
    assert_eq!((info.base_offset, info.last_offset), (6, 6));
}

#[test]
fn non_idempotent_batches_are_never_deduplicated() {
    let mut p = three_replicas();
    let batch = BatchBuilder::new(1).bytes();
    assert!(!p.append(batch.clone(), 1).unwrap().duplicate);
    assert!(!p.append(batch, 2).unwrap().duplicate);
    assert_eq!(p.log_end_offset(), 2);
    assert_eq!(p.producer_count(), 0);
}

#[test]
fn producers_are_independent() {
    let mut p = three_replicas();
    p.append(BatchBuilder::new(1).producer(1, 0, 0).bytes(), 1)
        .unwrap();
    p.append(BatchBuilder::new(1).producer(2, 0, 0).bytes(), 1)
        .unwrap();
    assert!(p
        .append(BatchBuilder::new(1).producer(1, 0, 1).bytes(), 1)
        .is_ok());
    assert!(p
        .append(BatchBuilder::new(1).producer(2, 3, 0).bytes(), 1)
        .is_ok());
    assert_eq!(p.producer_count(), 2);
    assert_eq!(p.producer_state(2).unwrap().producer_epoch, 3);
}

#[test]
fn producer_state_is_capped_with_least_recently_used_eviction() {
    let mut manager = ProducerStateManager::new(2);
    let append = |manager: &mut ProducerStateManager, pid: i64, seq: i32| {
        let bytes = BatchBuilder::new(1).producer(pid, 0, seq).build();
        let header = BatchHeader::parse(&bytes).unwrap();
        let mut pending = PendingProducerUpdates::default();
        pending.check_and_stage(manager, &header, 0, 0, 7).unwrap();
        manager.commit(pending);
    };
    append(&mut manager, 1, 0);
    append(&mut manager, 2, 0);
    append(&mut manager, 1, 1); // 1 is now more recent than 2
    append(&mut manager, 3, 0); // evicts 2
    assert_eq!(manager.len(), 2);
    assert!(manager.producer(2).is_none());
    assert_eq!(manager.producer(1).unwrap().next_sequence(), 2);
    assert_eq!(manager.producer(3).unwrap().last_append_time_ms, 7);
    // A forgotten producer writing again is a producer the partition does not know: its
    // next batch is taken at whatever sequence it carries.
    append(&mut manager, 2, 1);
    assert_eq!(manager.producer(2).unwrap().next_sequence(), 2);
}
