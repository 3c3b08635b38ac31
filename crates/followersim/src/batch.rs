//! Record batches as a follower sees them: integrity and contiguity checks.
//!
//! # The Kafka concept
//!
//! Kafka never re-encodes data on its way to a follower. A producer sends *record batches*
//! (message format v2, "magic 2"); the leader stores them byte for byte (it only stamps the
//! base offset and the partition leader epoch into the header) and a follower's Fetch
//! response carries those very bytes. So the follower's job is mostly to check it received
//! whole, undamaged batches that start exactly where its own log ends, and to append them.
//!
//! The v2 batch header layout, its field offsets and the header parser are shared with the
//! leader's log: see [`replog::batch`], whose [`BatchHeader`] this module uses. The two
//! points that matter most here: a batch is `LOG_OVERHEAD + batchLength` bytes long
//! ([`LOG_OVERHEAD`](replog::batch::LOG_OVERHEAD) = 12, `baseOffset` plus `batchLength`), and its CRC-32C covers every
//! byte from `attributes` (offset 21) to the end. Because the CRC starts there, the two
//! fields the leader rewrites (base offset and leader epoch) are outside it, which is what
//! lets the leader stamp them without recomputing the checksum.
//!
//! A Fetch response may end with a *partial* batch: the leader cuts the response at
//! `max_bytes` (KIP-74), even in the middle of a batch. That is not corruption; the follower
//! drops the tail and fetches it again next time, from its new log end offset.

use bytes::Bytes;
use replog::batch::{compute_crc, BatchFraming, BatchHeader, RawBatch, RecordBatches, MAGIC_V2};
use std::fmt;

/// Why a run of record batches was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchError {
    /// A batch did not start where the log (or the previous batch) ends.
    Gap {
        /// Offset the follower expected the batch to start at.
        expected: i64,
        /// Base offset the batch actually carries.
        found: i64,
    },
    /// `batchLength` is too small to hold a v2 header.
    BadLength {
        /// Base offset of the offending batch.
        base_offset: i64,
        /// The length field as read.
        batch_length: i32,
    },
    /// The batch is not message format v2.
    BadMagic {
        /// Base offset of the offending batch.
        base_offset: i64,
        /// The magic byte as read.
        magic: i8,
    },
    /// The CRC-32C over the batch body does not match the header.
    CrcMismatch {
        /// Base offset of the offending batch.
        base_offset: i64,
        /// CRC stored in the header.
        stored: u32,
        /// CRC computed over the received bytes.
        computed: u32,
    },
    /// `lastOffsetDelta` is negative, or the offsets overflow.
    BadOffsetDelta {
        /// Base offset of the offending batch.
        base_offset: i64,
        /// The delta as read.
        last_offset_delta: i32,
    },
    /// The log the batches go to refused them (a broker's log, which checks more: the
    /// leader epochs, and whether the partition is still followed there).
    Refused {
        /// Why, in the log's words.
        reason: String,
    },
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BatchError::Gap { expected, found } => write!(
                f,
                "offsets are not contiguous: expected a batch starting at offset {expected}, got one starting at {found}"
            ),
            BatchError::BadLength {
                base_offset,
                batch_length,
            } => write!(
                f,
                "batch at offset {base_offset} has batchLength {batch_length}, too small for a v2 header"
            ),
            BatchError::BadMagic { base_offset, magic } => write!(
                f,
                "batch at offset {base_offset} has magic {magic}, only message format v2 is supported"
            ),
            BatchError::CrcMismatch {
                base_offset,
                stored,
                computed,
            } => write!(
                f,
                "batch at offset {base_offset} is corrupt: stored CRC-32C {stored:#010x}, computed {computed:#010x}"
            ),
            BatchError::BadOffsetDelta {
                base_offset,
                last_offset_delta,
            } => write!(
                f,
                "batch at offset {base_offset} has an invalid lastOffsetDelta {last_offset_delta}"
            ),
            BatchError::Refused { reason } => write!(f, "the log refused the batches: {reason}"),
        }
    }
}

impl std::error::Error for BatchError {}

/// Checks one complete batch: magic 2, a sane offset delta, and a valid CRC-32C.
///
/// `batch` must be exactly the batch's bytes (`header.size_in_bytes()` long). Unlike the
/// leader's [`replog::batch::validate_batch`], this does not judge what a client may
/// write (control batches, producer ids): a follower copies whatever the leader stored.
pub fn verify_batch(header: &BatchHeader, batch: &[u8]) -> Result<(), BatchError> {
    let base_offset = header.base_offset;
    if header.magic != MAGIC_V2 {
        return Err(BatchError::BadMagic {
            base_offset,
            magic: header.magic,
        });
    }
    if header.last_offset_delta < 0
        || base_offset < 0
        || base_offset
            .checked_add(i64::from(header.last_offset_delta) + 1)
            .is_none()
    {
        return Err(BatchError::BadOffsetDelta {
            base_offset,
            last_offset_delta: header.last_offset_delta,
        });
    }
    let computed = compute_crc(batch).unwrap_or(0);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            base_offset,
            stored: header.crc,
            computed,
        });
    }
    Ok(())
}

/// The result of checking the `records` of one partition in a Fetch response.
#[derive(Debug, Clone, Default)]
pub struct CheckedBatches {
    /// The log end offset the batches were checked against.
    pub expected_offset: i64,
    /// The complete, verified batches, in order (each a zero-copy slice of the response).
    pub batches: Vec<Bytes>,
    /// Base offset of the first batch (meaningful only if `batches` is non-empty).
    pub first_offset: i64,
    /// Offset right after the last batch: the follower's log end offset once appended.
    pub next_offset: i64,
    /// Bytes of complete batches.
    pub batch_bytes: usize,
    /// Bytes at the end that did not form a whole batch (dropped, fetched again later).
    pub partial_tail_bytes: usize,
}

/// Splits and verifies the record batches of one partition in a Fetch response.
///
/// `expected_offset` is where the follower's log ends; the first batch must start there,
/// and every batch must start where the previous one ended. The one exception: when
/// `allow_straddle` is set (the log is empty, just reset to a log start offset the leader
/// reported) the first batch may start *before* `expected_offset` as long as it contains it,
/// because a log start offset can fall inside a batch and the leader then returns the whole
/// batch.
///
/// The check is all-or-nothing, as in Kafka: one bad batch rejects the whole response for
/// that partition, and the follower refetches from its unchanged log end offset.
/// A trailing partial batch is not an error (KIP-74); it is reported in
/// [`CheckedBatches::partial_tail_bytes`] and left out.
pub fn check_batches(
    records: &Bytes,
    expected_offset: i64,
    allow_straddle: bool,
) -> Result<CheckedBatches, BatchError> {
    let mut out = CheckedBatches {
        expected_offset,
        first_offset: expected_offset,
        next_offset: expected_offset,
        ..CheckedBatches::default()
    };
    for found in RecordBatches::new(records) {
        let RawBatch {
            start,
            bytes: batch,
            header,
        } = match found {
            Ok(batch) => batch,
            // The leader cut the response inside a batch (KIP-74): fetched again next time.
            Err(BatchFraming::Truncated { remaining, .. }) => {
                out.partial_tail_bytes = remaining;
                break;
            }
            Err(BatchFraming::BadLength {
                base_offset,
                batch_length,
                ..
            }) => {
                return Err(BatchError::BadLength {
                    base_offset,
                    batch_length,
                })
            }
        };
        verify_batch(&header, batch)?;
        let straddles = out.batches.is_empty()
            && allow_straddle
            && header.base_offset < out.next_offset
            && header.last_offset() >= out.next_offset;
        if header.base_offset != out.next_offset && !straddles {
            return Err(BatchError::Gap {
                expected: out.next_offset,
                found: header.base_offset,
            });
        }
        if out.batches.is_empty() {
            out.first_offset = header.base_offset;
        }
        out.next_offset = header.next_offset();
        out.batch_bytes += batch.len();
        out.batches.push(records.slice(start..start + batch.len()));
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod testing {
    //! Hand-built record batches for tests.
    use super::*;
    use replog::batch::field;
    use replog::test_util::BatchBuilder;

    /// A valid v2 batch with `records` records starting at `base_offset`, as a leader
    /// stores it (the workspace's one test batch builder, `replog::test_util`).
    pub fn batch(base_offset: i64, records: i32) -> Vec<u8> {
        BatchBuilder::new(records as usize)
            .base_offset(base_offset, 0)
            .build()
    }

    /// Recomputes and stores the CRC-32C of a hand-edited batch.
    pub fn set_crc(b: &mut [u8]) {
        let crc = compute_crc(b).expect("a whole header");
        b[field::CRC..field::CRC + 4].copy_from_slice(&crc.to_be_bytes());
    }

    /// Concatenates batches into one `records` field.
    pub fn concat(batches: &[Vec<u8>]) -> Bytes {
        Bytes::from(batches.concat())
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    #[test]
    fn parses_a_hand_built_header() {
        let b = batch(42, 3);
        let h = BatchHeader::parse(&b).expect("header");
        assert_eq!(h.base_offset, 42);
        assert_eq!(h.magic, 2);
        assert_eq!(h.last_offset_delta, 2);
        assert_eq!(h.record_count, 3);
        assert_eq!(h.size_in_bytes(), Some(b.len()));
        assert_eq!(h.last_offset(), 44);
        assert_eq!(h.next_offset(), 45);
        assert!(verify_batch(&h, &b).is_ok());
    }

    #[test]
    fn accepts_contiguous_batches() {
        let records = concat(&[batch(0, 2), batch(2, 5), batch(7, 1)]);
        let c = check_batches(&records, 0, false).expect("valid");
        assert_eq!(c.batches.len(), 3);
        assert_eq!(c.first_offset, 0);
        assert_eq!(c.next_offset, 8);
        assert_eq!(c.batch_bytes, records.len());
        assert_eq!(c.partial_tail_bytes, 0);
    }

    #[test]
    fn empty_records_are_fine() {
        let c = check_batches(&Bytes::new(), 10, false).expect("valid");
        assert!(c.batches.is_empty());
        assert_eq!(c.next_offset, 10);
    }

    #[test]
    fn first_batch_must_start_at_the_log_end() {
        let records = concat(&[batch(5, 2)]);
        assert_eq!(
            check_batches(&records, 3, false).unwrap_err(),
            BatchError::Gap {
                expected: 3,
                found: 5
            }
        );
        // Overlap (the leader resent data we have) is just as wrong.
        assert_eq!(
            check_batches(&records, 6, false).unwrap_err(),
            BatchError::Gap {
                expected: 6,
                found: 5
            }
        );
    }

    #[test]
    fn a_gap_between_batches_rejects_everything() {
        let records = concat(&[batch(0, 2), batch(3, 1)]);
        assert_eq!(
            check_batches(&records, 0, false).unwrap_err(),
            BatchError::Gap {
                expected: 2,
                found: 3
            }
        );
    }

    #[test]
    fn non_increasing_base_offsets_are_rejected() {
        let records = concat(&[batch(0, 2), batch(0, 2)]);
        assert!(matches!(
            check_batches(&records, 0, false),
            Err(BatchError::Gap {
                expected: 2,
                found: 0
            })
        ));
    }

    #[test]
    fn trailing_partial_batch_is_dropped_not_an_error() {
        let second = batch(2, 3);
        for cut in [1, 11, 12, 30, second.len() - 1] {
            let mut bytes = batch(0, 2);
            let whole = bytes.len();
            bytes.extend_from_slice(&second[..cut]);
            let c = check_batches(&Bytes::from(bytes), 0, false).expect("valid prefix");
            assert_eq!(c.batches.len(), 1, "cut at {cut}");
            assert_eq!(c.next_offset, 2);
            assert_eq!(c.batch_bytes, whole);
            assert_eq!(c.partial_tail_bytes, cut);
        }
    }

    #[test]
    fn only_a_partial_batch_means_no_progress() {
        let b = batch(0, 4);
        let c = check_batches(&Bytes::copy_from_slice(&b[..40]), 0, false).expect("ok");
        assert!(c.batches.is_empty());
        assert_eq!(c.next_offset, 0);
        assert_eq!(c.partial_tail_bytes, 40);
    }

    #[test]
    fn crc_mismatch_is_detected() {
        let mut b = batch(0, 3);
        let last = b.len() - 1;
        b[last] ^= 0xff; // flip a record byte
        let err = check_batches(&Bytes::from(b), 0, false).unwrap_err();
        assert!(
            matches!(err, BatchError::CrcMismatch { base_offset: 0, .. }),
            "{err}"
        );
    }

    #[test]
    fn crc_does_not_cover_offset_or_leader_epoch() {
        // The leader rewrites these two fields on append, without recomputing the CRC.
        let mut b = batch(0, 3);
        b[0..8].copy_from_slice(&100i64.to_be_bytes());
        b[12..16].copy_from_slice(&7i32.to_be_bytes());
        let c = check_batches(&Bytes::from(b), 100, false).expect("still valid");
        assert_eq!(c.next_offset, 103);
    }

    #[test]
    fn wrong_magic_is_rejected() {
        let mut b = batch(0, 1);
        b[16] = 1;
        assert!(matches!(
            check_batches(&Bytes::from(b), 0, false),
            Err(BatchError::BadMagic { magic: 1, .. })
        ));
    }

    #[test]
    fn absurd_lengths_are_rejected_not_trusted() {
        let mut b = batch(0, 1);
        b[8..12].copy_from_slice(&(-5i32).to_be_bytes());
        assert!(matches!(
            check_batches(&Bytes::from(b), 0, false),
            Err(BatchError::BadLength { .. })
        ));
        // A huge length is only a partial batch: nothing is allocated from it.
        let mut b = batch(0, 1);
        b[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
        let c = check_batches(&Bytes::from(b), 0, false).expect("partial");
        assert!(c.batches.is_empty());
    }

    #[test]
    fn negative_offset_delta_is_rejected() {
        let mut b = batch(0, 1);
        b[23..27].copy_from_slice(&(-1i32).to_be_bytes());
        set_crc(&mut b);
        assert!(matches!(
            check_batches(&Bytes::from(b), 0, false),
            Err(BatchError::BadOffsetDelta { .. })
        ));
    }

    #[test]
    fn straddling_first_batch_is_allowed_only_after_a_reset() {
        let records = concat(&[batch(10, 5), batch(15, 1)]);
        let c = check_batches(&records, 12, true).expect("straddle allowed");
        assert_eq!(c.first_offset, 10);
        assert_eq!(c.next_offset, 16);
        assert!(check_batches(&records, 12, false).is_err());
        // It must still contain the expected offset.
        assert!(check_batches(&records, 20, true).is_err());
    }
}
