//! # Record batches (message format v2)
//!
//! Kafka never stores single messages. A producer groups records for one partition
//! into a **record batch** and the broker stores that batch *as received*: it does
//! not decompress it, re-encode it, or look at the individual records. What the broker
//! does read is the batch **header**, a fixed 61-byte prefix (big-endian):
//!
//! ```text
//! offset  size  field
//!      0     8  baseOffset            set by the broker (the producer sends 0)
//!      8     4  batchLength           bytes after this field, so a batch is 12 + batchLength long
//!     12     4  partitionLeaderEpoch  set by the broker (the producer sends -1)
//!     16     1  magic                 2 for this format
//!     17     4  crc                   CRC-32C of bytes 21..end (attributes onwards)
//!     21     2  attributes            bits 0-2 compression, 3 timestamp type,
//!                                     4 transactional, 5 control
//!     23     4  lastOffsetDelta       offset of the last record relative to baseOffset
//!     27     8  baseTimestamp
//!     35     8  maxTimestamp
//!     43     8  producerId            -1 when the producer is not idempotent
//!     51     2  producerEpoch
//!     53     4  baseSequence          sequence number of the first record, -1 if none
//!     57     4  recordCount
//!     61     …  records (possibly compressed)
//! ```
//!
//! The CRC deliberately starts at byte 21: the two fields the broker rewrites on
//! append, `baseOffset` and `partitionLeaderEpoch`, lie before it, so assigning
//! offsets never invalidates the checksum the producer computed.
//!
//! This module parses and validates that header. It never panics, whatever the bytes.

use crate::error::AppendError;

/// Length of the fixed v2 batch header, in bytes.
pub const RECORD_BATCH_HEADER_LEN: usize = 61;
/// Bytes before `batchLength` counts: `baseOffset` (8) plus `batchLength` itself (4).
/// Kafka calls this `LOG_OVERHEAD`; a batch's total size is `LOG_OVERHEAD + batchLength`.
pub const LOG_OVERHEAD: usize = 12;
/// The only message format ("magic") this log accepts.
pub const MAGIC_V2: i8 = 2;
/// `producerId` value meaning "no producer id" (a non-idempotent producer).
pub const NO_PRODUCER_ID: i64 = -1;
/// `baseSequence` value meaning "no sequence number".
pub const NO_SEQUENCE: i32 = -1;

/// Byte positions of the header fields, named after Kafka's `DefaultRecordBatch`.
pub mod field {
    /// `baseOffset`, i64.
    pub const BASE_OFFSET: usize = 0;
    /// `batchLength`, i32.
    pub const BATCH_LENGTH: usize = 8;
    /// `partitionLeaderEpoch`, i32.
    pub const PARTITION_LEADER_EPOCH: usize = 12;
    /// `magic`, i8.
    pub const MAGIC: usize = 16;
    /// `crc`, u32.
    pub const CRC: usize = 17;
    /// `attributes`, i16. The CRC covers everything from here to the end of the batch.
    pub const ATTRIBUTES: usize = 21;
    /// `lastOffsetDelta`, i32.
    pub const LAST_OFFSET_DELTA: usize = 23;
    /// `baseTimestamp`, i64.
    pub const BASE_TIMESTAMP: usize = 27;
    /// `maxTimestamp`, i64.
    pub const MAX_TIMESTAMP: usize = 35;
    /// `producerId`, i64.
    pub const PRODUCER_ID: usize = 43;
    /// `producerEpoch`, i16.
    pub const PRODUCER_EPOCH: usize = 51;
    /// `baseSequence`, i32.
    pub const BASE_SEQUENCE: usize = 53;
    /// `recordCount`, i32.
    pub const RECORD_COUNT: usize = 57;
}

/// `attributes` bit: timestamps are the broker's append time, not the producer's.
pub const ATTR_LOG_APPEND_TIME: i16 = 0x08;
/// `attributes` bit: the batch belongs to a transaction.
pub const ATTR_TRANSACTIONAL: i16 = 0x10;
/// `attributes` bit: the batch holds a control record (transaction marker), written
/// only by the broker itself, never by clients.
pub const ATTR_CONTROL: i16 = 0x20;
/// `attributes` mask of the compression codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
pub const ATTR_COMPRESSION_MASK: i16 = 0x07;

/// The decoded fixed header of one v2 record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record (as found in the bytes; the broker overwrites it).
    pub base_offset: i64,
    /// Length of the batch after the `batchLength` field.
    pub batch_length: i32,
    /// Leader epoch stamped by the broker that appended the batch.
    pub partition_leader_epoch: i32,
    /// Message format version; 2 here.
    pub magic: i8,
    /// CRC-32C as stored in the batch.
    pub crc: u32,
    /// Compression, timestamp type, transactional and control bits.
    pub attributes: i16,
    /// Offset of the last record minus `base_offset`.
    pub last_offset_delta: i32,
    /// Timestamp of the first record.
    pub base_timestamp: i64,
    /// Largest timestamp of any record in the batch.
    pub max_timestamp: i64,
    /// Idempotent producer id, or -1.
    pub producer_id: i64,
    /// Epoch of the producer id.
    pub producer_epoch: i16,
    /// Sequence number of the first record, or -1.
    pub base_sequence: i32,
    /// Number of records the batch claims to hold.
    pub record_count: i32,
}

fn read_i8(buf: &[u8], at: usize) -> Option<i8> {
    buf.get(at).map(|b| *b as i8)
}

fn read_array<const N: usize>(buf: &[u8], at: usize) -> Option<[u8; N]> {
    let end = at.checked_add(N)?;
    buf.get(at..end)?.try_into().ok()
}

fn read_i16(buf: &[u8], at: usize) -> Option<i16> {
    read_array(buf, at).map(i16::from_be_bytes)
}

fn read_i32(buf: &[u8], at: usize) -> Option<i32> {
    read_array(buf, at).map(i32::from_be_bytes)
}

fn read_u32(buf: &[u8], at: usize) -> Option<u32> {
    read_array(buf, at).map(u32::from_be_bytes)
}

fn read_i64(buf: &[u8], at: usize) -> Option<i64> {
    read_array(buf, at).map(i64::from_be_bytes)
}

/// Adds `delta` to a producer sequence number the way Kafka does: sequences are
/// non-negative i32 values that wrap from `i32::MAX` back to 0.
pub fn increment_sequence(sequence: i32, delta: i32) -> i32 {
    let sum = i64::from(sequence) + i64::from(delta);
    // i32::MAX + 1 values (0..=i32::MAX) form the cycle.
    let cycle = i64::from(i32::MAX) + 1;
    // rem_euclid keeps the result in 0..cycle, so the cast is lossless.
    sum.rem_euclid(cycle) as i32
}

impl BatchHeader {
    /// Decodes the 61-byte header at the start of `buf`. Returns `None` if `buf` is
    /// shorter than a header. Nothing is validated here; see [`validate_batch`].
    pub fn parse(buf: &[u8]) -> Option<BatchHeader> {
        if buf.len() < RECORD_BATCH_HEADER_LEN {
            return None;
        }
        Some(BatchHeader {
            base_offset: read_i64(buf, field::BASE_OFFSET)?,
            batch_length: read_i32(buf, field::BATCH_LENGTH)?,
            partition_leader_epoch: read_i32(buf, field::PARTITION_LEADER_EPOCH)?,
            magic: read_i8(buf, field::MAGIC)?,
            crc: read_u32(buf, field::CRC)?,
            attributes: read_i16(buf, field::ATTRIBUTES)?,
            last_offset_delta: read_i32(buf, field::LAST_OFFSET_DELTA)?,
            base_timestamp: read_i64(buf, field::BASE_TIMESTAMP)?,
            max_timestamp: read_i64(buf, field::MAX_TIMESTAMP)?,
            producer_id: read_i64(buf, field::PRODUCER_ID)?,
            producer_epoch: read_i16(buf, field::PRODUCER_EPOCH)?,
            base_sequence: read_i32(buf, field::BASE_SEQUENCE)?,
            record_count: read_i32(buf, field::RECORD_COUNT)?,
        })
    }

    /// Total size of the batch in bytes (`12 + batchLength`), or `None` if the
    /// length field is negative.
    pub fn size_in_bytes(&self) -> Option<usize> {
        usize::try_from(self.batch_length)
            .ok()?
            .checked_add(LOG_OVERHEAD)
    }

    /// Offset of the last record, `base_offset + last_offset_delta`.
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
    }

    /// The offset right after this batch, `last_offset() + 1` (saturating): where the
    /// next batch in the log must start, and the offset a follower or consumer fetches
    /// from once it has this batch.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }

    /// Whether the transactional attribute bit is set.
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }

    /// Whether the control attribute bit is set (transaction markers).
    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }

    /// Compression codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    pub fn compression_codec(&self) -> i16 {
        self.attributes & ATTR_COMPRESSION_MASK
    }

    /// Kafka's `hasProducerId`: any id above -1 identifies an idempotent producer.
    pub fn has_producer_id(&self) -> bool {
        self.producer_id > NO_PRODUCER_ID
    }

    /// An idempotent batch carries a producer id and a sequence number; the log
    /// de-duplicates such batches (see [`crate::producer_state`]).
    pub fn is_idempotent(&self) -> bool {
        self.has_producer_id() && self.base_sequence >= 0
    }

    /// Sequence number of the last record, wrapping at `i32::MAX` like Kafka.
    pub fn last_sequence(&self) -> i32 {
        increment_sequence(self.base_sequence, self.last_offset_delta)
    }
}

/// Reads `baseOffset` and `batchLength` from the start of `buf`: the [`LOG_OVERHEAD`]
/// bytes every message format begins with. Returns `None` if `buf` is shorter than
/// that. Enough to tell where a batch ends (`LOG_OVERHEAD + batchLength`) before the
/// rest of its header has arrived, e.g. to recognise a partial batch at the end of a
/// fetch response. Nothing is validated; `batchLength` may be negative.
pub fn read_log_prefix(buf: &[u8]) -> Option<(i64, i32)> {
    Some((
        read_i64(buf, field::BASE_OFFSET)?,
        read_i32(buf, field::BATCH_LENGTH)?,
    ))
}

/// CRC-32C of a complete batch as Kafka defines it: over the bytes from
/// `attributes` to the end. Returns `None` if `batch` is shorter than the header.
pub fn compute_crc(batch: &[u8]) -> Option<u32> {
    batch.get(field::ATTRIBUTES..).map(crc32c::crc32c)
}

fn invalid(reason: String) -> AppendError {
    AppendError::InvalidRecord { reason }
}

/// Validates one complete batch (`batch` must be exactly the batch's bytes) the way
/// Kafka's `LogValidator` does for batches coming from a client, and returns its header.
///
/// Checks, in order: magic 2, a full header, the size limit (`max_batch_bytes`,
/// Kafka's `message.max.bytes`), the CRC, then the header's consistency:
/// `recordCount > 0`, `lastOffsetDelta >= 0` and `lastOffsetDelta + 1 == recordCount`,
/// no control batch (only brokers write those), a producer id present when the batch
/// is transactional, and a non-negative `baseSequence` when a producer id is present.
///
/// Individual records inside the batch are not inspected: they may be compressed, and
/// the broker stores them as received.
pub fn validate_batch(batch: &[u8], max_batch_bytes: usize) -> Result<BatchHeader, AppendError> {
    let header = validate_replicated_batch(batch, max_batch_bytes)?;
    if header.is_control() {
        return Err(invalid(
            "clients are not allowed to write control records".to_string(),
        ));
    }
    if header.is_transactional() && !header.has_producer_id() {
        return Err(invalid(
            "transactional batch without a producer id".to_string(),
        ));
    }
    if header.has_producer_id() && header.base_sequence < 0 {
        return Err(invalid(format!(
            "invalid sequence number {} for producer id {}",
            header.base_sequence, header.producer_id
        )));
    }
    Ok(header)
}

/// Validates one complete batch that a leader already accepted, as a follower does
/// before appending it: magic 2, a full header, the size limit, the CRC and the
/// offset/count consistency of [`validate_batch`], but none of its rules about what a
/// *client* may write (control batches, producer ids, sequences), since the leader
/// applied those and may itself write what clients may not.
pub fn validate_replicated_batch(
    batch: &[u8],
    max_batch_bytes: usize,
) -> Result<BatchHeader, AppendError> {
    let magic = read_i8(batch, field::MAGIC)
        .ok_or_else(|| invalid(format!("batch of {} bytes has no magic byte", batch.len())))?;
    if magic != MAGIC_V2 {
        return Err(invalid(format!(
            "message format (magic) {magic} is not supported, only v2"
        )));
    }
    let header = BatchHeader::parse(batch).ok_or_else(|| {
        invalid(format!(
            "batch of {} bytes is shorter than the {RECORD_BATCH_HEADER_LEN}-byte v2 header",
            batch.len()
        ))
    })?;
    if batch.len() > max_batch_bytes {
        return Err(AppendError::MessageTooLarge {
            size: batch.len(),
            max: max_batch_bytes,
        });
    }
    let computed = compute_crc(batch).unwrap_or(0);
    if computed != header.crc {
        return Err(AppendError::CorruptMessage {
            stored_crc: header.crc,
            computed_crc: computed,
        });
    }
    if header.record_count <= 0 {
        return Err(invalid(format!(
            "invalid record count {}",
            header.record_count
        )));
    }
    if header.last_offset_delta < 0 {
        return Err(invalid(format!(
            "invalid lastOffsetDelta {}",
            header.last_offset_delta
        )));
    }
    if i64::from(header.last_offset_delta) + 1 != i64::from(header.record_count) {
        return Err(invalid(format!(
            "inconsistent lastOffsetDelta {} and record count {}",
            header.last_offset_delta, header.record_count
        )));
    }
    Ok(header)
}

/// One batch found by [`RecordBatches`]: where it starts in the blob, its bytes (exactly
/// `LOG_OVERHEAD + batchLength` of them) and its parsed, not yet validated, header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawBatch<'a> {
    /// Byte position of the batch in the blob.
    pub start: usize,
    /// The batch's bytes.
    pub bytes: &'a [u8],
    /// The header, as read (not validated: see [`validate_batch`]).
    pub header: BatchHeader,
}

/// Why [`RecordBatches`] stopped before the end of a blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchFraming {
    /// The bytes left at `start` are not a whole batch: too few for the header, or fewer
    /// than the batch declares. A fetch response may end like this (the leader cuts it at
    /// `max_bytes`, KIP-74); a produce request may not.
    Truncated {
        /// Where the incomplete batch starts.
        start: usize,
        /// How many bytes are left from there.
        remaining: usize,
    },
    /// The declared `batchLength` cannot hold a v2 header (or is negative): whatever
    /// follows is not a record batch, so nothing after it can be trusted either.
    BadLength {
        /// Where the bad batch starts.
        start: usize,
        /// Its `baseOffset` field.
        base_offset: i64,
        /// Its `batchLength` field.
        batch_length: i32,
    },
}

impl std::fmt::Display for BatchFraming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BatchFraming::Truncated { start, remaining } => write!(
                f,
                "{remaining} bytes at position {start} do not hold a whole record batch"
            ),
            BatchFraming::BadLength {
                start,
                batch_length,
                ..
            } => write!(
                f,
                "batch at position {start} declares a batchLength of {batch_length}, too small for a v2 header"
            ),
        }
    }
}

/// Walks a `records` blob batch by batch, reading each batch's length prefix and header:
/// the one way every part of this workspace splits record batches (the leader's append,
/// the read path, the follower simulator's checks).
///
/// Yields `Ok(RawBatch)` for each whole batch, then at most one `Err(BatchFraming)` if the
/// blob does not end on a batch boundary, and then nothing. It never panics and never
/// reads past the blob, whatever the bytes; it does not check CRCs or header consistency
/// ([`validate_batch`] does that for client data).
#[derive(Debug, Clone)]
pub struct RecordBatches<'a> {
    records: &'a [u8],
    pos: usize,
    stopped: bool,
}

impl<'a> RecordBatches<'a> {
    /// Batches of `records`, from its start.
    pub fn new(records: &'a [u8]) -> Self {
        RecordBatches {
            records,
            pos: 0,
            stopped: false,
        }
    }
}

impl<'a> Iterator for RecordBatches<'a> {
    type Item = Result<RawBatch<'a>, BatchFraming>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.stopped || self.pos >= self.records.len() {
            return None;
        }
        let start = self.pos;
        let rest = &self.records[start..];
        let truncated = BatchFraming::Truncated {
            start,
            remaining: rest.len(),
        };
        let stop = |this: &mut Self, why| {
            this.stopped = true;
            Some(Err(why))
        };
        let Some((base_offset, batch_length)) = read_log_prefix(rest) else {
            return stop(self, truncated);
        };
        let len = usize::try_from(batch_length)
            .ok()
            .and_then(|l| l.checked_add(LOG_OVERHEAD))
            .filter(|len| *len >= RECORD_BATCH_HEADER_LEN);
        let Some(len) = len else {
            return stop(
                self,
                BatchFraming::BadLength {
                    start,
                    base_offset,
                    batch_length,
                },
            );
        };
        if len > rest.len() {
            return stop(self, truncated);
        }
        let bytes = &rest[..len];
        // `len >= RECORD_BATCH_HEADER_LEN`, so the header is there to parse.
        let header = BatchHeader::parse(bytes)?;
        self.pos += len;
        Some(Ok(RawBatch {
            start,
            bytes,
            header,
        }))
    }
}

/// One batch found in a records blob: where it is and what its header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSpan {
    /// Byte position of the batch in the blob.
    pub start: usize,
    /// Total length of the batch in bytes.
    pub len: usize,
    /// The validated header.
    pub header: BatchHeader,
}

/// Splits the `records` field of one produce partition into its batches and validates
/// each with [`validate_batch`]. Every byte must belong to a complete batch: an empty
/// blob, a truncated batch or trailing garbage is an [`AppendError::InvalidRecord`].
pub fn split_and_validate(
    records: &[u8],
    max_batch_bytes: usize,
) -> Result<Vec<BatchSpan>, AppendError> {
    split_with(records, max_batch_bytes, validate_batch)
}

/// [`split_and_validate`] for batches the broker wrote itself, each validated with
/// [`validate_replicated_batch`].
pub fn split_trusted(
    records: &[u8],
    max_batch_bytes: usize,
) -> Result<Vec<BatchSpan>, AppendError> {
    split_with(records, max_batch_bytes, validate_replicated_batch)
}

fn split_with(
    records: &[u8],
    max_batch_bytes: usize,
    validate: fn(&[u8], usize) -> Result<BatchHeader, AppendError>,
) -> Result<Vec<BatchSpan>, AppendError> {
    if records.is_empty() {
        return Err(invalid("no record batches".to_string()));
    }
    RecordBatches::new(records)
        .map(|batch| {
            let batch = batch.map_err(|framing| invalid(framing.to_string()))?;
            Ok(BatchSpan {
                start: batch.start,
                len: batch.bytes.len(),
                header: validate(batch.bytes, max_batch_bytes)?,
            })
        })
        .collect()
}

/// Iterates over the headers of the complete batches at the start of `records`,
/// stopping silently at the first incomplete or unreadable one, as a Kafka client
/// does with a fetch response. Useful to find the next fetch offset after a read:
/// [`BatchHeader::next_offset`] of the last header.
pub fn batch_headers(records: &[u8]) -> impl Iterator<Item = BatchHeader> + '_ {
    RecordBatches::new(records).map_while(|batch| batch.ok().map(|b| b.header))
}

/// Writes `base_offset` and `partition_leader_epoch` into a batch in place. Both
/// fields lie outside the CRC, so the checksum stays valid. Does nothing to a buffer
/// shorter than the header.
pub fn set_offset_and_epoch(batch: &mut [u8], base_offset: i64, partition_leader_epoch: i32) {
    if batch.len() < RECORD_BATCH_HEADER_LEN {
        return;
    }
    batch[field::BASE_OFFSET..field::BASE_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
    batch[field::PARTITION_LEADER_EPOCH..field::PARTITION_LEADER_EPOCH + 4]
        .copy_from_slice(&partition_leader_epoch.to_be_bytes());
}

/// Reads one zig-zag varint (at most 10 bytes) at `*pos`, advancing `*pos`.
fn read_varlong(buf: &[u8], pos: &mut usize) -> Option<i64> {
    let mut raw = 0u64;
    for shift in (0..70).step_by(7) {
        let byte = *buf.get(*pos)?;
        *pos += 1;
        raw |= u64::from(byte & 0x7f).checked_shl(shift)?;
        if byte & 0x80 == 0 {
            return Some(((raw >> 1) as i64) ^ -((raw & 1) as i64));
        }
    }
    None
}

/// The offset and timestamp of each record of an **uncompressed** batch with producer
/// (CreateTime) timestamps, in order. Each v2 record starts with its length, its
/// attributes, then `timestampDelta` and `offsetDelta` (zig-zag varints) relative to the
/// batch's base timestamp and base offset; only those are read. Returns `None` for a
/// compressed or LogAppendTime batch, or if the records do not parse (the broker stores
/// batches without inspecting records, so they are not trusted here either).
pub fn record_offsets_and_timestamps(batch: &[u8]) -> Option<Vec<(i64, i64)>> {
    let header = BatchHeader::parse(batch)?;
    if header.compression_codec() != 0 || header.attributes & ATTR_LOG_APPEND_TIME != 0 {
        return None;
    }
    let count = usize::try_from(header.record_count).ok()?;
    let end = header.size_in_bytes()?.min(batch.len());
    let mut out = Vec::with_capacity(count.min(end / 7));
    let mut pos = RECORD_BATCH_HEADER_LEN;
    for _ in 0..count {
        let length = usize::try_from(read_varlong(batch, &mut pos)?).ok()?;
        let record_end = pos.checked_add(length).filter(|e| *e <= end)?;
        pos += 1; // record attributes, unused
        let timestamp_delta = read_varlong(batch, &mut pos)?;
        let offset_delta = read_varlong(batch, &mut pos)?;
        if pos > record_end {
            return None;
        }
        out.push((
            header.base_offset.checked_add(offset_delta)?,
            header.base_timestamp.checked_add(timestamp_delta)?,
        ));
        pos = record_end;
    }
    Some(out)
}
