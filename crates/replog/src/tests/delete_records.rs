//! DeleteRecords on the leader: where the log start may move, and the low watermark that
//! says every replica has followed.

use super::{both_fetch, three_replicas};
use crate::test_util::BatchBuilder;
use crate::{DeleteRecordsError, Partition, ReadBound, ReadError, DELETE_UP_TO_HIGH_WATERMARK};

/// Three batches of two records (offsets 0-5), all replicated: HW 6.
fn replicated_log() -> (Partition, usize) {
    let mut p = three_replicas();
    let mut size = 0;
    for _ in 0..3 {
        size = p.append(BatchBuilder::new(2).bytes(), 1).unwrap().bytes;
    }
    both_fetch(&mut p, 6, 2);
    assert_eq!(p.high_watermark(), 6);
    (p, size)
}

#[test]
fn deleting_moves_the_log_start_and_frees_whole_batches_below_it() {
    let (mut p, size) = replicated_log();
    // Offset 3 falls inside the batch 2-3: it stays, the one before goes.
    let deleted = p.delete_records_on_leader(3).unwrap();
    assert_eq!((deleted.log_start_offset, deleted.bytes_freed), (3, size));
    assert_eq!((p.log_start_offset(), p.batch_count()), (3, 2));
    assert!(matches!(
        p.read(2, 1 << 20, ReadBound::HighWatermark),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
    // The read from the new start returns the batch it falls in, whole.
    assert_eq!(
        p.read(3, 1 << 20, ReadBound::HighWatermark)
            .unwrap()
            .records
            .len(),
        2 * size
    );
    // Never back: a lower offset deletes nothing and answers the current start.
    let again = p.delete_records_on_leader(1).unwrap();
    assert_eq!((again.log_start_offset, again.bytes_freed), (3, 0));
}

#[test]
fn minus_one_deletes_up_to_the_high_watermark_and_no_further() {
    let (mut p, _) = replicated_log();
    p.append(BatchBuilder::new(1).bytes(), 3).unwrap(); // offset 6, above the HW
    assert_eq!(
        p.delete_records_on_leader(7),
        Err(DeleteRecordsError::OffsetOutOfRange {
            offset: 7,
            high_watermark: 6
        })
    );
    assert!(p.delete_records_on_leader(-2).is_err());
    let deleted = p
        .delete_records_on_leader(DELETE_UP_TO_HIGH_WATERMARK)
        .unwrap();
    assert_eq!(deleted.log_start_offset, 6);
    assert_eq!((p.batch_count(), p.log_end_offset()), (1, 7));
}

#[test]
fn the_low_watermark_waits_for_every_follower_that_counts() {
    let (mut p, _) = replicated_log();
    p.delete_records_on_leader(4).unwrap();
    // No follower has reported a log start yet.
    assert_eq!(p.low_watermark(|_| true), -1);
    assert_eq!(p.update_follower_log_start_offset(2, 4), Ok(true));
    assert_eq!(p.update_follower_log_start_offset(2, 4), Ok(false));
    assert_eq!(p.low_watermark(|_| true), -1);
    // A follower that does not count (its broker is down) does not hold it.
    assert_eq!(p.low_watermark(|id| id != 3), 4);
    assert_eq!(p.update_follower_log_start_offset(3, 2), Ok(true));
    assert_eq!(p.low_watermark(|_| true), 2);
    p.update_follower_log_start_offset(3, 4).unwrap();
    assert_eq!(p.low_watermark(|_| true), 4);
    // A fetch version without the field (-1), or an unknown replica, changes nothing.
    assert_eq!(p.update_follower_log_start_offset(3, -1), Ok(false));
    assert_eq!(p.update_follower_log_start_offset(9, 0), Ok(false));
    assert_eq!(p.low_watermark(|_| true), 4);
}

#[test]
fn a_follower_refuses_delete_records() {
    let mut p = Partition::new("t", 0, 2, vec![1, 2, 3], Default::default(), 0);
    p.make_follower(1, 1, 0).unwrap();
    assert!(matches!(
        p.delete_records_on_leader(0),
        Err(DeleteRecordsError::Role(_))
    ));
}
