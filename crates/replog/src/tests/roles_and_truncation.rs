//! Leaders and followers in one process: role switches, the leader epoch cache, follower
//! appends, truncation after a leader change (KIP-101, KIP-279) and diverging epochs
//! (KIP-320). Each broker's copy of the partition is its own `Partition`; a "fetch" is the
//! follower's offsets told to the leader, the leader's read, and the follower's append.

use bytes::Bytes;
use proptest::prelude::*;

use crate::batch::{batch_headers, field};
use crate::leader_epoch::{EpochEntry, LeaderEpochCache};
use crate::test_util::{concat, fix_crc, BatchBuilder};
use crate::{
    AppendError, FollowerAppendError, FollowerError, LogConfig, Partition, ReadBound, Role,
    RoleError, TruncationTarget, UNKNOWN_OFFSET,
};

const PID: i64 = 4242;

fn config() -> LogConfig {
    LogConfig {
        // Followers never drop out of the ISR unless a test says so.
        replica_lag_time_max_ms: 1_000_000,
        ..LogConfig::default()
    }
}

/// Broker `id`'s copy of the partition with replicas 1, 2, 3, following `leader_id` in
/// leader epoch `epoch`.
fn follower_of(id: i32, leader_id: i32, epoch: i32) -> Partition {
    let mut p = Partition::new("t", 0, id, vec![1, 2, 3], config(), 0);
    p.make_follower(leader_id, epoch, 0).unwrap();
    p
}

/// Entries of the leader epoch cache, as `(epoch, start offset)`.
fn epochs(p: &Partition) -> Vec<(i32, i64)> {
    p.epoch_cache()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect()
}

/// The whole log, as stored.
fn log_bytes(p: &Partition) -> Bytes {
    p.read(p.log_start_offset(), usize::MAX, ReadBound::LogEnd)
        .unwrap()
        .records
}

/// `(base offset, leader epoch)` of every stored batch.
fn batches(p: &Partition) -> Vec<(i64, i32)> {
    batch_headers(&log_bytes(p))
        .map(|h| (h.base_offset, h.partition_leader_epoch))
        .collect()
}

/// One fetch of `follower` (broker `id`) from `leader`, the way a Fetch v12+ follower
/// does it: the leader first checks for a diverging epoch, and if there is one the
/// follower truncates instead of appending. Otherwise the leader records the fetch
/// offset, reads from it, the follower appends what it got and takes the leader's HW.
/// Returns the truncation offset if the follower truncated.
fn fetch(leader: &mut Partition, follower: &mut Partition, id: i32, now_ms: u64) -> Option<i64> {
    let last_fetched_epoch = follower.latest_epoch().unwrap_or(-1);
    let offset = follower.log_end_offset();
    match leader.diverging_epoch(last_fetched_epoch, offset) {
        Ok(Some((epoch, end_offset))) => {
            let target = follower.follower_truncation_target(epoch, end_offset);
            follower.truncate_to(target.offset).unwrap();
            return Some(target.offset);
        }
        Ok(None) => {}
        Err(_) => {
            let start = leader.log_start_offset();
            follower.truncate_fully_and_start_at(start).unwrap();
            return Some(start);
        }
    }
    leader.update_follower_fetch(id, offset, now_ms).unwrap();
    let read = leader.read(offset, usize::MAX, ReadBound::LogEnd).unwrap();
    follower.append_as_follower(read.records, now_ms).unwrap();
    follower
        .update_high_watermark_as_follower(read.high_watermark)
        .unwrap();
    None
}

/// Fetches until the follower holds the leader's whole log and knows its HW.
fn catch_up(leader: &mut Partition, follower: &mut Partition, id: i32, now_ms: u64) {
    for _ in 0..20 {
        fetch(leader, follower, id, now_ms);
        if follower.log_end_offset() == leader.log_end_offset()
            && follower.high_watermark() == leader.high_watermark()
            && leader.diverging_epoch(
                follower.latest_epoch().unwrap_or(-1),
                follower.log_end_offset(),
            ) == Ok(None)
        {
            return;
        }
    }
    panic!("follower {id} did not catch up");
}

/// A leader-stamped batch of `count` records at `base_offset` in `epoch`.
fn stamped(count: usize, base_offset: i64, epoch: i32) -> Bytes {
    BatchBuilder::new(count)
        .base_offset(base_offset, epoch)
        .bytes()
}

#[test]
fn a_follower_with_records_the_new_leader_never_got_truncates_them_and_keeps_everything_below_the_hw(
) {
    let mut b1 = Partition::new("t", 0, 1, vec![1, 2, 3], config(), 0);
    let mut b2 = follower_of(2, 1, 0);
    let mut b3 = follower_of(3, 1, 0);

    // Epoch 0, leader 1: offsets 0-1 reach everyone and are committed.
    b1.append(BatchBuilder::with_values(&["a0", "a1"]).bytes(), 1)
        .unwrap();
    for _ in 0..3 {
        fetch(&mut b1, &mut b2, 2, 2);
        fetch(&mut b1, &mut b3, 3, 2);
    }
    assert_eq!(
        (
            b1.high_watermark(),
            b2.high_watermark(),
            b3.high_watermark()
        ),
        (2, 2, 2)
    );
    let committed = b1
        .read(0, usize::MAX, ReadBound::HighWatermark)
        .unwrap()
        .records;

    // Leader 1 appends offsets 2-4 and fails before anyone fetches them.
    b1.append(
        BatchBuilder::with_values(&["lost2", "lost3", "lost4"]).bytes(),
        3,
    )
    .unwrap();
    assert_eq!(b1.log_end_offset(), 5);

    // Broker 2 is elected in epoch 1 with ISR {2, 3}; broker 3 follows it. Broker 2
    // writes other records at offset 2.
    b2.make_leader(1, vec![1, 2, 3], vec![2, 3], 10).unwrap();
    b3.make_follower(2, 1, 10).unwrap();
    b2.append(BatchBuilder::with_values(&["new2"]).bytes(), 11)
        .unwrap();
    catch_up(&mut b2, &mut b3, 3, 12);
    assert_eq!(epochs(&b2), vec![(0, 0), (1, 2)]);

    // Broker 1 restarts as a follower of 2. Asked where its last epoch (0) ends, the new
    // leader says 2, both by OffsetForLeaderEpoch and as the diverging epoch of a fetch.
    b1.make_follower(2, 1, 20).unwrap();
    assert_eq!(b1.latest_epoch(), Some(0));
    assert_eq!(b2.end_offset_for_leader_epoch(0), (0, 2));
    assert_eq!(b2.diverging_epoch(0, 5), Ok(Some((0, 2))));
    assert_eq!(
        b1.follower_truncation_target(0, 2),
        TruncationTarget {
            offset: 2,
            complete: true
        }
    );

    // It truncates its three lost records, whole batch, and nothing below the HW.
    let truncation = b1.truncate_to(2).unwrap();
    assert_eq!(
        (
            truncation.old_log_end_offset,
            truncation.new_log_end_offset,
            truncation.batches_dropped,
            truncation.records_dropped,
        ),
        (5, 2, 1, 3)
    );
    assert!(truncation.truncated());
    assert_eq!(b1.high_watermark(), 2, "the HW was not truncated");
    assert_eq!(
        b1.read(0, usize::MAX, ReadBound::HighWatermark)
            .unwrap()
            .records,
        committed
    );
    assert_eq!(epochs(&b1), vec![(0, 0)]);

    // Then it replicates the new leader's log, and the three logs are one.
    catch_up(&mut b2, &mut b1, 1, 21);
    assert_eq!(log_bytes(&b1), log_bytes(&b2));
    assert_eq!(log_bytes(&b3), log_bytes(&b2));
    assert_eq!(epochs(&b1), vec![(0, 0), (1, 2)]);
    assert_eq!(batches(&b1), vec![(0, 0), (2, 1)]);
    assert_eq!(b1.size_bytes(), b2.size_bytes());
    assert_eq!(
        b1.bytes_available(0, ReadBound::LogEnd),
        b1.size_bytes(),
        "positions stayed contiguous across the truncation"
    );
}

#[test]
fn the_fetch_loop_truncates_by_itself_when_the_old_leader_diverged_at_the_same_offset() {
    // KIP-101's second scenario: both brokers wrote a different record at offset 1 and
    // neither had the other's. Truncating to a high watermark would keep both versions;
    // leader epochs do not.
    let mut b1 = Partition::new("t", 0, 1, vec![1, 2], config(), 0);
    let mut b2 = follower_of(2, 1, 0);
    b1.append(BatchBuilder::with_values(&["m0"]).bytes(), 1)
        .unwrap();
    catch_up(&mut b1, &mut b2, 2, 2);
    b1.append(BatchBuilder::with_values(&["old m1"]).bytes(), 3)
        .unwrap();

    b2.make_leader(1, vec![1, 2], vec![2], 4).unwrap();
    b2.append(BatchBuilder::with_values(&["new m1"]).bytes(), 5)
        .unwrap();
    b1.make_follower(2, 1, 6).unwrap();

    assert_eq!(
        fetch(&mut b2, &mut b1, 1, 7),
        Some(1),
        "diverged: truncate to 1"
    );
    assert_eq!(b1.log_end_offset(), 1);
    catch_up(&mut b2, &mut b1, 1, 8);
    assert_eq!(log_bytes(&b1), log_bytes(&b2));
    let records = b1.read(1, usize::MAX, ReadBound::LogEnd).unwrap().records;
    assert!(records.windows(6).any(|w| w == b"new m1"));
    assert!(!log_bytes(&b1).windows(6).any(|w| w == b"old m1"));
}

#[test]
fn the_leader_epoch_cache_answers_across_several_epochs() {
    let mut p = Partition::new("t", 0, 1, vec![1], config(), 0);
    assert_eq!(p.latest_epoch(), None);
    assert_eq!(
        p.end_offset_for_leader_epoch(0),
        (0, 0),
        "a new leader knows its own epoch at once"
    );
    p.append(BatchBuilder::new(3).bytes(), 1).unwrap(); // 0-2, epoch 0
    p.make_leader(2, vec![1], vec![1], 2).unwrap();
    p.append(BatchBuilder::new(2).bytes(), 3).unwrap(); // 3-4, epoch 2
    p.append(BatchBuilder::new(1).bytes(), 3).unwrap(); // 5, epoch 2: same entry
    p.make_leader(5, vec![1], vec![1], 4).unwrap();

    // Epoch 5 has no batch yet: not in the cache, but the leader answers for it.
    assert_eq!(epochs(&p), vec![(0, 0), (2, 3)]);
    assert_eq!(p.latest_epoch(), Some(2));
    assert_eq!(p.end_offset_for_leader_epoch(5), (5, 6));
    assert_eq!(p.end_offset_for_leader_epoch(2), (2, 6));
    assert_eq!(p.end_offset_for_leader_epoch(4), (2, 6));

    p.append(BatchBuilder::new(4).bytes(), 5).unwrap(); // 6-9, epoch 5
    assert_eq!(epochs(&p), vec![(0, 0), (2, 3), (5, 6)]);
    assert_eq!(p.latest_epoch(), Some(5));
    let answers: Vec<_> = (-1..=6)
        .map(|e| (e, p.end_offset_for_leader_epoch(e)))
        .collect();
    assert_eq!(
        answers,
        vec![
            (-1, (-1, -1)),
            (0, (0, 3)),
            (1, (0, 3)),
            (2, (2, 6)),
            (3, (2, 6)),
            (4, (2, 6)),
            (5, (5, 10)),
            (6, (-1, -1)),
        ]
    );
    assert_eq!(batches(&p), vec![(0, 0), (3, 2), (5, 2), (6, 5)]);
    assert_eq!(p.snapshot().epoch_cache, p.epoch_cache().to_vec());
}

#[test]
fn retention_moves_the_first_epoch_up_and_an_epoch_below_every_cached_one_ends_there() {
    let mut p = Partition::new(
        "t",
        0,
        1,
        vec![1],
        LogConfig {
            retention_bytes: 0,
            ..config()
        },
        0,
    );
    p.append(BatchBuilder::new(2).bytes(), 1).unwrap(); // 0-1, epoch 0
    p.make_leader(1, vec![1], vec![1], 1).unwrap();
    p.append(BatchBuilder::new(2).bytes(), 1).unwrap(); // 2-3, epoch 1
    p.make_leader(3, vec![1], vec![1], 1).unwrap();
    p.append(BatchBuilder::new(2).bytes(), 1).unwrap(); // 4-5, epoch 3
    assert_eq!(p.high_watermark(), 6, "the leader alone is the ISR");

    while p.log_start_offset() < 3 {
        assert!(p.evict_oldest_batch() > 0);
    }
    assert_eq!(p.log_start_offset(), 4);
    assert_eq!(epochs(&p), vec![(3, 4)]);
    // Epochs 0 to 2 are gone with the start of the log: Kafka answers the asked epoch
    // and the first held epoch's start, so a follower truncates to the leader's start.
    assert_eq!(p.end_offset_for_leader_epoch(0), (0, 4));
    assert_eq!(p.end_offset_for_leader_epoch(2), (2, 4));
    assert_eq!(p.end_offset_for_leader_epoch(3), (3, 6));

    // Retention empties the log: the latest epoch is still known, at the log end.
    assert!(p.enforce_retention() > 0);
    assert_eq!((p.batch_count(), p.log_start_offset()), (0, 6));
    assert_eq!(epochs(&p), vec![(3, 6)]);
    p.make_leader(4, vec![1], vec![1], 2).unwrap();
    p.append(BatchBuilder::new(1).bytes(), 2).unwrap();
    assert_eq!(epochs(&p), vec![(4, 6)], "the empty epoch 3 made room");
}

#[test]
fn a_follower_stores_fetched_batches_as_they_are_and_tracks_their_epochs() {
    let mut f = follower_of(2, 1, 3);
    let blob = concat(&[
        BatchBuilder::new(2).base_offset(0, 0).build(),
        BatchBuilder::new(3).base_offset(2, 2).build(),
        BatchBuilder::new(1).base_offset(5, 3).build(),
    ]);
    let info = f.append_as_follower(blob.clone(), 10).unwrap();
    assert_eq!(
        (
            info.base_offset,
            info.last_offset,
            info.record_count,
            info.bytes
        ),
        (0, 5, 6, blob.len())
    );
    assert!(info.change.log_grew());
    assert!(
        !info.change.high_watermark_advanced(),
        "the HW is the leader's to give"
    );
    assert_eq!(
        log_bytes(&f),
        blob,
        "offsets and epochs as the leader set them"
    );
    assert_eq!(epochs(&f), vec![(0, 0), (2, 2), (3, 5)]);
    assert_eq!(f.latest_epoch(), Some(3));

    // The HW is the leader's, capped at what the follower holds, never backwards.
    assert_eq!(
        f.update_high_watermark_as_follower(4)
            .unwrap()
            .after
            .high_watermark,
        4
    );
    f.update_high_watermark_as_follower(100).unwrap();
    assert_eq!(f.high_watermark(), 6);
    let change = f.update_high_watermark_as_follower(3).unwrap();
    assert_eq!((change.after.high_watermark, f.high_watermark()), (6, 6));
}

#[test]
fn a_follower_append_with_a_gap_or_an_overlap_is_refused_and_changes_nothing() {
    let mut f = follower_of(2, 1, 1);
    f.append_as_follower(stamped(3, 0, 0), 1).unwrap();
    f.update_high_watermark_as_follower(3).unwrap();
    let before = f.snapshot();
    let bytes_before = log_bytes(&f);

    let refusals = [
        // A gap: offsets 3 and 4 would be missing.
        (
            stamped(1, 5, 1),
            FollowerAppendError::UnexpectedOffset {
                expected: 3,
                got: 5,
            },
        ),
        // An overlap: offsets 1 and 2 are already there.
        (
            stamped(2, 1, 0),
            FollowerAppendError::UnexpectedOffset {
                expected: 3,
                got: 1,
            },
        ),
        // A gap between two batches of one response: the first, valid, is not kept
        // either.
        (
            concat(&[
                BatchBuilder::new(1).base_offset(3, 1).build(),
                BatchBuilder::new(1).base_offset(6, 1).build(),
            ]),
            FollowerAppendError::UnexpectedOffset {
                expected: 4,
                got: 6,
            },
        ),
    ];
    for (records, expected) in refusals {
        assert_eq!(f.append_as_follower(records, 2).unwrap_err(), expected);
        assert_eq!(f.snapshot(), before);
        assert_eq!(log_bytes(&f), bytes_before);
    }
    assert_eq!(
        FollowerAppendError::UnexpectedOffset {
            expected: 3,
            got: 5
        }
        .to_string(),
        "records fetched from the leader start at offset 5, expected 3"
    );

    // Corrupt, unstamped, epoch going back, epoch beyond the one followed: refused too.
    let mut corrupt = BatchBuilder::new(1).base_offset(3, 1).build();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    assert!(matches!(
        f.append_as_follower(Bytes::from(corrupt), 2),
        Err(FollowerAppendError::Invalid(
            AppendError::CorruptMessage { .. }
        ))
    ));
    for records in [
        BatchBuilder::new(1).bytes(), // epoch -1, offset 0: never stamped
        stamped(1, 3, -1),            // epoch -1 at the right offset
        concat(&[
            BatchBuilder::new(1).base_offset(3, 1).build(),
            BatchBuilder::new(1).base_offset(4, 0).build(),
        ]),
        stamped(1, 3, 2), // epoch 2, this replica follows epoch 1
    ] {
        assert!(f.append_as_follower(records, 2).is_err());
    }
    assert_eq!(f.snapshot(), before);
    assert_eq!(log_bytes(&f), bytes_before);
}

#[test]
fn a_trailing_partial_batch_in_a_fetch_is_ignored_and_fetched_whole_next_time() {
    let mut f = follower_of(2, 1, 0);
    let whole = BatchBuilder::new(2).base_offset(0, 0).build();
    let next = BatchBuilder::new(3).base_offset(2, 0).build();
    let cut = concat(&[whole.clone(), next[..next.len() / 2].to_vec()]);
    let info = f.append_as_follower(cut, 1).unwrap();
    assert_eq!((info.record_count, info.bytes), (2, whole.len()));
    assert_eq!(f.log_end_offset(), 2);

    // Only a partial batch, or nothing: nothing appended, no error.
    for records in [Bytes::from(next[..10].to_vec()), Bytes::new()] {
        let info = f.append_as_follower(records, 2).unwrap();
        assert_eq!(
            (info.base_offset, info.last_offset, info.record_count),
            (2, 1, 0)
        );
        assert!(!info.change.log_grew());
    }
    f.append_as_follower(Bytes::from(next), 3).unwrap();
    assert_eq!(f.log_end_offset(), 5);
    assert_eq!(f.bytes_available(0, ReadBound::LogEnd), f.size_bytes());

    // A length that cannot be a batch is garbage, not a partial batch.
    let mut garbage = BatchBuilder::new(1).base_offset(5, 0).build();
    garbage[field::BATCH_LENGTH..field::BATCH_LENGTH + 4].copy_from_slice(&3i32.to_be_bytes());
    assert!(matches!(
        f.append_as_follower(Bytes::from(garbage), 4),
        Err(FollowerAppendError::Invalid(
            AppendError::InvalidRecord { .. }
        ))
    ));
}

#[test]
fn a_follower_accepts_what_clients_may_not_write_since_the_leader_already_did() {
    let mut f = follower_of(2, 1, 0);
    // A control batch (only brokers write them), bigger than message.max.bytes now.
    let mut control = BatchBuilder::with_value_size(2_000)
        .base_offset(0, 0)
        .attributes(0x20 | 0x10)
        .producer(PID, 0, 0)
        .build();
    fix_crc(&mut control);
    let mut small = Partition::new(
        "t",
        0,
        2,
        vec![1, 2],
        LogConfig {
            max_batch_bytes: 1_000,
            ..config()
        },
        0,
    );
    small.make_follower(1, 0, 0).unwrap();
    for p in [&mut f, &mut small] {
        assert_eq!(
            p.append_as_follower(Bytes::from(control.clone()), 1)
                .unwrap()
                .record_count,
            1
        );
    }
}

#[test]
fn producer_state_after_truncation_deduplicates_only_batches_still_in_the_log() {
    let mut f = follower_of(2, 1, 0);
    let idem = |count: usize, seq: i32, offset: i64| {
        BatchBuilder::new(count)
            .producer(PID, 0, seq)
            .base_offset(offset, 0)
            .bytes()
    };
    f.append_as_follower(idem(2, 0, 0), 1).unwrap(); // seq 0-1 at 0-1
    f.append_as_follower(idem(2, 2, 2), 2).unwrap(); // seq 2-3 at 2-3
    f.append_as_follower(idem(1, 4, 4), 3).unwrap(); // seq 4 at 4
    assert_eq!(f.producer_state(PID).unwrap().next_sequence(), 5);

    f.truncate_to(3).unwrap(); // drops the batch 2-3 whole, and 4 with it
    assert_eq!(f.log_end_offset(), 2);
    let entry = f.producer_state(PID).unwrap();
    assert_eq!(entry.batches.len(), 1);
    assert_eq!(entry.next_sequence(), 2);
    assert_eq!(
        entry.last_append_time_ms, 3,
        "the rebuild keeps the last append time"
    );

    // Promoted, it acknowledges the retry of the batch it kept, and appends the retry of
    // the batch it truncated, at its new offset.
    f.make_leader(1, vec![1, 2, 3], vec![2], 10).unwrap();
    let kept = f
        .append(BatchBuilder::new(2).producer(PID, 0, 0).bytes(), 11)
        .unwrap();
    assert!(kept.duplicate);
    assert_eq!((kept.base_offset, kept.last_offset), (0, 1));
    let lost = f
        .append(BatchBuilder::new(2).producer(PID, 0, 2).bytes(), 12)
        .unwrap();
    assert!(!lost.duplicate);
    assert_eq!((lost.base_offset, lost.last_offset), (2, 3));
    // Out of order still counts from what the log holds.
    assert_eq!(
        f.append(BatchBuilder::new(1).producer(PID, 0, 5).bytes(), 13)
            .unwrap_err()
            .kafka_error_code(),
        45
    );

    // Truncating everything forgets the producer.
    let mut g = follower_of(3, 1, 0);
    g.append_as_follower(idem(2, 0, 0), 1).unwrap();
    g.truncate_to(0).unwrap();
    assert_eq!(
        (g.producer_count(), g.batch_count(), g.log_end_offset()),
        (0, 0, 0)
    );
}

#[test]
fn a_promoted_follower_keeps_deduplicating_the_old_leaders_acknowledged_batches() {
    let mut b1 = Partition::new("t", 0, 1, vec![1, 2], config(), 0);
    let mut b2 = follower_of(2, 1, 0);
    let sent = BatchBuilder::new(3).producer(PID, 0, 0).bytes();
    b1.append(sent.clone(), 1).unwrap();
    catch_up(&mut b1, &mut b2, 2, 2);
    b2.make_leader(1, vec![1, 2], vec![2, 1], 3).unwrap();
    let retry = b2.append(sent, 4).unwrap();
    assert!(
        retry.duplicate,
        "the producer timed out on broker 1 and retried"
    );
    assert_eq!((retry.base_offset, retry.last_offset), (0, 2));
}

#[test]
fn truncation_at_or_above_the_log_end_changes_nothing_and_below_the_log_start_starts_over() {
    let mut f = follower_of(2, 1, 0);
    f.append_as_follower(stamped(2, 0, 0), 1).unwrap();
    f.append_as_follower(stamped(2, 2, 0), 1).unwrap();
    f.update_high_watermark_as_follower(4).unwrap();
    let before = f.snapshot();
    for offset in [4, 9] {
        let t = f.truncate_to(offset).unwrap();
        assert!(!t.truncated());
        assert_eq!(f.snapshot(), before);
    }
    // Inside a batch: the batch goes whole, and the HW follows the LEO down.
    let t = f.truncate_to(3).unwrap();
    assert_eq!((t.new_log_end_offset, t.records_dropped), (2, 2));
    assert_eq!(f.high_watermark(), 2);
    assert!(t.change.after.high_watermark < t.change.before.high_watermark);
    assert_eq!(f.snapshot().size_bytes, before.size_bytes - t.bytes_dropped);

    // The leader's log start is above our log end: start over there.
    let t = f.truncate_fully_and_start_at(50).unwrap();
    assert_eq!(
        (
            t.old_log_end_offset,
            t.new_log_end_offset,
            t.batches_dropped
        ),
        (2, 50, 1)
    );
    assert_eq!(
        (
            f.log_start_offset(),
            f.log_end_offset(),
            f.high_watermark(),
            f.size_bytes()
        ),
        (50, 50, 50, 0)
    );
    assert_eq!((f.latest_epoch(), f.producer_count()), (None, 0));
    f.append_as_follower(stamped(1, 50, 0), 2).unwrap();
    assert_eq!(epochs(&f), vec![(0, 50)]);
    assert_eq!(f.end_offset_for_leader_epoch(0), (0, 51));
    f.truncate_to(10).unwrap(); // below the log start: starts over at 10
    assert_eq!((f.log_start_offset(), f.log_end_offset()), (10, 10));
}

#[test]
fn a_follower_takes_the_leaders_log_start_whole_batches_at_a_time_and_refetches_a_straddling_batch()
{
    let mut f = follower_of(2, 1, 0);
    let first = stamped(2, 0, 0);
    let second = stamped(4, 2, 0); // offsets 2-5
    f.append_as_follower(concat(&[first.to_vec(), second.to_vec()]), 1)
        .unwrap();
    // Not past the HW.
    assert_eq!(f.maybe_increment_log_start_offset(4).unwrap(), 0);
    assert_eq!(f.log_start_offset(), 0);
    f.update_high_watermark_as_follower(6).unwrap();
    // Into the middle of the second batch: the first goes, the second stays.
    assert_eq!(f.maybe_increment_log_start_offset(4).unwrap(), first.len());
    assert_eq!((f.log_start_offset(), f.batch_count()), (4, 1));
    assert_eq!(epochs(&f), vec![(0, 4)]);
    assert_eq!(
        f.maybe_increment_log_start_offset(1).unwrap(),
        0,
        "never back"
    );

    // A follower whose log is empty at a log start inside the leader's batch gets the
    // whole batch, starting below its LEO, and takes it.
    let mut g = follower_of(3, 1, 0);
    g.truncate_fully_and_start_at(4).unwrap();
    let info = g.append_as_follower(second.clone(), 2).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (2, 5));
    assert_eq!((g.log_start_offset(), g.log_end_offset()), (4, 6));
    assert_eq!(epochs(&g), vec![(0, 4)]);
    // But once it holds a batch, an overlap is an overlap.
    assert!(matches!(
        g.append_as_follower(second, 3),
        Err(FollowerAppendError::UnexpectedOffset {
            expected: 6,
            got: 2
        })
    ));
}

#[test]
fn switching_leader_to_follower_to_leader_keeps_the_high_watermark_monotonic() {
    let mut p = Partition::new("t", 0, 1, vec![1, 2, 3], config(), 0);
    let mut hws = Vec::new();
    p.append(BatchBuilder::new(4).bytes(), 1).unwrap();
    p.update_follower_fetch(2, 4, 2).unwrap();
    p.update_follower_fetch(3, 3, 2).unwrap();
    hws.push(p.high_watermark()); // 3

    let change = p.make_follower(2, 1, 3).unwrap();
    assert_eq!(p.role(), Role::Follower { leader_id: 2 });
    assert_eq!((p.leader_id(), p.leader_epoch(), p.local_id()), (2, 1, 1));
    assert_eq!(change.after, change.before, "the HW is kept");
    assert_eq!(change.new_isr, Some(vec![]));
    assert!(p.followers().is_empty());
    hws.push(p.high_watermark());
    // The new leader's HW may lag ours: ours does not go back.
    p.update_high_watermark_as_follower(1).unwrap();
    hws.push(p.high_watermark());
    p.append_as_follower(stamped(2, 4, 1), 4).unwrap();
    p.update_high_watermark_as_follower(5).unwrap();
    hws.push(p.high_watermark()); // 5

    let change = p.make_leader(2, vec![2, 3, 1], vec![1, 3], 5).unwrap();
    assert_eq!(p.role(), Role::Leader);
    assert_eq!(p.replicas(), &[1, 2, 3], "this broker first");
    assert_eq!(change.new_isr, Some(vec![1, 3]));
    assert_eq!(change.after.high_watermark, 5);
    let f3 = p.follower(3).unwrap();
    assert_eq!(
        (f3.log_end_offset, f3.in_isr, f3.last_caught_up_time_ms),
        (UNKNOWN_OFFSET, true, 5)
    );
    assert!(!p.follower(2).unwrap().in_isr);
    hws.push(p.high_watermark());
    // Follower 3 is in the ISR but has not fetched: its unknown LEO holds the HW.
    p.append(BatchBuilder::new(1).bytes(), 6).unwrap();
    hws.push(p.high_watermark());
    assert_eq!(p.high_watermark(), 5);
    let update = p.update_follower_fetch(3, 4, 7).unwrap();
    assert_eq!(update.follower_log_end_offset_before, UNKNOWN_OFFSET);
    hws.push(p.high_watermark());
    assert_eq!(
        p.high_watermark(),
        5,
        "a follower behind the HW does not pull it back"
    );
    p.update_follower_fetch(3, 7, 8).unwrap();
    hws.push(p.high_watermark());
    assert_eq!(p.high_watermark(), 7);
    // Follower 2 rejoins once it reaches the HW.
    let update = p.update_follower_fetch(2, 7, 9).unwrap();
    assert_eq!(update.change.new_isr, Some(vec![1, 2, 3]));
    hws.push(p.high_watermark());

    assert!(
        hws.windows(2).all(|w| w[0] <= w[1]),
        "HW went back: {hws:?}"
    );
    let snapshot = p.snapshot();
    assert_eq!(
        (snapshot.role, snapshot.leader_epoch, snapshot.leader),
        (Role::Leader, 2, 1)
    );
    assert_eq!(
        snapshot.epoch_cache,
        vec![
            EpochEntry {
                epoch: 0,
                start_offset: 0
            },
            EpochEntry {
                epoch: 1,
                start_offset: 4
            },
            EpochEntry {
                epoch: 2,
                start_offset: 6
            }
        ]
    );
    assert_eq!(snapshot.role_since_ms, 5);
}

#[test]
fn the_same_epoch_again_on_a_leader_updates_the_isr_and_keeps_what_it_knows_of_followers() {
    let mut p = Partition::new("t", 0, 1, vec![1, 2, 3], config(), 0);
    p.append(BatchBuilder::new(2).bytes(), 1).unwrap();
    p.update_follower_fetch(2, 2, 2).unwrap();
    let change = p.make_leader(0, vec![1, 2, 3, 4], vec![1, 2], 3).unwrap();
    assert_eq!(change.new_isr, Some(vec![1, 2]));
    assert_eq!(p.follower(2).unwrap().log_end_offset, 2);
    assert_eq!(p.follower(4).unwrap().log_end_offset, UNKNOWN_OFFSET);
    assert_eq!(p.role_since_ms(), 0, "still the same leadership");
    assert_eq!(p.high_watermark(), 2, "the ISR {{1, 2}} has offsets 0-1");
}

#[test]
fn leader_only_calls_on_a_follower_are_refused_and_change_nothing() {
    let mut f = follower_of(2, 1, 4);
    f.append_as_follower(stamped(2, 0, 3), 1).unwrap();
    let before = f.snapshot();
    assert_eq!(
        (before.role, before.leader, before.isr.len()),
        (Role::Follower { leader_id: 1 }, 1, 0)
    );

    let not_leader = RoleError::NotLeader {
        leader_id: 1,
        leader_epoch: 4,
    };
    assert_eq!(f.ensure_leader(), Err(not_leader.clone()));
    assert_eq!(not_leader.kafka_error_code(), 6);
    for acks in [-1, 1] {
        let err = f
            .append_as_leader(BatchBuilder::new(1).bytes(), acks, 2)
            .unwrap_err();
        assert_eq!(err, AppendError::NotLeaderOrFollower(not_leader.clone()));
        assert_eq!(err.kafka_error_code(), 6);
    }
    assert!(f.append(BatchBuilder::new(1).bytes(), 2).is_err());
    let err = f.update_follower_fetch(3, 0, 2).unwrap_err();
    assert_eq!(err, FollowerError::NotLeader(not_leader));
    assert_eq!(err.kafka_error_code(), 6);
    let shrink = f.maybe_shrink_isr(10_000_000);
    assert!(shrink.removed.is_empty() && shrink.change.new_isr.is_none());
    assert_eq!(f.snapshot(), before);
}

#[test]
fn follower_only_calls_on_the_leader_and_stale_epochs_are_refused() {
    let mut p = Partition::new("t", 0, 1, vec![1, 2], config(), 0);
    p.make_leader(3, vec![1, 2], vec![1, 2], 1).unwrap();
    p.append(BatchBuilder::new(2).bytes(), 1).unwrap();
    let before = p.snapshot();
    let not_follower = RoleError::NotFollower { leader_epoch: 3 };
    assert_eq!(
        p.append_as_follower(stamped(1, 2, 3), 2).unwrap_err(),
        FollowerAppendError::Role(not_follower.clone())
    );
    assert_eq!(p.truncate_to(0).unwrap_err(), not_follower);
    assert_eq!(p.truncate_fully_and_start_at(9).unwrap_err(), not_follower);
    assert_eq!(
        p.update_high_watermark_as_follower(2).unwrap_err(),
        not_follower
    );
    assert_eq!(
        p.maybe_increment_log_start_offset(1).unwrap_err(),
        not_follower
    );
    assert_eq!(p.ensure_follower(), Err(not_follower));

    let stale = RoleError::StaleLeaderEpoch {
        current: 3,
        requested: 2,
    };
    assert_eq!(p.make_leader(2, vec![1, 2], vec![1], 3), Err(stale.clone()));
    assert_eq!(p.make_follower(2, 2, 3), Err(stale.clone()));
    assert_eq!(stale.kafka_error_code(), 74);
    assert_eq!(p.snapshot(), before);
}

#[test]
fn the_leader_detects_a_diverging_epoch_for_matching_lower_and_higher_epochs() {
    // Leader at epoch 3: epoch 0 holds 0-4, epoch 2 holds 5-7, epoch 3 nothing yet.
    let mut p = Partition::new("t", 0, 1, vec![1], config(), 0);
    p.append(BatchBuilder::new(5).bytes(), 1).unwrap();
    p.make_leader(2, vec![1], vec![1], 1).unwrap();
    p.append(BatchBuilder::new(3).bytes(), 1).unwrap();
    p.make_leader(3, vec![1], vec![1], 1).unwrap();
    assert_eq!(epochs(&p), vec![(0, 0), (2, 5)]);

    // Matching: the follower's last epoch ends here at or after its fetch offset.
    for (epoch, offset) in [(3, 8), (2, 8), (2, 6), (0, 5), (0, 2)] {
        assert_eq!(
            p.diverging_epoch(epoch, offset),
            Ok(None),
            "{epoch} at {offset}"
        );
    }
    // No epoch named: not checked.
    assert_eq!(p.diverging_epoch(-1, 8), Ok(None));
    // Same epoch, but the follower holds more of it than the leader.
    assert_eq!(p.diverging_epoch(0, 7), Ok(Some((0, 5))));
    assert_eq!(p.diverging_epoch(2, 9), Ok(Some((2, 8))));
    // A lower epoch the leader never held (the follower led epoch 1 alone): the answer
    // is the leader's older epoch, even if its offsets would fit.
    assert_eq!(p.diverging_epoch(1, 5), Ok(Some((0, 5))));
    assert_eq!(p.diverging_epoch(1, 3), Ok(Some((0, 5))));
    // A higher epoch than any the leader knows: out of range, as Kafka answers.
    let err = p.diverging_epoch(4, 8).unwrap_err();
    assert_eq!(err.kafka_error_code(), 1);
}

#[test]
fn the_follower_truncates_to_the_lower_end_of_the_epoch_the_leader_named() {
    // Follower: epoch 0 holds 0-5, epoch 2 holds 6-9 (LEO 10), HW 4.
    let mut f = follower_of(2, 1, 4);
    f.append_as_follower(stamped(6, 0, 0), 1).unwrap();
    f.append_as_follower(stamped(4, 6, 2), 1).unwrap();
    f.update_high_watermark_as_follower(4).unwrap();
    let target = |epoch, end| f.follower_truncation_target(epoch, end);
    let done = |offset| TruncationTarget {
        offset,
        complete: true,
    };

    // The leader holds epoch 2 up to 8: both logs agree up to 8.
    assert_eq!(target(2, 8), done(8));
    // The leader holds epoch 2 further than we do: our own end, 10.
    assert_eq!(target(2, 12), done(10));
    // The leader's epoch 0 ends at 3 here it ends at 6: 3.
    assert_eq!(target(0, 3), done(3));
    // Epoch 1, which we never held: truncate to the end of our epoch 0, and ask again.
    assert_eq!(
        target(1, 7),
        TruncationTarget {
            offset: 6,
            complete: false
        }
    );
    // A leader that knows no end offset: our HW. One that names no epoch: its offset.
    assert_eq!(target(-1, -1), done(4));
    assert_eq!(target(-1, 7), done(7));
    assert_eq!(target(-1, 70), done(10), "never above our LEO");
    // An empty log knows no epoch: the leader's end offset, within our LEO.
    assert_eq!(
        follower_of(3, 1, 4).follower_truncation_target(2, 5),
        done(0)
    );
}

#[test]
fn the_epoch_cache_only_grows_with_newer_epochs_and_shrinks_from_either_end() {
    let mut cache = LeaderEpochCache::new();
    assert_eq!(
        cache.end_offset_for(0, 10),
        (-1, -1),
        "an empty cache knows nothing"
    );
    assert!(cache.assign(1, 0));
    assert!(!cache.assign(1, 4), "the same epoch again");
    assert!(!cache.assign(0, 5), "an older epoch");
    assert!(!cache.assign(-1, 6), "no epoch");
    assert!(cache.assign(3, 5));
    assert!(cache.assign(4, 9));
    assert_eq!(cache.end_offset_for(2, 12), (1, 5));
    assert_eq!(cache.end_offset_for(0, 12), (0, 0));

    assert_eq!(cache.truncate_from_end(9), 1);
    assert_eq!(cache.latest_epoch(), Some(3));
    cache.truncate_from_start(-3);
    assert_eq!(
        cache.entries()[0].start_offset,
        0,
        "below the first entry: no change"
    );
    cache.truncate_from_start(7);
    assert_eq!(
        cache.entries(),
        &[EpochEntry {
            epoch: 3,
            start_offset: 7
        }]
    );
    // An entry that holds no records (its start is the log end) makes way for a newer
    // epoch at the same offset.
    assert!(cache.assign(6, 7));
    assert_eq!(cache.entries().len(), 1);
    cache.clear();
    assert!(cache.is_empty());
}

#[test]
fn the_snapshot_shows_the_role_and_reads_back_json_written_before_roles_existed() {
    let f = follower_of(2, 1, 7);
    let json = serde_json::to_value(f.snapshot()).unwrap();
    assert_eq!(
        json["role"],
        serde_json::json!({"kind": "follower", "leader_id": 1})
    );
    assert_eq!(json["leader"], 1);
    assert_eq!(json["leader_epoch"], 7);
    let back: crate::PartitionSnapshot = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(back, f.snapshot());

    let mut old = json;
    for field in ["role", "role_since_ms", "epoch_cache"] {
        old.as_object_mut().unwrap().remove(field);
    }
    let back: crate::PartitionSnapshot = serde_json::from_value(old).unwrap();
    assert_eq!((back.role, back.epoch_cache.len()), (Role::Leader, 0));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Two brokers trade leadership at random while the leader appends and the follower
    /// fetches now and then. However late each switch comes, once the follower has
    /// caught up both logs are byte for byte the same, with the same epochs, and they
    /// still begin with everything that was ever committed.
    #[test]
    fn random_leader_changes_never_lose_committed_records_and_always_converge(
        ops in proptest::collection::vec((0u8..3, 1usize..4), 1..60),
    ) {
        let mut brokers = [
            Partition::new("t", 0, 1, vec![1, 2], config(), 0),
            follower_of(2, 1, 0),
        ];
        let (mut leader, mut epoch, mut now) = (0usize, 0i32, 0u64);
        let mut committed = Bytes::new();
        for (op, n) in ops {
            now += 1;
            let follower = 1 - leader;
            let follower_id = follower as i32 + 1;
            let [a, b] = &mut brokers;
            let (l, f) = if leader == 0 { (a, b) } else { (b, a) };
            match op {
                0 => { l.append(BatchBuilder::new(n).bytes(), now).unwrap(); }
                1 => { fetch(l, f, follower_id, now); }
                _ => {
                    epoch += 1;
                    let new_leader_id = follower_id;
                    f.make_leader(epoch, vec![1, 2], vec![1, 2], now).unwrap();
                    l.make_follower(new_leader_id, epoch, now).unwrap();
                    leader = follower;
                }
            }
            let l = &brokers[leader];
            let visible = l.read(0, usize::MAX, ReadBound::HighWatermark).unwrap().records;
            if visible.len() > committed.len() {
                prop_assert!(visible.starts_with(&committed));
                committed = visible;
            }
            for p in &brokers {
                prop_assert!(p.log_start_offset() <= p.high_watermark());
                prop_assert!(p.high_watermark() <= p.log_end_offset());
                prop_assert_eq!(p.bytes_available(p.log_start_offset(), ReadBound::LogEnd), p.size_bytes());
                let cache = epochs(p);
                prop_assert!(cache.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
            }
            prop_assert!(log_bytes(&brokers[leader]).starts_with(&committed));
        }
        let follower = 1 - leader;
        let [a, b] = &mut brokers;
        let (l, f) = if leader == 0 { (a, b) } else { (b, a) };
        catch_up(l, f, follower as i32 + 1, now + 1);
        prop_assert_eq!(log_bytes(l), log_bytes(f));
        prop_assert_eq!(epochs(l), epochs(f));
        prop_assert!(log_bytes(l).starts_with(&committed));
    }
}
