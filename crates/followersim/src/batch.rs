//! Record batches as a follower sees them: header parsing and integrity checks.
//!
//! # The Kafka concept
//!
//! Kafka never re-encodes data on its way to a follower. A producer sends *record batches*
//! (message format v2, "magic 2"); the leader stores them byte for byte (it only stamps the
//! base offset and the partition leader epoch into the header) and a follower's Fetch
//! response carries those very bytes. So the follower's job is mostly to check it received
//! whole, undamaged batches that start exactly where its own log ends, and to append them.
//!
//! The v2 batch header (all integers big-endian):
//!
//! ```text
//! offset  size  field
//!      0     8  baseOffset            first offset in the batch
//!      8     4  batchLength           bytes that follow this field (batch size = 12 + batchLength)
//!     12     4  partitionLeaderEpoch  set by the leader on append
//!     16     1  magic                 2 for the current format
//!     17     4  crc                   CRC-32C of every byte from `attributes` (offset 21) to the end
//!     21     2  attributes            compression, timestamp type, transactional, control
//!     23     4  lastOffsetDelta       last offset in the batch = baseOffset + lastOffsetDelta
//!     27     8  baseTimestamp
//!     35     8  maxTimestamp
//!     43     8  producerId
//!     51     2  producerEpoch
//!     53     4  baseSequence
//!     57     4  recordCount
//!     61        records...
//! ```
//!
//! Because the CRC starts at `attributes`, the two fields the leader rewrites (base offset and
//! leader epoch) are outside it, which is what lets the leader stamp them without recomputing
//! the checksum.
//!
//! A Fetch response may end with a *partial* batch: the leader cuts the response at
//! `max_bytes` (KIP-74), even in the middle of a batch. That is not corruption; the follower
//! drops the tail and fetches it again next time, from its new log end offset.

use bytes::Bytes;
use std::fmt;

/// Size of the v2 record batch header, up to and including `recordCount`.
pub const BATCH_HEADER_LEN: usize = 61;

/// Size of the prefix that every message format shares: `baseOffset` (8) + `batchLength` (4).
/// The total size of a batch is this plus `batchLength`.
pub const LOG_OVERHEAD: usize = 12;

/// Byte position where the CRC-32C coverage starts (the `attributes` field).
pub const CRC_START: usize = 21;

/// The only message format this simulator accepts (Kafka's current one).
pub const MAGIC_V2: i8 = 2;

/// The fixed header fields of one v2 record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record in the batch.
    pub base_offset: i64,
    /// Length of the batch after the `batchLength` field itself.
    pub batch_length: i32,
    /// Epoch of the leader that appended the batch.
    pub partition_leader_epoch: i32,
    /// Message format version (2).
    pub magic: i8,
    /// CRC-32C the producer computed over bytes `21..end`.
    pub crc: u32,
    /// Compression codec, timestamp type, transactional and control flags.
    pub attributes: i16,
    /// `last offset - base offset`.
    pub last_offset_delta: i32,
    /// Largest record timestamp in the batch (milliseconds since the Unix epoch).
    pub max_timestamp: i64,
    /// Number of records the batch says it holds.
    pub record_count: i32,
}

impl BatchHeader {
    /// Total size of the batch in bytes (`12 + batchLength`).
    pub fn size(&self) -> usize {
        LOG_OVERHEAD + self.batch_length.max(0) as usize
    }

    /// Offset of the last record in the batch.
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    /// The offset right after this batch: where the next batch must start.
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }
}

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
        }
    }
}

impl std::error::Error for BatchError {}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    i32::from_be_bytes(a)
}

fn be_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

/// Reads the fixed header of the batch at the start of `buf`.
///
/// Returns `None` if `buf` is shorter than a header (the caller decides whether that means
/// "partial batch" or "corrupt"). Does not check the CRC; see [`verify_batch`].
pub fn parse_header(buf: &[u8]) -> Option<BatchHeader> {
    if buf.len() < BATCH_HEADER_LEN {
        return None;
    }
    Some(BatchHeader {
        base_offset: be_i64(buf, 0),
        batch_length: be_i32(buf, 8),
        partition_leader_epoch: be_i32(buf, 12),
        magic: buf[16] as i8,
        crc: be_u32(buf, 17),
        attributes: be_i16(buf, 21),
        last_offset_delta: be_i32(buf, 23),
        max_timestamp: be_i64(buf, 35),
        record_count: be_i32(buf, 57),
    })
}

/// Checks one complete batch: magic 2, a sane length and offset delta, and a valid CRC-32C.
///
/// `batch` must be exactly the batch's bytes (`header.size()` long).
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
    let computed = crc32c::crc32c(&batch[CRC_START..]);
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
    let mut pos = 0usize;
    while pos < records.len() {
        let rest = &records[pos..];
        if rest.len() < LOG_OVERHEAD {
            // Not even the size prefix: a partial batch.
            out.partial_tail_bytes = rest.len();
            break;
        }
        let base_offset = be_i64(rest, 0);
        let batch_length = be_i32(rest, 8);
        if batch_length < (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32 {
            return Err(BatchError::BadLength {
                base_offset,
                batch_length,
            });
        }
        let size = LOG_OVERHEAD + batch_length as usize;
        if rest.len() < size {
            out.partial_tail_bytes = rest.len();
            break;
        }
        let batch = &rest[..size];
        // `size >= BATCH_HEADER_LEN` was checked above, so the header parses.
        let Some(header) = parse_header(batch) else {
            return Err(BatchError::BadLength {
                base_offset,
                batch_length,
            });
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
        out.batch_bytes += size;
        out.batches.push(records.slice(pos..pos + size));
        pos += size;
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod testing {
    //! Hand-built record batches for tests.
    use super::*;

    /// Builds a valid v2 batch with `records` records starting at `base_offset`.
    /// The record bodies are opaque filler: the follower never looks inside records.
    pub fn batch(base_offset: i64, records: i32) -> Vec<u8> {
        let body = vec![0xabu8; 10 * records as usize];
        let batch_length = (BATCH_HEADER_LEN - LOG_OVERHEAD + body.len()) as i32;
        let mut b = Vec::with_capacity(LOG_OVERHEAD + batch_length as usize);
        b.extend_from_slice(&base_offset.to_be_bytes());
        b.extend_from_slice(&batch_length.to_be_bytes());
        b.extend_from_slice(&0i32.to_be_bytes()); // partition leader epoch
        b.push(MAGIC_V2 as u8);
        b.extend_from_slice(&0u32.to_be_bytes()); // crc, filled in below
        b.extend_from_slice(&0i16.to_be_bytes()); // attributes
        b.extend_from_slice(&(records - 1).to_be_bytes()); // last offset delta
        b.extend_from_slice(&1_000i64.to_be_bytes()); // base timestamp
        b.extend_from_slice(&1_000i64.to_be_bytes()); // max timestamp
        b.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
        b.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
        b.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
        b.extend_from_slice(&records.to_be_bytes());
        b.extend_from_slice(&body);
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
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
        let h = parse_header(&b).expect("header");
        assert_eq!(h.base_offset, 42);
        assert_eq!(h.magic, 2);
        assert_eq!(h.last_offset_delta, 2);
        assert_eq!(h.record_count, 3);
        assert_eq!(h.size(), b.len());
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
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
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
