//! Writing record batches, for the two places where the broker is its own client: the
//! group coordinator's appends to `__consumer_offsets` and the live view's test produce.
//!
//! A v2 record batch as a plain (non-idempotent, non-transactional) producer writes it:
//! producer id and epoch -1, base sequence -1, offsets counted from 0 (the leader assigns
//! the real ones on append), creation timestamps, no compression. kafka-protocol's
//! encoder does the bytes. The group coordinator also writes a transaction's offsets
//! ([`encode_transactional`]): the same batch, with the transactional bit and the
//! transaction's producer id and epoch, so that the transaction's marker decides it.

use anyhow::Context;
use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// A record's timestamp, as a producer would stamp it (CreateTime, wall clock).
pub fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// One v2 record batch holding `records` (key, value; a `None` value is a tombstone), all
/// timestamped `timestamp_ms`.
pub fn encode(
    records: impl IntoIterator<Item = (Option<Bytes>, Option<Bytes>)>,
    timestamp_ms: i64,
) -> anyhow::Result<Bytes> {
    encode_as(records, timestamp_ms, None)
}

/// One transactional v2 batch of `records` for the transaction of (`producer_id`,
/// `producer_epoch`). Its base sequence is -1: the broker writes it, and no sequence of
/// the producer's own is checked against it (Kafka skips that check for the coordinator).
pub fn encode_transactional(
    records: impl IntoIterator<Item = (Option<Bytes>, Option<Bytes>)>,
    timestamp_ms: i64,
    producer_id: i64,
    producer_epoch: i16,
) -> anyhow::Result<Bytes> {
    encode_as(records, timestamp_ms, Some((producer_id, producer_epoch)))
}

fn encode_as(
    records: impl IntoIterator<Item = (Option<Bytes>, Option<Bytes>)>,
    timestamp_ms: i64,
    transaction: Option<(i64, i16)>,
) -> anyhow::Result<Bytes> {
    let (producer_id, producer_epoch) = transaction.unwrap_or((-1, -1));
    let records: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(i, (key, value))| Record {
            transactional: transaction.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // kafka-protocol starts a new batch whenever `offset - sequence` changes; a
            // constant difference keeps every record in one batch, whose base sequence
            // comes out as -1 (no sequence), as a non-idempotent batch has.
            sequence: i as i32 - 1,
            timestamp: timestamp_ms,
            key,
            value,
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).context("encoding a record batch")?;
    Ok(buf.freeze())
}
