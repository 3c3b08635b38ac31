//! `__transaction_state`: where the transaction coordinator writes each transactional id's
//! state, as Kafka's `TransactionStateManager` does. Every change the coordinator makes
//! (a new epoch, partitions added, PrepareCommit, CompleteCommit, ...) is one record, keyed
//! by the transactional id, in the id's partition: its Java `hashCode` modulo
//! `transaction.state.log.num.partitions`, as Kafka places it. The record is appended with
//! acks=-1 through the produce purgatory, like any acks=all write, and the request that
//! made the change is answered only once it is replicated.
//!
//! The record is Kafka's `TransactionLogKey` v0 (version, transactional id) and
//! `TransactionLogValue` v0: producer id, epoch, timeout, state, the partitions by topic,
//! the last update and start times.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::ResponseError;
use tracing::warn;

use super::{TxnMetadata, TxnState};
use crate::coordinator::records;
use crate::partition::TopicPartition;
use crate::replica_manager::{AppendOrigin, ReplicaManager};
use crate::request::RequestContext;
use crate::topics::{self, TRANSACTION_STATE_TOPIC};

/// How long a state write waits for its replicas before it fails.
const WRITE_TIMEOUT_MS: u64 = 30_000;

/// Where a state write's outcome goes.
pub type WriteCallback = Box<dyn FnOnce(Result<(), ResponseError>) + Send>;

/// Kafka's `TransactionState` byte for `state`.
fn state_byte(state: TxnState) -> i8 {
    match state {
        TxnState::Empty => 0,
        TxnState::Ongoing => 1,
        TxnState::PrepareCommit => 2,
        TxnState::PrepareAbort => 3,
        TxnState::CompleteCommit => 4,
        TxnState::CompleteAbort => 5,
    }
}

fn put_string(out: &mut BytesMut, s: &str) {
    let bytes = s.as_bytes();
    out.put_i16(i16::try_from(bytes.len()).unwrap_or(i16::MAX));
    out.put_slice(&bytes[..bytes.len().min(i16::MAX as usize)]);
}

/// The record's key: version 0 and the transactional id.
pub fn key(transactional_id: &str) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(0);
    put_string(&mut out, transactional_id);
    out.freeze()
}

/// Kafka's `TransactionState` for its byte.
fn state_of(byte: i8) -> Option<TxnState> {
    Some(match byte {
        0 => TxnState::Empty,
        1 => TxnState::Ongoing,
        2 => TxnState::PrepareCommit,
        3 => TxnState::PrepareAbort,
        4 => TxnState::CompleteCommit,
        5 => TxnState::CompleteAbort,
        _ => return None,
    })
}

/// Reads a record's key: the transactional id.
pub fn read_key(mut buf: Bytes) -> anyhow::Result<String> {
    let version = records::get_i16(&mut buf)?;
    anyhow::ensure!(
        version == 0,
        "unknown {TRANSACTION_STATE_TOPIC} key version {version}"
    );
    records::get_string(&mut buf)
}

/// Reads a record's value (v0, as [`value`] writes it) into the state of
/// `transactional_id`, its clock times set to `now_ms` (the broker clock's times are not in
/// the record: a loaded transaction's timeout counts from its load).
pub fn read_value(
    transactional_id: &str,
    mut buf: Bytes,
    now_ms: u64,
) -> anyhow::Result<TxnMetadata> {
    let version = records::get_i16(&mut buf)?;
    anyhow::ensure!(
        version == 0,
        "unknown {TRANSACTION_STATE_TOPIC} value version {version}"
    );
    let producer_id = records::get_i64(&mut buf)?;
    let producer_epoch = records::get_i16(&mut buf)?;
    let timeout_ms = u64::try_from(records::get_i32(&mut buf)?)?;
    anyhow::ensure!(buf.remaining() >= 1, "truncated");
    let state = state_of(buf.get_i8()).ok_or_else(|| anyhow::anyhow!("unknown state"))?;
    let mut meta = TxnMetadata::new(transactional_id, producer_id, timeout_ms, now_ms);
    meta.producer_epoch = producer_epoch;
    meta.state = state;
    let topics = records::get_i32(&mut buf)?;
    for _ in 0..topics.max(0) {
        let topic = records::get_string(&mut buf)?;
        let partitions = records::get_i32(&mut buf)?;
        // Each partition is 4 bytes: a count past what is left is a corrupt record, not
        // a reason to loop.
        anyhow::ensure!(
            partitions >= 0 && buf.remaining() >= 4 * partitions as usize,
            "truncated partitions"
        );
        for _ in 0..partitions {
            meta.partitions
                .insert(TopicPartition::new(&topic, records::get_i32(&mut buf)?));
        }
    }
    let _last_update_wall_ms = records::get_i64(&mut buf)?;
    meta.started_wall_ms = records::get_i64(&mut buf)?;
    Ok(meta)
}

/// The record's value: `meta` as `TransactionLogValue` v0. `now_ms` is the last update's
/// wall-clock time.
pub fn value(meta: &TxnMetadata, now_ms: i64) -> Bytes {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in &meta.partitions {
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    let mut out = BytesMut::new();
    out.put_i16(0);
    out.put_i64(meta.producer_id);
    out.put_i16(meta.producer_epoch);
    out.put_i32(i32::try_from(meta.timeout_ms).unwrap_or(i32::MAX));
    out.put_i8(state_byte(meta.state));
    out.put_i32(by_topic.len() as i32);
    for (topic, partitions) in by_topic {
        put_string(&mut out, topic);
        out.put_i32(partitions.len() as i32);
        for p in partitions {
            out.put_i32(p);
        }
    }
    out.put_i64(now_ms);
    out.put_i64(meta.started_wall_ms);
    out.freeze()
}

/// The `__transaction_state` partition of `transactional_id`.
pub fn partition_for(rm: &ReplicaManager, transactional_id: &str) -> TopicPartition {
    let partitions = rm
        .topic(TRANSACTION_STATE_TOPIC)
        .map_or(rm.config.transaction_state_log_num_partitions, |t| {
            t.partitions.len() as i32
        });
    TopicPartition::new(
        TRANSACTION_STATE_TOPIC,
        records::partition_for(transactional_id, partitions),
    )
}

/// Creates `__transaction_state` unless it exists.
pub fn ensure_topic(rm: &ReplicaManager) -> Result<(), ResponseError> {
    if rm.topic(TRANSACTION_STATE_TOPIC).is_some() {
        return Ok(());
    }
    match rm.create_topic(topics::transaction_state_topic(&rm.config), false) {
        Ok(_) => Ok(()),
        Err(e) if e.error == ResponseError::TopicAlreadyExists => Ok(()),
        Err(e) => {
            warn!(error = %e.message, "cannot create {TRANSACTION_STATE_TOPIC}");
            Err(ResponseError::CoordinatorNotAvailable)
        }
    }
}

/// Appends `meta`'s state to its partition with acks=-1; `callback` hears the outcome once
/// it is replicated, with the append's error as Kafka's coordinator maps it: a write that
/// could not reach its replicas is COORDINATOR_NOT_AVAILABLE (the client retries), one on
/// a partition this broker no longer leads NOT_COORDINATOR.
pub fn write(
    rm: &ReplicaManager,
    ctx: &RequestContext,
    meta: &TxnMetadata,
    callback: WriteCallback,
) {
    if let Err(e) = ensure_topic(rm) {
        return callback(Err(e));
    }
    let now = crate::record_batch::wall_clock_ms();
    let record = (key(&meta.transactional_id), Some(value(meta, now)));
    let batch = match records::batch(&[record], now, None) {
        Ok(batch) => batch,
        Err(e) => {
            warn!(error = %e, "cannot encode a {TRANSACTION_STATE_TOPIC} record");
            return callback(Err(ResponseError::UnknownServerError));
        }
    };
    let tp = partition_for(rm, &meta.transactional_id);
    rm.append_records(
        ctx,
        WRITE_TIMEOUT_MS,
        -1,
        AppendOrigin::Coordinator,
        vec![(tp, batch)],
        Box::new(move |results| {
            let error = results.into_iter().find_map(|(_, r)| r.error);
            callback(match error {
                None => Ok(()),
                Some(ResponseError::NotLeaderOrFollower) => Err(ResponseError::NotCoordinator),
                Some(_) => Err(ResponseError::CoordinatorNotAvailable),
            });
        }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_kafkas_transaction_log_key_and_value_v0() {
        assert_eq!(&key("tx")[..], &[0, 0, 0, 2, b't', b'x']);
        let mut meta = TxnMetadata::new("tx", 1000, 60_000, 0);
        meta.producer_epoch = 3;
        meta.state = TxnState::Ongoing;
        meta.started_wall_ms = 77;
        meta.partitions.insert(TopicPartition::new("t", 1));
        meta.partitions.insert(TopicPartition::new("t", 0));
        let v = value(&meta, 99);
        let mut want = vec![0, 0];
        want.extend_from_slice(&1000i64.to_be_bytes());
        want.extend_from_slice(&3i16.to_be_bytes());
        want.extend_from_slice(&60_000i32.to_be_bytes());
        want.push(1); // Ongoing
        want.extend_from_slice(&1i32.to_be_bytes()); // one topic
        want.extend_from_slice(&[0, 1, b't']);
        want.extend_from_slice(&2i32.to_be_bytes());
        want.extend_from_slice(&0i32.to_be_bytes());
        want.extend_from_slice(&1i32.to_be_bytes());
        want.extend_from_slice(&99i64.to_be_bytes());
        want.extend_from_slice(&77i64.to_be_bytes());
        assert_eq!(&v[..], &want[..]);
    }

    #[test]
    fn a_record_reads_back_as_the_state_it_was_written_from() {
        let mut meta = TxnMetadata::new("tx", 1000, 60_000, 0);
        meta.producer_epoch = 3;
        meta.state = TxnState::PrepareCommit;
        meta.started_wall_ms = 77;
        meta.partitions.insert(TopicPartition::new("t", 1));
        meta.partitions.insert(TopicPartition::new("u", 0));
        assert_eq!(read_key(key("tx")).unwrap(), "tx");
        let back = read_value("tx", value(&meta, 99), 5).unwrap();
        assert_eq!(
            (
                back.producer_id,
                back.producer_epoch,
                back.timeout_ms,
                back.state
            ),
            (1000, 3, 60_000, TxnState::PrepareCommit)
        );
        assert_eq!(back.partitions, meta.partitions);
        assert_eq!((back.started_wall_ms, back.started_ms), (77, 5));
    }

    #[test]
    fn a_corrupt_record_is_an_error_not_a_panic_or_a_long_loop() {
        let whole = value(&TxnMetadata::new("tx", 1, 1000, 0), 0);
        for cut in 0..whole.len() {
            assert!(
                read_value("tx", whole.slice(..cut), 0).is_err(),
                "cut at {cut}"
            );
        }
        // A partition count of i32::MAX with nothing behind it.
        let mut huge = BytesMut::from(&whole[..2 + 8 + 2 + 4 + 1]);
        huge.put_i32(1);
        huge.put_i16(1);
        huge.put_u8(b't');
        huge.put_i32(i32::MAX);
        assert!(read_value("tx", huge.freeze(), 0).is_err());
        assert!(read_key(Bytes::from_static(&[0, 1, 0, 2, b't', b'x'])).is_err());
    }
}
