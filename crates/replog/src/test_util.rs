//! Record batches built by hand, for tests across the workspace (feature `test-util`).
//!
//! A minimal v2 record batch encoder: uncompressed records with a value, an optional
//! key and no headers, and a real CRC-32C. By default a batch looks the way a producer
//! sends it (base offset 0, partition leader epoch -1); [`BatchBuilder::base_offset`]
//! makes it look the way a leader stores it, for follower-side tests. Every test in the
//! workspace that needs a batch builds it here, so there is one encoder to trust.

use bytes::Bytes;

use crate::batch::{field, RECORD_BATCH_HEADER_LEN};

/// Builds one record batch.
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    values: Vec<Vec<u8>>,
    keys: Option<Vec<Vec<u8>>>,
    base_offset: i64,
    leader_epoch: i32,
    base_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    attributes: i16,
    /// Overrides `lastOffsetDelta + 1` and `recordCount` in the header (the records
    /// themselves are unchanged): lets a test claim huge batches cheaply.
    claimed_count: Option<i32>,
}

impl BatchBuilder {
    /// A non-idempotent batch of `count` records with values `v0`, `v1`, ...
    pub fn new(count: usize) -> Self {
        BatchBuilder {
            values: (0..count).map(|i| format!("v{i}").into_bytes()).collect(),
            keys: None,
            base_offset: 0,
            leader_epoch: -1,
            base_timestamp: 1_000,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            attributes: 0,
            claimed_count: None,
        }
    }

    /// A batch with one record whose value is `size` bytes long.
    pub fn with_value_size(size: usize) -> Self {
        let mut b = BatchBuilder::new(1);
        b.values = vec![vec![b'x'; size]];
        b
    }

    /// A non-idempotent batch with one record per value.
    pub fn with_values<V: AsRef<[u8]>>(values: &[V]) -> Self {
        let mut b = BatchBuilder::new(values.len());
        b.values = values.iter().map(|v| v.as_ref().to_vec()).collect();
        b
    }

    /// Gives record `i` the key `keys[i]` (records past the end of `keys` keep a null key).
    pub fn keys<K: AsRef<[u8]>>(mut self, keys: &[K]) -> Self {
        self.keys = Some(keys.iter().map(|k| k.as_ref().to_vec()).collect());
        self
    }

    /// Stamps a base offset and partition leader epoch, as a leader does on append.
    pub fn base_offset(mut self, base_offset: i64, leader_epoch: i32) -> Self {
        self.base_offset = base_offset;
        self.leader_epoch = leader_epoch;
        self
    }

    /// Sets the base timestamp (record `i` gets `timestamp + i`).
    pub fn timestamp(mut self, timestamp: i64) -> Self {
        self.base_timestamp = timestamp;
        self
    }

    /// Makes the batch idempotent.
    pub fn producer(mut self, producer_id: i64, epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Sets the attributes field.
    pub fn attributes(mut self, attributes: i16) -> Self {
        self.attributes = attributes;
        self
    }

    /// Claims `count` records in the header.
    pub fn claim_count(mut self, count: i32) -> Self {
        self.claimed_count = Some(count);
        self
    }

    /// Encodes the batch (by default base offset 0 and partition leader epoch -1, as a
    /// producer sends it).
    pub fn build(&self) -> Vec<u8> {
        let mut records = Vec::new();
        for (i, value) in self.values.iter().enumerate() {
            let mut body = Vec::new();
            body.push(0u8); // record attributes
            put_varlong(&mut body, i as i64); // timestampDelta
            put_varlong(&mut body, i as i64); // offsetDelta
            match self.keys.as_ref().and_then(|keys| keys.get(i)) {
                Some(key) => {
                    put_varlong(&mut body, key.len() as i64);
                    body.extend_from_slice(key);
                }
                None => put_varlong(&mut body, -1), // null key
            }
            put_varlong(&mut body, value.len() as i64);
            body.extend_from_slice(value);
            put_varlong(&mut body, 0); // header count
            put_varlong(&mut records, body.len() as i64);
            records.extend_from_slice(&body);
        }
        let count = self.claimed_count.unwrap_or(self.values.len() as i32);
        let last_delta = count - 1;
        let mut out = Vec::with_capacity(RECORD_BATCH_HEADER_LEN + records.len());
        out.extend_from_slice(&self.base_offset.to_be_bytes()); // baseOffset
        let batch_length = (RECORD_BATCH_HEADER_LEN - 12 + records.len()) as i32;
        out.extend_from_slice(&batch_length.to_be_bytes());
        out.extend_from_slice(&self.leader_epoch.to_be_bytes()); // partitionLeaderEpoch
        out.push(2); // magic
        out.extend_from_slice(&0u32.to_be_bytes()); // crc, filled below
        out.extend_from_slice(&self.attributes.to_be_bytes());
        out.extend_from_slice(&last_delta.to_be_bytes());
        out.extend_from_slice(&self.base_timestamp.to_be_bytes());
        let max_timestamp = self.base_timestamp + self.values.len().saturating_sub(1) as i64;
        out.extend_from_slice(&max_timestamp.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&count.to_be_bytes());
        out.extend_from_slice(&records);
        fix_crc(&mut out);
        out
    }

    /// Encodes the batch as `Bytes`.
    pub fn bytes(&self) -> Bytes {
        Bytes::from(self.build())
    }
}

/// Zig-zag varint, as the v2 record format uses for every integer in a record.
fn put_varlong(out: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Recomputes and stores the CRC of a complete batch (after a test edits it).
pub fn fix_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[field::ATTRIBUTES..]);
    batch[field::CRC..field::CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Whether a complete batch's stored CRC matches its bytes.
pub fn crc_is_valid(batch: &[u8]) -> bool {
    let stored = u32::from_be_bytes(batch[field::CRC..field::CRC + 4].try_into().unwrap());
    stored == crc32c::crc32c(&batch[field::ATTRIBUTES..])
}

/// Concatenates batches into one produce `records` blob.
pub fn concat(batches: &[Vec<u8>]) -> Bytes {
    Bytes::from(batches.concat())
}

/// Reads a big-endian i64 at `at`.
pub fn i64_at(buf: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(buf[at..at + 8].try_into().unwrap())
}

/// Reads a big-endian i32 at `at`.
pub fn i32_at(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(buf[at..at + 4].try_into().unwrap())
}
