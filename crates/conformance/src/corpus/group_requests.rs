//! The group APIs' requests, and a member's steps through them (join, sync, heartbeat,
//! leave, commit, fetch offsets), for the scenarios in `groups.rs` and `offsets.rs`: what
//! a consumer sends, built once, and its answers written as the observations compare them.

use anyhow::{bail, Result};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, OffsetCommitRequest, OffsetFetchRequest, OffsetFetchResponse,
    SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::ResponseError;

use crate::observe::error_name;
use crate::target::{name, topic_name, Target, LEADER};

pub const JOIN_VERSION: i16 = 9;
pub const SYNC_VERSION: i16 = 5;
pub const HEARTBEAT_VERSION: i16 = 4;
pub const LEAVE_VERSION: i16 = 5;
pub const COMMIT_VERSION: i16 = 8;
pub const OFFSET_FETCH_VERSION: i16 = 8;

pub fn gid(g: &str) -> GroupId {
    GroupId(name(g))
}

/// A consumer protocol subscription (v0) to `topics`, as a Java consumer writes it.
pub fn subscription(topics: &[&str]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b.put_i32(topics.len() as i32);
    for t in topics {
        b.put_i16(t.len() as i16);
        b.put_slice(t.as_bytes());
    }
    b.put_i32(-1);
    b.freeze()
}

/// A consumer protocol assignment (v0) of `partitions` of `topic`.
pub fn assignment(topic: &str, partitions: &[i32]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b.put_i32(1);
    b.put_i16(topic.len() as i16);
    b.put_slice(topic.as_bytes());
    b.put_i32(partitions.len() as i32);
    for p in partitions {
        b.put_i32(*p);
    }
    b.put_i32(-1);
    b.freeze()
}

pub fn join_request(
    group: &str,
    member_id: &str,
    protocol_type: &str,
    session_timeout_ms: i32,
    topic: &str,
) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(gid(group))
        .with_session_timeout_ms(session_timeout_ms)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(name(member_id))
        .with_protocol_type(name(protocol_type))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(name("range"))
            .with_metadata(subscription(&[topic]))])
}

/// A consumer's JoinGroup of `group` as `member_id` ("" for a new member), subscribed to
/// `topic`, with a 10 s session.
pub async fn consumer_join(
    t: &mut Target,
    group: &str,
    member_id: &str,
    topic: &str,
) -> Result<JoinGroupResponse> {
    let req = join_request(group, member_id, "consumer", 10_000, topic);
    t.send(LEADER, &req, JOIN_VERSION).await
}

/// A member of a group, joined through the two-step JoinGroup (MEMBER_ID_REQUIRED first).
pub struct Member {
    pub id: String,
    pub generation: i32,
    pub leader: bool,
}

impl Member {
    /// Member `id` as the answer to its JoinGroup with that id makes it.
    fn joined(id: String, joined: &JoinGroupResponse) -> Member {
        Member {
            id,
            generation: joined.generation_id,
            leader: joined.leader == joined.member_id,
        }
    }
}

/// Joins `group` as a new member (and, if it is alone, syncs it to Stable with every
/// partition of `topic` assigned to it).
pub async fn join_alone(t: &mut Target, group: &str, topic: &str) -> Result<Member> {
    let first = consumer_join(t, group, "", topic).await?;
    if first.error_code != ResponseError::MemberIdRequired.code() {
        bail!("first JoinGroup answered {}", error_name(first.error_code));
    }
    let id = first.member_id.to_string();
    let joined = consumer_join(t, group, &id, topic).await?;
    if joined.error_code != 0 {
        bail!(
            "JoinGroup with the member id answered {}",
            error_name(joined.error_code)
        );
    }
    let member = Member::joined(id, &joined);
    let synced = sync(t, group, &member, Some(topic)).await?;
    if synced.error_code != 0 {
        bail!("SyncGroup answered {}", error_name(synced.error_code));
    }
    Ok(member)
}

/// Joins `group` as a new member through both JoinGroups and stops there: the group waits
/// in CompletingRebalance for the SyncGroup. The answers are not checked; what the
/// scenario does next shows them.
pub async fn join_unsynced(t: &mut Target, group: &str, topic: &str) -> Result<Member> {
    let first = consumer_join(t, group, "", topic).await?;
    let id = first.member_id.to_string();
    let joined = consumer_join(t, group, &id, topic).await?;
    Ok(Member::joined(id, &joined))
}

/// SyncGroup of `m` (as the leader, it assigns partition 0 of `assign` to itself).
pub async fn sync(
    t: &mut Target,
    group: &str,
    m: &Member,
    assign: Option<&str>,
) -> Result<SyncGroupResponse> {
    t.send(LEADER, &sync_request(group, m, assign), SYNC_VERSION)
        .await
}

pub fn sync_request(group: &str, m: &Member, assign: Option<&str>) -> SyncGroupRequest {
    let assignments = match assign {
        Some(topic) if m.leader => vec![SyncGroupRequestAssignment::default()
            .with_member_id(name(&m.id))
            .with_assignment(assignment(topic, &[0]))],
        _ => Vec::new(),
    };
    SyncGroupRequest::default()
        .with_group_id(gid(group))
        .with_generation_id(m.generation)
        .with_member_id(name(&m.id))
        .with_protocol_type(Some(name("consumer")))
        .with_protocol_name(Some(name("range")))
        .with_assignments(assignments)
}

pub fn heartbeat_request(group: &str, member_id: &str, generation: i32) -> HeartbeatRequest {
    HeartbeatRequest::default()
        .with_group_id(gid(group))
        .with_generation_id(generation)
        .with_member_id(name(member_id))
}

pub async fn heartbeat_code(
    t: &mut Target,
    group: &str,
    member_id: &str,
    generation: i32,
) -> Result<i16> {
    Ok(t.send(
        LEADER,
        &heartbeat_request(group, member_id, generation),
        HEARTBEAT_VERSION,
    )
    .await?
    .error_code)
}

pub fn leave_request(group: &str, member_ids: &[&str]) -> LeaveGroupRequest {
    LeaveGroupRequest::default()
        .with_group_id(gid(group))
        .with_members(
            member_ids
                .iter()
                .map(|id| MemberIdentity::default().with_member_id(name(id)))
                .collect(),
        )
}

/// LeaveGroup of `member_ids` from `group`.
pub async fn leave(t: &mut Target, group: &str, member_ids: &[&str]) -> Result<LeaveGroupResponse> {
    t.send(LEADER, &leave_request(group, member_ids), LEAVE_VERSION)
        .await
}

/// A LeaveGroup answer as `error [member error,...]`.
pub fn see_leave(r: &LeaveGroupResponse) -> String {
    let members: Vec<String> = r.members.iter().map(|m| error_name(m.error_code)).collect();
    format!("{} [{}]", error_name(r.error_code), members.join(","))
}

pub fn commit_request(
    group: &str,
    member_id: &str,
    generation: i32,
    topic: &str,
    partition: i32,
    offset: i64,
    metadata: &str,
) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(gid(group))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(name(member_id))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(partition)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(-1)
                .with_committed_metadata(Some(name(metadata)))])])
}

/// The error of a one-partition OffsetCommit.
pub async fn commit_code(t: &mut Target, req: &OffsetCommitRequest) -> Result<i16> {
    let resp = t.send(LEADER, req, COMMIT_VERSION).await?;
    Ok(resp
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .map_or(-1, |p| p.error_code))
}

pub fn offset_fetch_request(
    group: &str,
    topic: Option<(&str, &[i32])>,
    require_stable: bool,
) -> OffsetFetchRequest {
    OffsetFetchRequest::default()
        .with_require_stable(require_stable)
        .with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(gid(group))
            .with_topics(topic.map(|(t, parts)| {
                vec![OffsetFetchRequestTopics::default()
                    .with_name(topic_name(t))
                    .with_partition_indexes(parts.to_vec())]
            }))])
}

/// An OffsetFetch answer as `group error; topic-partition=offset(metadata) error ...`,
/// topics named by their place in `topics` (they carry the run id).
pub fn see_offsets(resp: &OffsetFetchResponse, topics: &[&str]) -> String {
    let mut parts = Vec::new();
    for g in &resp.groups {
        parts.push(format!("group {}", error_name(g.error_code)));
        for t in &g.topics {
            let label = topics
                .iter()
                .position(|x| *x == t.name.0.as_str())
                .map_or_else(|| "other".to_owned(), |i| format!("t{i}"));
            for p in &t.partitions {
                parts.push(format!(
                    "{label}-{}={}({}) {}",
                    p.partition_index,
                    p.committed_offset,
                    p.metadata.as_deref().unwrap_or("null"),
                    error_name(p.error_code)
                ));
            }
        }
    }
    parts.join("; ")
}

/// OffsetFetch of `group`, of `partitions` of `topic` (None: of every topic), and its
/// answer as [`see_offsets`] writes it, `topic` as t0.
pub async fn fetch_offsets(
    t: &mut Target,
    group: &str,
    topic: &str,
    partitions: Option<&[i32]>,
    require_stable: bool,
) -> Result<String> {
    let req = offset_fetch_request(group, partitions.map(|p| (topic, p)), require_stable);
    let resp = t.send(LEADER, &req, OFFSET_FETCH_VERSION).await?;
    Ok(see_offsets(&resp, &[topic]))
}
