//! Appending: offsets, in-place header patching, validation, atomicity.

use bytes::Bytes;

use super::three_replicas;
use crate::batch::field;
use crate::test_util::{concat, crc_is_valid, i32_at, i64_at, BatchBuilder};
use crate::{AppendError, ReadBound};

#[test]
fn append_assigns_contiguous_offsets() {
    let mut p = three_replicas();
    let a = p.append(BatchBuilder::new(3).bytes(), 1).unwrap();
    let b = p.append(BatchBuilder::new(1).bytes(), 2).unwrap();
    let c = p.append(BatchBuilder::new(5).bytes(), 3).unwrap();
    assert_eq!((a.base_offset, a.last_offset, a.record_count), (0, 2, 3));
    assert_eq!((b.base_offset, b.last_offset, b.record_count), (3, 3, 1));
    assert_eq!((c.base_offset, c.last_offset, c.record_count), (4, 8, 5));
    assert!(!a.duplicate && !b.duplicate && !c.duplicate);
    assert_eq!(p.log_end_offset(), 9);
    assert_eq!(p.batch_count(), 3);
    // Followers have not fetched: nothing is committed yet.
    assert_eq!(p.high_watermark(), 0);
}

#[test]
fn append_patches_base_offset_and_leader_epoch_and_keeps_the_crc_valid() {
    let mut p = three_replicas();
    p.append(BatchBuilder::new(4).bytes(), 1).unwrap();
    let sent = BatchBuilder::new(2).timestamp(77).build();
    let info = p.append(Bytes::from(sent.clone()), 2).unwrap();
    assert_eq!(info.base_offset, 4);
    assert_eq!(info.bytes, sent.len());

    let stored = p.read(4, usize::MAX, ReadBound::LogEnd).unwrap().records;
    assert_eq!(stored.len(), sent.len());
    assert_eq!(i64_at(&stored, field::BASE_OFFSET), 4);
    assert_eq!(
        i32_at(&stored, field::PARTITION_LEADER_EPOCH),
        p.leader_epoch()
    );
    // Recompute the CRC from scratch: still valid, since both fields precede it.
    assert!(crc_is_valid(&stored));
    // Every other byte is exactly as the producer sent it.
    assert_eq!(
        stored[field::BATCH_LENGTH..field::PARTITION_LEADER_EPOCH],
        sent[8..12]
    );
    assert_eq!(stored[field::MAGIC..], sent[field::MAGIC..]);
}

#[test]
fn a_multi_batch_blob_is_stored_as_separate_batches() {
    let mut p = three_replicas();
    let blob = concat(&[BatchBuilder::new(2).build(), BatchBuilder::new(3).build()]);
    let info = p.append(blob.clone(), 1).unwrap();
    assert_eq!(
        (info.base_offset, info.last_offset, info.record_count),
        (0, 4, 5)
    );
    assert_eq!(info.bytes, blob.len());
    assert_eq!(p.batch_count(), 2);
    assert_eq!(p.size_bytes(), blob.len());
    let second = p.read(2, usize::MAX, ReadBound::LogEnd).unwrap().records;
    assert_eq!(i64_at(&second, field::BASE_OFFSET), 2);
    assert!(crc_is_valid(&second));
}

#[test]
fn crc_mismatch_is_corrupt_message_and_appends_nothing() {
    let mut p = three_replicas();
    p.append(BatchBuilder::new(1).bytes(), 1).unwrap();
    let mut bytes = BatchBuilder::new(2).build();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff; // flip a bit inside a record value
    let err = p.append(Bytes::from(bytes), 2).unwrap_err();
    assert!(matches!(err, AppendError::CorruptMessage { .. }), "{err:?}");
    assert_eq!(err.kafka_error_code(), 2);
    assert_eq!(p.log_end_offset(), 1);
    assert_eq!(p.batch_count(), 1);
}

#[test]
fn truncated_empty_or_garbage_input_is_invalid_record() {
    let mut p = three_replicas();
    let good = BatchBuilder::new(3).build();
    let inputs: Vec<Vec<u8>> = vec![
        vec![],
        good[..good.len() - 1].to_vec(),
        good[..30].to_vec(),
        good[..5].to_vec(),
        [good.clone(), vec![1, 2, 3]].concat(),
        vec![0xff; 100],
    ];
    for input in inputs {
        let err = p.append(Bytes::from(input.clone()), 1).unwrap_err();
        assert_eq!(
            err.kafka_error_code(),
            87,
            "input of {} bytes: {err:?}",
            input.len()
        );
        assert_eq!(err.error(), kafka_protocol::ResponseError::InvalidRecord);
    }
    assert_eq!(p.log_end_offset(), 0);
    assert_eq!(p.size_bytes(), 0);
}

#[test]
fn a_bad_batch_anywhere_in_the_blob_rejects_the_whole_blob() {
    let mut p = three_replicas();
    let mut bad = BatchBuilder::new(1).build();
    bad[field::MAGIC] = 1;
    let blob = concat(&[BatchBuilder::new(2).build(), bad]);
    assert!(p.append(blob, 1).is_err());
    assert_eq!(p.log_end_offset(), 0);
    assert_eq!(p.batch_count(), 0);
}

#[test]
fn batches_above_message_max_bytes_are_rejected() {
    let mut p = super::three_replicas_with(crate::LogConfig {
        max_batch_bytes: 200,
        ..Default::default()
    });
    let err = p
        .append(BatchBuilder::with_value_size(300).bytes(), 1)
        .unwrap_err();
    assert_eq!(err.kafka_error_code(), 10);
    assert!(p
        .append(BatchBuilder::with_value_size(50).bytes(), 1)
        .is_ok());
}

#[test]
fn the_stored_copy_does_not_alias_the_request_buffer() {
    let mut p = three_replicas();
    let batch = BatchBuilder::new(1).build();
    // A request frame with the records somewhere in the middle.
    let frame = Bytes::from([vec![9u8; 1000], batch.clone(), vec![9u8; 1000]].concat());
    let records = frame.slice(1000..1000 + batch.len());
    p.append(records, 1).unwrap();
    assert_eq!(p.size_bytes(), batch.len());
    let stored = p.read(0, usize::MAX, ReadBound::LogEnd).unwrap().records;
    let frame_range = frame.as_ptr() as usize..frame.as_ptr() as usize + frame.len();
    assert!(!frame_range.contains(&(stored.as_ptr() as usize)));
}

#[test]
fn error_codes_match_the_kafka_protocol() {
    let cases = [
        (
            AppendError::CorruptMessage {
                stored_crc: 1,
                computed_crc: 2,
            },
            2,
        ),
        (
            AppendError::InvalidRecord {
                reason: String::new(),
            },
            87,
        ),
        (AppendError::MessageTooLarge { size: 2, max: 1 }, 10),
        (
            AppendError::OutOfOrderSequence {
                producer_id: 1,
                producer_epoch: 0,
                expected_sequence: 0,
                first_sequence: 3,
            },
            45,
        ),
        (
            AppendError::InvalidProducerEpoch {
                producer_id: 1,
                producer_epoch: 0,
                current_epoch: 1,
            },
            47,
        ),
    ];
    for (err, code) in cases {
        assert_eq!(err.kafka_error_code(), code, "{err}");
    }
}
