//! What the coordinator writes to `__consumer_offsets`: Kafka's record key and value
//! schemas, byte for byte, so a tool that reads Kafka's offsets topic reads ours.
//!
//! Every key and value starts with an int16 version; the key's version says what the
//! record is. The fields use Kafka's classic (non-flexible) encoding: int16-length strings
//! (-1 for null), int32-length bytes, int32-count arrays.
//!
//! | record          | key (version)                       | value (version)                                       |
//! |-----------------|-------------------------------------|-------------------------------------------------------|
//! | offset commit   | v1: group, topic, partition         | v3: offset, leader epoch, metadata, commit timestamp  |
//! | group metadata  | v2: group                           | v3: protocol type, generation, protocol, leader,      |
//! |                 |                                     |     state timestamp, members (id, instance id, client |
//! |                 |                                     |     id, host, rebalance and session timeouts,         |
//! |                 |                                     |     subscription, assignment)                         |
//!
//! A record with a null value is a tombstone: the offset or group was deleted (compaction
//! would then drop the key; this in-memory log keeps everything). The records go into one
//! v2 record batch per append, built with kafka-protocol's encoder.

use anyhow::{bail, ensure, Context};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;

/// Key version of an offset commit.
pub const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
/// Key version of group metadata.
pub const GROUP_METADATA_KEY_VERSION: i16 = 2;
/// Value version of an offset commit written here.
pub const OFFSET_COMMIT_VALUE_VERSION: i16 = 3;
/// Value version of group metadata written here.
pub const GROUP_METADATA_VALUE_VERSION: i16 = 3;

/// `OffsetCommitValue` v3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitValue {
    /// The committed offset.
    pub offset: i64,
    /// The leader epoch (-1 if unknown).
    pub leader_epoch: i32,
    /// The client's metadata.
    pub metadata: String,
    /// When it was committed.
    pub commit_timestamp: i64,
}

/// `GroupMetadataValue` v3.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupMetadataValue {
    /// `consumer`, or another protocol type.
    pub protocol_type: String,
    /// The generation.
    pub generation: i32,
    /// The generation's protocol (null for an Empty group).
    pub protocol: Option<String>,
    /// The leader's member id (null for an Empty group).
    pub leader: Option<String>,
    /// When the group entered its state.
    pub current_state_timestamp: i64,
    /// The members.
    pub members: Vec<MemberMetadataValue>,
}

/// One member in a `GroupMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberMetadataValue {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id`.
    pub group_instance_id: Option<String>,
    /// `client.id`.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Rebalance timeout.
    pub rebalance_timeout: i32,
    /// Session timeout.
    pub session_timeout: i32,
    /// The metadata for the group's protocol (the subscription).
    pub subscription: Bytes,
    /// The assignment.
    pub assignment: Bytes,
}

/// A decoded `__consumer_offsets` key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordKey {
    /// An offset commit: group, topic, partition.
    OffsetCommit {
        /// Group.
        group: String,
        /// Topic.
        topic: String,
        /// Partition.
        partition: i32,
    },
    /// Group metadata.
    GroupMetadata {
        /// Group.
        group: String,
    },
}

/// An int16-length string. The coordinator refuses group ids that do not fit; any other
/// longer string (a client's instance id or host, which flexible request versions allow
/// to be longer) is cut at the last character that fits.
fn put_string(buf: &mut BytesMut, s: &str) {
    let mut len = s.len().min(i16::MAX as usize);
    while !s.is_char_boundary(len) {
        len -= 1;
    }
    buf.put_i16(len as i16);
    buf.put_slice(&s.as_bytes()[..len]);
}

fn put_nullable_string(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_string(buf, s),
        None => buf.put_i16(-1),
    }
}

fn put_bytes(buf: &mut BytesMut, b: &[u8]) {
    buf.put_i32(b.len() as i32);
    buf.put_slice(b);
}

/// The key of an offset commit.
pub fn offset_commit_key(group: &str, topic: &str, partition: i32) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(OFFSET_COMMIT_KEY_VERSION);
    put_string(&mut buf, group);
    put_string(&mut buf, topic);
    buf.put_i32(partition);
    buf.freeze()
}

/// The value of an offset commit.
pub fn offset_commit_value(v: &OffsetCommitValue) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(OFFSET_COMMIT_VALUE_VERSION);
    buf.put_i64(v.offset);
    buf.put_i32(v.leader_epoch);
    put_string(&mut buf, &v.metadata);
    buf.put_i64(v.commit_timestamp);
    buf.freeze()
}

/// The key of a group's metadata.
pub fn group_metadata_key(group: &str) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(GROUP_METADATA_KEY_VERSION);
    put_string(&mut buf, group);
    buf.freeze()
}

/// The value of a group's metadata.
pub fn group_metadata_value(v: &GroupMetadataValue) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(GROUP_METADATA_VALUE_VERSION);
    put_string(&mut buf, &v.protocol_type);
    buf.put_i32(v.generation);
    put_nullable_string(&mut buf, v.protocol.as_deref());
    put_nullable_string(&mut buf, v.leader.as_deref());
    buf.put_i64(v.current_state_timestamp);
    buf.put_i32(v.members.len() as i32);
    for m in &v.members {
        put_string(&mut buf, &m.member_id);
        put_nullable_string(&mut buf, m.group_instance_id.as_deref());
        put_string(&mut buf, &m.client_id);
        put_string(&mut buf, &m.client_host);
        buf.put_i32(m.rebalance_timeout);
        buf.put_i32(m.session_timeout);
        put_bytes(&mut buf, &m.subscription);
        put_bytes(&mut buf, &m.assignment);
    }
    buf.freeze()
}

/// One v2 record batch holding `records` (key, value; a `None` value is a tombstone),
/// timestamped `timestamp_ms`. Not idempotent (producer id -1, base sequence -1), unless
/// it belongs to the transaction of `transaction` (producer id, epoch): a transaction's
/// offsets (TxnOffsetCommit), which its marker commits or aborts.
pub fn batch(
    records: &[(Bytes, Option<Bytes>)],
    timestamp_ms: i64,
    transaction: Option<(i64, i16)>,
) -> anyhow::Result<Bytes> {
    let records = records
        .iter()
        .map(|(key, value)| (Some(key.clone()), value.clone()));
    match transaction {
        None => crate::record_batch::encode(records, timestamp_ms),
        Some((producer_id, epoch)) => {
            crate::record_batch::encode_transactional(records, timestamp_ms, producer_id, epoch)
        }
    }
    .context("a __consumer_offsets batch")
}

// ------------------------------------------------------------------------- decoding

pub(crate) fn get_i16(buf: &mut Bytes) -> anyhow::Result<i16> {
    ensure!(buf.remaining() >= 2, "truncated");
    Ok(buf.get_i16())
}

pub(crate) fn get_i32(buf: &mut Bytes) -> anyhow::Result<i32> {
    ensure!(buf.remaining() >= 4, "truncated");
    Ok(buf.get_i32())
}

pub(crate) fn get_i64(buf: &mut Bytes) -> anyhow::Result<i64> {
    ensure!(buf.remaining() >= 8, "truncated");
    Ok(buf.get_i64())
}

fn get_nullable_string(buf: &mut Bytes) -> anyhow::Result<Option<String>> {
    let len = get_i16(buf)?;
    if len < 0 {
        return Ok(None);
    }
    let len = len as usize;
    ensure!(buf.remaining() >= len, "truncated string");
    let s = StrBytes::from_utf8(buf.split_to(len)).context("string is not UTF-8")?;
    Ok(Some(s.to_string()))
}

pub(crate) fn get_string(buf: &mut Bytes) -> anyhow::Result<String> {
    get_nullable_string(buf)?.context("null where a string is required")
}

fn get_bytes(buf: &mut Bytes) -> anyhow::Result<Bytes> {
    let len = get_i32(buf)?;
    ensure!(
        len >= 0 && buf.remaining() >= len as usize,
        "bad bytes length"
    );
    Ok(buf.split_to(len as usize))
}

/// Reads a record key.
pub fn read_key(mut buf: Bytes) -> anyhow::Result<RecordKey> {
    match get_i16(&mut buf)? {
        0 | 1 => Ok(RecordKey::OffsetCommit {
            group: get_string(&mut buf)?,
            topic: get_string(&mut buf)?,
            partition: get_i32(&mut buf)?,
        }),
        2 => Ok(RecordKey::GroupMetadata {
            group: get_string(&mut buf)?,
        }),
        v => bail!("unknown __consumer_offsets key version {v}"),
    }
}

/// A control record's key (version, type): the transaction marker it is, `None` for
/// anything else.
pub fn read_control_type(key: Option<&Bytes>) -> Option<replog::ControlType> {
    let mut key = key?.clone();
    let _version = get_i16(&mut key).ok()?;
    match get_i16(&mut key).ok()? {
        0 => Some(replog::ControlType::Abort),
        1 => Some(replog::ControlType::Commit),
        _ => None,
    }
}

/// Reads an offset commit value (v3).
pub fn read_offset_commit_value(mut buf: Bytes) -> anyhow::Result<OffsetCommitValue> {
    let version = get_i16(&mut buf)?;
    ensure!(
        version == 3,
        "offset commit value v{version} (only v3 is read)"
    );
    Ok(OffsetCommitValue {
        offset: get_i64(&mut buf)?,
        leader_epoch: get_i32(&mut buf)?,
        metadata: get_string(&mut buf)?,
        commit_timestamp: get_i64(&mut buf)?,
    })
}

/// Reads a group metadata value (v3).
pub fn read_group_metadata_value(mut buf: Bytes) -> anyhow::Result<GroupMetadataValue> {
    let version = get_i16(&mut buf)?;
    ensure!(
        version == 3,
        "group metadata value v{version} (only v3 is read)"
    );
    let protocol_type = get_string(&mut buf)?;
    let generation = get_i32(&mut buf)?;
    let protocol = get_nullable_string(&mut buf)?;
    let leader = get_nullable_string(&mut buf)?;
    let current_state_timestamp = get_i64(&mut buf)?;
    let count = get_i32(&mut buf)?;
    ensure!(count >= 0, "negative member count");
    let mut members = Vec::new();
    for _ in 0..count {
        members.push(MemberMetadataValue {
            member_id: get_string(&mut buf)?,
            group_instance_id: get_nullable_string(&mut buf)?,
            client_id: get_string(&mut buf)?,
            client_host: get_string(&mut buf)?,
            rebalance_timeout: get_i32(&mut buf)?,
            session_timeout: get_i32(&mut buf)?,
            subscription: get_bytes(&mut buf)?,
            assignment: get_bytes(&mut buf)?,
        });
    }
    Ok(GroupMetadataValue {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp,
        members,
    })
}

/// Kafka's `partitionFor`: `Utils.abs(groupId.hashCode) % partitions`, with Java's
/// `String.hashCode` (31-polynomial over UTF-16 code units, wrapping) and Kafka's
/// `Utils.abs` (`Integer.MIN_VALUE` maps to 0).
pub fn partition_for(group_id: &str, partitions: i32) -> i32 {
    let hash = group_id.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use replog::batch::RecordBatches;

    #[test]
    fn group_to_partition_is_kafkas_hash() {
        // Values of Java's String.hashCode, then Kafka's Utils.abs and the modulo.
        assert_eq!(partition_for("", 50), 0);
        // "a".hashCode() == 97
        assert_eq!(partition_for("a", 50), 97 % 50);
        // "ab".hashCode() == 97*31 + 98 == 3105
        assert_eq!(partition_for("ab", 50), 3105 % 50);
        // "test-group".hashCode() == 627841412
        assert_eq!(partition_for("test-group", 50), 627841412 % 50);
        // "my-group".hashCode() == -1906497762: negative, so abs first
        assert_eq!(partition_for("my-group", 50), 1906497762 % 50);
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE; Utils.abs maps it to 0.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        // Outside the BMP: one code point, two UTF-16 units, as Java hashes it.
        assert_eq!(partition_for("\u{1F600}", 1 << 30), 0xD83D * 31 + 0xDE00);
    }

    #[test]
    fn offset_commit_records_round_trip_in_kafkas_layout() {
        let key = offset_commit_key("g", "t", 3);
        assert_eq!(&key[..], &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3]);
        let value = OffsetCommitValue {
            offset: 42,
            leader_epoch: 7,
            metadata: "m".into(),
            commit_timestamp: 1000,
        };
        let bytes = offset_commit_value(&value);
        assert_eq!(&bytes[..2], &[0, 3]);
        assert_eq!(bytes.len(), 2 + 8 + 4 + 2 + 1 + 8);
        assert_eq!(read_offset_commit_value(bytes).unwrap(), value);
        assert_eq!(
            read_key(key).unwrap(),
            RecordKey::OffsetCommit {
                group: "g".into(),
                topic: "t".into(),
                partition: 3
            }
        );
    }

    #[test]
    fn group_metadata_records_round_trip() {
        let value = GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 4,
            protocol: Some("range".into()),
            leader: Some("a-1".into()),
            current_state_timestamp: 99,
            members: vec![MemberMetadataValue {
                member_id: "a-1".into(),
                group_instance_id: Some("i".into()),
                client_id: "a".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout: 300_000,
                session_timeout: 45_000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"asg"),
            }],
        };
        let bytes = group_metadata_value(&value);
        assert_eq!(read_group_metadata_value(bytes).unwrap(), value);
        let empty = GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 5,
            ..Default::default()
        };
        assert_eq!(
            read_group_metadata_value(group_metadata_value(&empty)).unwrap(),
            empty
        );
        assert_eq!(
            read_key(group_metadata_key("g")).unwrap(),
            RecordKey::GroupMetadata { group: "g".into() }
        );
    }

    #[test]
    fn records_go_into_one_valid_batch() {
        let records = vec![
            (
                offset_commit_key("g", "t", 0),
                Some(Bytes::from_static(b"v0")),
            ),
            (offset_commit_key("g", "t", 1), None),
            (
                offset_commit_key("g", "t", 2),
                Some(Bytes::from_static(b"v2")),
            ),
        ];
        let bytes = batch(&records, 5, None).unwrap();
        let batches: Vec<_> = RecordBatches::new(&bytes).collect();
        assert_eq!(batches.len(), 1, "one batch for one append");
        let header = batches[0].as_ref().unwrap().header;
        assert_eq!(header.base_sequence, -1);
        assert_eq!(header.producer_id, -1);
        assert_eq!(header.last_offset_delta, 2);
    }
}
