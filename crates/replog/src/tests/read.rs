//! Reads: HW vs LEO bound, KIP-74, out-of-range offsets, ListOffsets, OffsetForLeaderEpoch.

use super::{both_fetch, three_replicas};
use crate::batch::{batch_headers, field};
use crate::test_util::{i64_at, BatchBuilder};
use crate::{Partition, ReadBound, ReadError};

/// Three batches: offsets 0-1, 2-4, 5; timestamps 100, 200, 300. Returns their sizes.
fn three_batches(p: &mut Partition) -> [usize; 3] {
    let a = BatchBuilder::new(2).timestamp(100).bytes();
    let b = BatchBuilder::new(3).timestamp(200).bytes();
    let c = BatchBuilder::new(1).timestamp(300).bytes();
    let sizes = [a.len(), b.len(), c.len()];
    for batch in [a, b, c] {
        p.append(batch, 1).unwrap();
    }
    sizes
}

fn base_offsets(records: &[u8]) -> Vec<i64> {
    batch_headers(records).map(|h| h.base_offset).collect()
}

#[test]
fn consumers_read_below_the_hw_followers_up_to_the_leo() {
    let mut p = three_replicas();
    three_batches(&mut p);
    both_fetch(&mut p, 2, 5); // HW 2
    let consumer = p.read(0, usize::MAX, ReadBound::HighWatermark).unwrap();
    assert_eq!(base_offsets(&consumer.records), vec![0]);
    assert_eq!(
        (
            consumer.high_watermark,
            consumer.log_end_offset,
            consumer.log_start_offset
        ),
        (2, 6, 0)
    );
    assert_eq!(consumer.last_stable_offset, 2);
    let follower = p.read(0, usize::MAX, ReadBound::LogEnd).unwrap();
    assert_eq!(base_offsets(&follower.records), vec![0, 2, 5]);
}

#[test]
fn fetch_at_the_bound_or_between_hw_and_leo_is_empty_without_error() {
    let mut p = three_replicas();
    three_batches(&mut p);
    both_fetch(&mut p, 2, 5); // HW 2, LEO 6
    for offset in 2..=6 {
        let r = p
            .read(offset, usize::MAX, ReadBound::HighWatermark)
            .unwrap();
        assert!(r.records.is_empty(), "offset {offset}");
    }
    assert!(p
        .read(6, usize::MAX, ReadBound::LogEnd)
        .unwrap()
        .records
        .is_empty());
    assert_eq!(p.bytes_available(2, ReadBound::HighWatermark), 0);
}

#[test]
fn offsets_outside_the_log_are_out_of_range() {
    let mut p = three_replicas();
    three_batches(&mut p);
    let err = p.read(7, 100, ReadBound::LogEnd).unwrap_err();
    assert_eq!(
        err,
        ReadError::OffsetOutOfRange {
            fetch_offset: 7,
            log_start_offset: 0,
            log_end_offset: 6
        }
    );
    assert_eq!(err.kafka_error_code(), 1);
    assert!(p.read(7, 100, ReadBound::HighWatermark).is_err());
    assert!(p.read(-1, 100, ReadBound::LogEnd).is_err());
    assert_eq!(p.bytes_available(7, ReadBound::LogEnd), 0);
}

#[test]
fn at_least_one_whole_batch_is_returned_even_above_max_bytes() {
    // KIP-74: a batch larger than max_bytes must still be returned, or the consumer
    // would be stuck forever.
    let mut p = three_replicas();
    let sizes = three_batches(&mut p);
    let r = p.read(0, 1, ReadBound::LogEnd).unwrap();
    assert_eq!(r.records.len(), sizes[0]);
    let r = p.read(0, 0, ReadBound::LogEnd).unwrap();
    assert_eq!(base_offsets(&r.records), vec![0]);
    // Room for two whole batches but not three: two.
    let r = p
        .read(0, sizes[0] + sizes[1] + sizes[2] - 1, ReadBound::LogEnd)
        .unwrap();
    assert_eq!(base_offsets(&r.records), vec![0, 2]);
    // Batches are never cut: one byte short of two batches gives one.
    let r = p
        .read(0, sizes[0] + sizes[1] - 1, ReadBound::LogEnd)
        .unwrap();
    assert_eq!(base_offsets(&r.records), vec![0]);
}

#[test]
fn a_fetch_inside_a_batch_returns_the_whole_batch() {
    let mut p = three_replicas();
    three_batches(&mut p);
    let r = p.read(3, usize::MAX, ReadBound::LogEnd).unwrap();
    assert_eq!(base_offsets(&r.records), vec![2, 5]);
    assert_eq!(i64_at(&r.records, field::BASE_OFFSET), 2);
}

#[test]
fn a_batch_straddling_the_hw_is_not_shown_to_consumers() {
    let mut p = three_replicas();
    three_batches(&mut p);
    both_fetch(&mut p, 3, 5); // HW 3: inside batch 2-4
    let r = p.read(0, usize::MAX, ReadBound::HighWatermark).unwrap();
    assert_eq!(base_offsets(&r.records), vec![0]);
    assert!(p
        .read(2, usize::MAX, ReadBound::HighWatermark)
        .unwrap()
        .records
        .is_empty());
}

#[test]
fn bytes_available_matches_an_unlimited_read() {
    let mut p = three_replicas();
    let sizes = three_batches(&mut p);
    both_fetch(&mut p, 5, 5); // HW 5
    for bound in [ReadBound::HighWatermark, ReadBound::LogEnd] {
        for offset in 0..=6 {
            let read = p.read(offset, usize::MAX, bound).unwrap().records.len();
            assert_eq!(
                p.bytes_available(offset, bound),
                read,
                "{bound:?} at {offset}"
            );
        }
    }
    assert_eq!(
        p.bytes_available(0, ReadBound::HighWatermark),
        sizes[0] + sizes[1]
    );
}

#[test]
fn offset_for_timestamp_finds_the_first_committed_record_at_or_after_it() {
    let mut p = three_replicas();
    three_batches(&mut p); // record timestamps: 100 101 | 200 201 202 | 300
    let hw = ReadBound::HighWatermark;
    assert_eq!(
        p.offset_for_timestamp(150, hw),
        None,
        "nothing is committed yet"
    );
    assert_eq!(p.offset_for_max_timestamp(hw), None);
    both_fetch(&mut p, 6, 5);
    assert_eq!(p.offset_for_timestamp(0, hw), Some((0, 100)));
    assert_eq!(p.offset_for_timestamp(101, hw), Some((1, 101)));
    assert_eq!(p.offset_for_timestamp(150, hw), Some((2, 200)));
    assert_eq!(p.offset_for_timestamp(201, hw), Some((3, 201)));
    assert_eq!(p.offset_for_timestamp(203, hw), Some((5, 300)));
    assert_eq!(p.offset_for_timestamp(301, hw), None);
    assert_eq!(p.offset_for_max_timestamp(hw), Some((5, 300)));
}

#[test]
fn timestamp_lookups_are_bounded_by_the_hw_for_consumers_and_the_log_end_for_replicas() {
    let mut p = three_replicas();
    three_batches(&mut p);
    both_fetch(&mut p, 5, 5); // the batch at 300 is not committed
    let (hw, log_end) = (ReadBound::HighWatermark, ReadBound::LogEnd);
    assert_eq!(p.offset_for_timestamp(250, hw), None);
    assert_eq!(p.offset_for_timestamp(250, log_end), Some((5, 300)));
    // The largest timestamp is above the HW: a consumer finds nothing (Kafka 4.4), not
    // the largest below it; a replica finds it.
    assert_eq!(p.offset_for_max_timestamp(hw), None);
    assert_eq!(p.offset_for_max_timestamp(log_end), Some((5, 300)));
}

#[test]
fn compressed_batches_answer_at_batch_granularity() {
    let mut p = three_replicas();
    // Codec bit set: the records are opaque to the log.
    p.append(
        BatchBuilder::new(3).timestamp(100).attributes(0x01).bytes(),
        1,
    )
    .unwrap();
    both_fetch(&mut p, 3, 2);
    assert_eq!(
        p.offset_for_timestamp(101, ReadBound::HighWatermark),
        Some((0, 102))
    );
    assert_eq!(
        p.offset_for_max_timestamp(ReadBound::HighWatermark),
        Some((0, 102))
    );
}

#[test]
fn a_new_leader_knows_only_its_current_epoch() {
    let mut p = three_replicas();
    three_batches(&mut p);
    assert_eq!(p.end_offset_for_leader_epoch(0), (0, 6));
    assert_eq!(p.end_offset_for_leader_epoch(1), (-1, -1));
    assert_eq!(p.end_offset_for_leader_epoch(-1), (-1, -1));
}
