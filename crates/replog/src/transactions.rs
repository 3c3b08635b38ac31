//! # Transactions on a partition: the last stable offset and the aborted transactions
//!
//! A transactional producer writes its batches at once, with the `transactional` bit set
//! in their attributes, and ends the transaction later: its coordinator writes a
//! **transaction marker** into every partition the transaction touched, a *control batch*
//! of one record saying COMMIT or ABORT. Until the marker is there, nobody knows which it
//! will be, so a `read_committed` consumer must not read past the first record of a
//! transaction still open. That offset, bounded by the high watermark, is the partition's
//! **last stable offset (LSO)**:
//!
//! ```text
//!   offset:   0    1    2    3    4    5    6    7
//!             a1   b1   a2   n    b2   B✓   a3   .
//!             ^         (a: producer A, open since 0; b: producer B, committed at 5;
//!             |          n: not transactional)
//!   LSO = 0, the first offset of the oldest open transaction (A's), whatever the HW.
//! ```
//!
//! A transaction ends when its marker is appended, but it stops holding the LSO back only
//! once the marker is below the high watermark: a marker on the leader alone could still
//! be lost with it. So the index keeps ended transactions until the HW passes their
//! marker.
//!
//! An aborted transaction's records stay in the log. A `read_committed` consumer drops
//! them itself, from the list of aborted transactions each Fetch answer carries: for every
//! producer, the first offset of each aborted transaction the fetched range overlaps. The
//! index keeps that list (Kafka's `.txnindex`), each entry up to its marker's offset, and
//! forgets entries once retention has removed their marker.
//!
//! Everything here is derived from the log's batches, so truncation rebuilds it from the
//! batches that remain ([`TxnIndex::rebuilt_from`]), as Kafka rebuilds its producer state
//! from the log on recovery.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::batch::{
    BatchHeader, ATTR_CONTROL, ATTR_TRANSACTIONAL, MAGIC_V2, NO_SEQUENCE, RECORD_BATCH_HEADER_LEN,
};

/// What a transaction marker says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ControlType {
    /// The transaction's records are dropped by `read_committed` readers (key type 0).
    Abort,
    /// The transaction's records count (key type 1).
    Commit,
}

impl ControlType {
    fn key_type(self) -> i16 {
        match self {
            ControlType::Abort => 0,
            ControlType::Commit => 1,
        }
    }
}

/// One aborted transaction of one producer, as Fetch lists it: its records lie in
/// `first_offset..last_offset`, and `last_offset` is its ABORT marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AbortedTxn {
    /// The producer that aborted.
    pub producer_id: i64,
    /// The offset of its first batch in the transaction (the marker's, if it wrote none here).
    pub first_offset: i64,
    /// The offset of the ABORT marker.
    pub last_offset: i64,
}

/// An open transaction on this partition, for the live view and the state API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenTxn {
    /// The producer writing it.
    pub producer_id: i64,
    /// Its epoch, from its batches.
    pub producer_epoch: i16,
    /// The offset of its first batch here: the LSO cannot pass it.
    pub first_offset: i64,
}

/// A transaction whose marker is appended but not yet below the high watermark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ended {
    first_offset: i64,
    marker_offset: i64,
}

/// The transactions of one partition: the open ones, the ended ones whose marker the high
/// watermark has not passed, and the aborted ones still in the log.
#[derive(Debug, Default, Clone)]
pub struct TxnIndex {
    /// Open transactions by producer id.
    open: HashMap<i64, OpenTxn>,
    /// The same, by first offset: the oldest is the first entry.
    open_by_offset: BTreeMap<i64, i64>,
    /// Ended transactions, in marker order, until the HW passes their marker.
    unreplicated: VecDeque<Ended>,
    /// Aborted transactions, in marker order.
    aborted: VecDeque<AbortedTxn>,
}

impl TxnIndex {
    /// Takes note of a batch appended at `base_offset`: a transactional data batch opens
    /// its producer's transaction if none is open; a marker ends it.
    pub fn on_append(
        &mut self,
        header: &BatchHeader,
        base_offset: i64,
        marker: Option<ControlType>,
    ) {
        if !header.is_transactional() {
            return;
        }
        match marker {
            Some(control) => self.end(header.producer_id, base_offset, control),
            None if header.is_control() => {}
            None => self.begin(header.producer_id, header.producer_epoch, base_offset),
        }
    }

    fn begin(&mut self, producer_id: i64, producer_epoch: i16, first_offset: i64) {
        if let Some(open) = self.open.get_mut(&producer_id) {
            open.producer_epoch = open.producer_epoch.max(producer_epoch);
            return;
        }
        self.open.insert(
            producer_id,
            OpenTxn {
                producer_id,
                producer_epoch,
                first_offset,
            },
        );
        self.open_by_offset.insert(first_offset, producer_id);
    }

    fn end(&mut self, producer_id: i64, marker_offset: i64, control: ControlType) {
        let first_offset = match self.open.remove(&producer_id) {
            Some(open) => {
                self.open_by_offset.remove(&open.first_offset);
                open.first_offset
            }
            // A marker for a transaction that wrote nothing here: it covers only itself.
            None => marker_offset,
        };
        debug_assert!(self
            .unreplicated
            .back()
            .is_none_or(|e| e.marker_offset < marker_offset));
        self.unreplicated.push_back(Ended {
            first_offset,
            marker_offset,
        });
        if control == ControlType::Abort {
            self.aborted.push_back(AbortedTxn {
                producer_id,
                first_offset,
                last_offset: marker_offset,
            });
        }
    }

    /// Forgets the ended transactions whose marker is below `high_watermark`: they no
    /// longer hold the LSO back.
    pub fn on_high_watermark(&mut self, high_watermark: i64) {
        while self
            .unreplicated
            .front()
            .is_some_and(|e| e.marker_offset < high_watermark)
        {
            self.unreplicated.pop_front();
        }
    }

    /// Forgets the aborted transactions whose marker is below `log_start_offset`: no
    /// fetch can reach them.
    pub fn on_log_start(&mut self, log_start_offset: i64) {
        while self
            .aborted
            .front()
            .is_some_and(|a| a.last_offset < log_start_offset)
        {
            self.aborted.pop_front();
        }
    }

    /// The last stable offset given `high_watermark`: the first offset of the oldest
    /// transaction that is open or whose marker the HW has not passed, if that is lower.
    pub fn last_stable_offset(&self, high_watermark: i64) -> i64 {
        let oldest_open = self.open_by_offset.keys().next().copied();
        let oldest_unreplicated = self
            .unreplicated
            .iter()
            .filter(|e| e.marker_offset >= high_watermark)
            .map(|e| e.first_offset)
            .min();
        [oldest_open, oldest_unreplicated]
            .into_iter()
            .flatten()
            .fold(high_watermark, i64::min)
    }

    /// The aborted transactions a read of `fetch_offset..upper_bound` overlaps, oldest
    /// marker first: what a `read_committed` Fetch answer lists.
    pub fn aborted_in(&self, fetch_offset: i64, upper_bound: i64) -> Vec<AbortedTxn> {
        self.aborted
            .iter()
            .filter(|a| a.last_offset >= fetch_offset && a.first_offset < upper_bound)
            .copied()
            .collect()
    }

    /// The open transactions, oldest first.
    pub fn open(&self) -> Vec<OpenTxn> {
        self.open_by_offset
            .values()
            .filter_map(|pid| self.open.get(pid).copied())
            .collect()
    }

    /// Number of aborted transactions remembered.
    pub fn aborted_count(&self) -> usize {
        self.aborted.len()
    }

    /// The index a log's batches imply, replayed in offset order, given its high
    /// watermark and log start offset.
    pub fn rebuilt_from<'a>(
        batches: impl IntoIterator<Item = (&'a BatchHeader, Option<ControlType>)>,
        high_watermark: i64,
        log_start_offset: i64,
    ) -> TxnIndex {
        let mut index = TxnIndex::default();
        for (header, marker) in batches {
            index.on_append(header, header.base_offset, marker);
        }
        index.on_high_watermark(high_watermark);
        index.on_log_start(log_start_offset);
        index
    }
}

/// The marker a control batch holds, from its first record's key (version, type); `None`
/// for any other batch, or a key this broker does not know.
pub fn control_type(batch: &[u8], header: &BatchHeader) -> Option<ControlType> {
    if !header.is_control() || header.compression_codec() != 0 {
        return None;
    }
    let mut pos = RECORD_BATCH_HEADER_LEN;
    let _length = read_varint(batch, &mut pos)?;
    pos += 1; // record attributes
    let _timestamp_delta = read_varint(batch, &mut pos)?;
    let _offset_delta = read_varint(batch, &mut pos)?;
    let key_length = read_varint(batch, &mut pos)?;
    if key_length < 4 {
        return None;
    }
    let key = batch.get(pos..pos + 4)?;
    match i16::from_be_bytes([key[2], key[3]]) {
        0 => Some(ControlType::Abort),
        1 => Some(ControlType::Commit),
        _ => None,
    }
}

/// A control batch of one marker record, as a transaction coordinator writes it (Kafka's
/// `EndTransactionMarker`): base offset 0 and leader epoch -1, which the append sets.
pub fn encode_marker(
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    control: ControlType,
    timestamp_ms: i64,
) -> Vec<u8> {
    let mut record = Vec::with_capacity(24);
    record.push(0); // record attributes
    put_varint(&mut record, 0); // timestamp delta
    put_varint(&mut record, 0); // offset delta
    put_varint(&mut record, 4); // key: version, type
    record.extend_from_slice(&0i16.to_be_bytes());
    record.extend_from_slice(&control.key_type().to_be_bytes());
    put_varint(&mut record, 6); // value: version, coordinator epoch
    record.extend_from_slice(&0i16.to_be_bytes());
    record.extend_from_slice(&coordinator_epoch.to_be_bytes());
    put_varint(&mut record, 0); // no headers

    let mut batch = Vec::with_capacity(RECORD_BATCH_HEADER_LEN + record.len() + 2);
    batch.extend_from_slice(&0i64.to_be_bytes()); // base offset
    batch.extend_from_slice(&0i32.to_be_bytes()); // batch length, below
    batch.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    batch.push(MAGIC_V2 as u8);
    batch.extend_from_slice(&0u32.to_be_bytes()); // crc, below
    batch.extend_from_slice(&(ATTR_TRANSACTIONAL | ATTR_CONTROL).to_be_bytes());
    batch.extend_from_slice(&0i32.to_be_bytes()); // last offset delta
    batch.extend_from_slice(&timestamp_ms.to_be_bytes()); // base timestamp
    batch.extend_from_slice(&timestamp_ms.to_be_bytes()); // max timestamp
    batch.extend_from_slice(&producer_id.to_be_bytes());
    batch.extend_from_slice(&producer_epoch.to_be_bytes());
    batch.extend_from_slice(&NO_SEQUENCE.to_be_bytes());
    batch.extend_from_slice(&1i32.to_be_bytes()); // one record
    put_varint(&mut batch, record.len() as i64);
    batch.extend_from_slice(&record);
    let length = (batch.len() - 12) as i32;
    batch[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// A zig-zag varint, as records encode their lengths and deltas.
fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_varint(buf: &[u8], pos: &mut usize) -> Option<i64> {
    let mut raw: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*pos)?;
        *pos += 1;
        raw |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    None
}
