//! The v2 batch header: parsing, validation rules, helpers.

use crate::batch::{
    batch_headers, field, increment_sequence, read_log_prefix, split_and_validate, validate_batch,
    BatchFraming, BatchHeader, RecordBatches, LOG_OVERHEAD,
};
use crate::error::AppendError;
use crate::test_util::{fix_crc, BatchBuilder};

const MAX: usize = 1_048_588;

#[test]
fn parses_every_header_field() {
    let bytes = BatchBuilder::new(3)
        .timestamp(5_000)
        .producer(42, 7, 10)
        .attributes(0x10)
        .build();
    let h = BatchHeader::parse(&bytes).unwrap();
    assert_eq!(h.base_offset, 0);
    assert_eq!(h.size_in_bytes(), Some(bytes.len()));
    assert_eq!(h.partition_leader_epoch, -1);
    assert_eq!(h.magic, 2);
    assert_eq!(h.last_offset_delta, 2);
    assert_eq!(h.record_count, 3);
    assert_eq!(h.base_timestamp, 5_000);
    assert_eq!(h.max_timestamp, 5_002);
    assert_eq!(
        (h.producer_id, h.producer_epoch, h.base_sequence),
        (42, 7, 10)
    );
    assert!(h.is_transactional() && !h.is_control() && h.is_idempotent());
    assert_eq!(h.last_sequence(), 12);
    assert_eq!(h.compression_codec(), 0);
}

#[test]
fn header_shorter_than_61_bytes_does_not_parse() {
    let bytes = BatchBuilder::new(1).build();
    assert!(BatchHeader::parse(&bytes[..60]).is_none());
}

#[test]
fn sequence_numbers_wrap_at_i32_max() {
    assert_eq!(increment_sequence(5, 3), 8);
    assert_eq!(increment_sequence(i32::MAX, 1), 0);
    assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
    assert_eq!(increment_sequence(i32::MAX, i32::MAX), i32::MAX - 1);
}

#[test]
fn magic_other_than_2_is_invalid_record() {
    let mut bytes = BatchBuilder::new(1).build();
    bytes[field::MAGIC] = 1;
    let err = validate_batch(&bytes, MAX).unwrap_err();
    assert!(matches!(err, AppendError::InvalidRecord { .. }), "{err:?}");
}

#[test]
fn batch_above_max_is_message_too_large() {
    let bytes = BatchBuilder::with_value_size(500).build();
    let err = validate_batch(&bytes, 400).unwrap_err();
    assert_eq!(
        err,
        AppendError::MessageTooLarge {
            size: bytes.len(),
            max: 400
        }
    );
    assert_eq!(err.kafka_error_code(), 10);
    assert!(validate_batch(&bytes, bytes.len()).is_ok());
}

#[test]
fn inconsistent_headers_are_invalid_records() {
    // Each edit keeps a correct CRC, so only the consistency check can object.
    type Edit = Box<dyn Fn(&mut Vec<u8>)>;
    let edits: Vec<(&str, Edit)> = vec![
        (
            "lastOffsetDelta != count - 1",
            Box::new(|b| b[field::LAST_OFFSET_DELTA + 3] = 5),
        ),
        (
            "negative lastOffsetDelta",
            Box::new(|b| {
                b[field::LAST_OFFSET_DELTA..field::LAST_OFFSET_DELTA + 4]
                    .copy_from_slice(&(-1i32).to_be_bytes())
            }),
        ),
        (
            "zero record count",
            Box::new(|b| {
                b[field::RECORD_COUNT..field::RECORD_COUNT + 4].copy_from_slice(&0i32.to_be_bytes())
            }),
        ),
        (
            "control batch",
            Box::new(|b| b[field::ATTRIBUTES + 1] |= 0x20),
        ),
        (
            "transactional without producer id",
            Box::new(|b| b[field::ATTRIBUTES + 1] |= 0x10),
        ),
        (
            "producer id without sequence",
            Box::new(|b| {
                b[field::PRODUCER_ID..field::PRODUCER_ID + 8].copy_from_slice(&9i64.to_be_bytes())
            }),
        ),
    ];
    for (what, edit) in edits {
        let mut bytes = BatchBuilder::new(2).build();
        edit(&mut bytes);
        fix_crc(&mut bytes);
        let err = validate_batch(&bytes, MAX).unwrap_err();
        assert_eq!(err.kafka_error_code(), 87, "{what}: {err:?}");
    }
}

#[test]
fn split_finds_each_batch_and_rejects_leftovers() {
    let a = BatchBuilder::new(2).build();
    let b = BatchBuilder::new(3).build();
    let blob = [a.clone(), b.clone()].concat();
    let spans = split_and_validate(&blob, MAX).unwrap();
    assert_eq!(spans.len(), 2);
    assert_eq!((spans[0].start, spans[0].len), (0, a.len()));
    assert_eq!((spans[1].start, spans[1].len), (a.len(), b.len()));

    for bad in [
        &blob[..blob.len() - 1],
        &[blob.as_slice(), &[0u8; 5]].concat()[..],
        &[][..],
    ] {
        let err = split_and_validate(bad, MAX).unwrap_err();
        assert_eq!(err.kafka_error_code(), 87, "{err:?}");
    }
}

#[test]
fn batch_headers_iterates_complete_batches_only() {
    let a = BatchBuilder::new(2).build();
    let b = BatchBuilder::new(3).build();
    let blob = [a, b].concat();
    assert_eq!(batch_headers(&blob).count(), 2);
    assert_eq!(batch_headers(&blob[..blob.len() - 1]).count(), 1);
    assert_eq!(batch_headers(&[]).count(), 0);
}

#[test]
fn record_batches_yields_each_batch_then_says_why_it_stopped() {
    let a = BatchBuilder::new(2).build();
    let b = BatchBuilder::new(3).base_offset(2, 0).build();
    let blob = [a.clone(), b.clone()].concat();

    let found: Vec<_> = RecordBatches::new(&blob).collect();
    assert_eq!(found.len(), 2);
    let second = found[1].unwrap();
    assert_eq!((second.start, second.bytes), (a.len(), &b[..]));
    assert_eq!(second.header.base_offset, 2);

    // A fetch response cut inside the second batch: one batch, then where the tail starts.
    let cut = &blob[..blob.len() - 1];
    let found: Vec<_> = RecordBatches::new(cut).collect();
    assert_eq!(found.len(), 2);
    assert_eq!(
        found[1],
        Err(BatchFraming::Truncated {
            start: a.len(),
            remaining: b.len() - 1
        })
    );

    // A length too small for a header is not a batch; nothing after it is read.
    let mut bad = a.clone();
    bad[field::BATCH_LENGTH..field::BATCH_LENGTH + 4].copy_from_slice(&10i32.to_be_bytes());
    let blob = [bad, b].concat();
    let found: Vec<_> = RecordBatches::new(&blob).collect();
    assert!(matches!(
        found[..],
        [Err(BatchFraming::BadLength {
            start: 0,
            batch_length: 10,
            ..
        })]
    ));
    assert!(RecordBatches::new(&[]).next().is_none());
}

#[test]
fn next_offset_follows_the_last_record() {
    let mut bytes = BatchBuilder::new(3).build();
    bytes[field::BASE_OFFSET..field::BASE_OFFSET + 8].copy_from_slice(&40i64.to_be_bytes());
    let h = BatchHeader::parse(&bytes).unwrap();
    assert_eq!((h.last_offset(), h.next_offset()), (42, 43));
    let h = BatchHeader {
        base_offset: i64::MAX,
        ..h
    };
    assert_eq!(h.next_offset(), i64::MAX);
}

#[test]
fn log_prefix_reads_offset_and_length_from_12_bytes() {
    let bytes = BatchBuilder::new(2).build();
    let h = BatchHeader::parse(&bytes).unwrap();
    assert_eq!(
        read_log_prefix(&bytes[..LOG_OVERHEAD]),
        Some((h.base_offset, h.batch_length))
    );
    assert_eq!(read_log_prefix(&bytes[..LOG_OVERHEAD - 1]), None);
}
