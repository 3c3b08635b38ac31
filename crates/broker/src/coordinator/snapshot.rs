//! What `/api/state` and `purgatory ctl groups` show of the coordinator: every group with
//! its state, generation, protocol, leader and members (client, host, session deadline,
//! assignment), the broker-wide counts against their caps. The delayed operations
//! themselves (DelayedJoin, DelayedSync, DelayedHeartbeat, with what each waits for) are in
//! the `rebalance` and `heartbeat` purgatory snapshots beside it.
//!
//! `purgatory ctl groups` reads this JSON back into the same structs.

use std::panic::AssertUnwindSafe;

use bytes::Bytes;
use kafka_protocol::messages::ConsumerProtocolAssignment;
use kafka_protocol::protocol::Decodable;
use serde::{Deserialize, Deserializer, Serialize};

use super::group::GroupState;
use super::GroupCoordinator;

/// Most assigned partitions listed per member.
const MAX_PARTITIONS_SHOWN: usize = 64;
/// Most committed offsets listed per group.
const MAX_OFFSETS_SHOWN: usize = 64;

/// The coordinator, for the state API.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupsSnapshot {
    /// Groups held (`group.coordinator.max.groups` caps it).
    pub total: usize,
    /// Members and pending members of all groups (`group.coordinator.max.members`).
    pub members: usize,
    /// Committed offsets held, in flight included (`group.coordinator.max.committed.offsets`).
    pub committed_offsets: usize,
    /// The caps.
    pub limits: Limits,
    /// The groups, by id (at most the number asked for).
    pub list: Vec<GroupSnapshot>,
}

/// The broker-wide caps.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Limits {
    /// `group.coordinator.max.groups`.
    pub groups: usize,
    /// `group.coordinator.max.members`.
    pub members: usize,
    /// `group.coordinator.max.committed.offsets`.
    pub committed_offsets: usize,
}

/// One group.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupSnapshot {
    /// Group id.
    pub group_id: String,
    /// Empty, PreparingRebalance, CompletingRebalance, Stable, Dead.
    #[serde(deserialize_with = "group_state_name")]
    pub state: GroupStateName,
    /// Since when (broker clock, ms).
    pub state_since_ms: u64,
    /// Generation.
    pub generation_id: i32,
    /// Protocol type (`consumer`).
    pub protocol_type: Option<String>,
    /// The generation's protocol (the assignor).
    pub protocol: Option<String>,
    /// The leader's member id.
    pub leader: Option<String>,
    /// The `__consumer_offsets` partition holding the group.
    pub offsets_partition: String,
    /// Members.
    pub members: Vec<MemberSnapshot>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not yet rejoined with.
    pub pending_members: Vec<String>,
    /// Members of this generation whose SyncGroup has not arrived.
    pub awaiting_sync_from: Vec<String>,
    /// Committed offsets held for the group.
    pub committed_offsets: usize,
    /// Commits appended but not yet replicated (not yet visible to OffsetFetch).
    pub pending_offset_commits: usize,
    /// The first committed offsets, by topic and partition.
    pub offsets: Vec<OffsetSnapshot>,
}

/// A group state's Kafka name, from [`GroupState::name`] (which is also how [`GroupState`]
/// serializes). It is `&'static str` under another name on purpose: serde's derive borrows
/// any field spelled `&'static str` from the input, which would let a snapshot be read
/// only from JSON that lives forever. [`group_state_name`] reads it instead.
pub type GroupStateName = &'static str;

/// Reads a group's `state` back from its Kafka name, by matching it against the known
/// states: an unknown name is an error.
fn group_state_name<'de, D: Deserializer<'de>>(d: D) -> Result<GroupStateName, D::Error> {
    GroupState::deserialize(d).map(GroupState::name)
}

/// One member.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemberSnapshot {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id`, for a static member.
    pub group_instance_id: Option<String>,
    /// `client.id`.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Is it the leader?
    pub leader: bool,
    /// `session.timeout.ms`.
    pub session_timeout_ms: i32,
    /// `rebalance.timeout.ms`.
    pub rebalance_timeout_ms: i32,
    /// When its DelayedHeartbeat expires unless it heartbeats (broker clock, ms).
    pub session_deadline_ms: u64,
    /// Its JoinGroup is parked (in the DelayedJoin).
    pub awaiting_join: bool,
    /// Its SyncGroup is parked (waiting for the leader, or for replication).
    pub awaiting_sync: bool,
    /// Size of its assignment, in bytes.
    pub assignment_bytes: usize,
    /// For consumers: how many partitions it is assigned.
    pub assigned_partitions: Option<usize>,
    /// For consumers: the first assigned partitions, as `topic-partition`.
    pub assignment: Vec<String>,
}

/// One committed offset.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OffsetSnapshot {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Committed offset.
    pub offset: i64,
}

/// The partitions a consumer assignment (Kafka's `ConsumerProtocolAssignment`, a version
/// then the body) names, or `None` if the bytes are not one.
pub fn consumer_assignment(bytes: &Bytes) -> Option<Vec<String>> {
    if bytes.len() < 2 {
        return None;
    }
    let mut buf = bytes.clone();
    let version = i16::from_be_bytes([buf[0], buf[1]]);
    let _ = bytes::Buf::get_i16(&mut buf);
    // The bytes come from a client: a decoder failure must not cost the state view.
    let decoded = std::panic::catch_unwind(AssertUnwindSafe(|| {
        ConsumerProtocolAssignment::decode(&mut buf, version.clamp(0, 3))
    }))
    .ok()?
    .ok()?;
    Some(
        decoded
            .assigned_partitions
            .iter()
            .flat_map(|tp| {
                tp.partitions
                    .iter()
                    .map(move |p| format!("{}-{p}", tp.topic.0.as_str()))
            })
            .collect(),
    )
}

impl GroupCoordinator {
    /// Every group (the first `max_groups` by id) and the broker-wide counts.
    pub fn snapshot(&self, max_groups: usize) -> GroupsSnapshot {
        let handles: Vec<_> = self.groups.read().values().cloned().collect();
        let (total, members, committed_offsets) = self.counts();
        let list = handles
            .iter()
            .take(max_groups)
            .map(|h| {
                let g = h.state.lock();
                let consumer = g.protocol_type.as_deref() == Some("consumer");
                let members = g
                    .members()
                    .map(|m| {
                        let partitions = if consumer {
                            consumer_assignment(&m.assignment)
                        } else {
                            None
                        };
                        MemberSnapshot {
                            member_id: m.member_id.to_string(),
                            group_instance_id: m.group_instance_id.clone(),
                            client_id: m.client_id.clone(),
                            client_host: m.client_host.clone(),
                            leader: g.is_leader(&m.member_id),
                            session_timeout_ms: m.session_timeout_ms,
                            rebalance_timeout_ms: m.rebalance_timeout_ms,
                            session_deadline_ms: m.session_deadline_ms,
                            awaiting_join: m.is_awaiting_join(),
                            awaiting_sync: m.is_awaiting_sync(),
                            assignment_bytes: m.assignment.len(),
                            assigned_partitions: partitions.as_ref().map(Vec::len),
                            assignment: partitions
                                .unwrap_or_default()
                                .into_iter()
                                .take(MAX_PARTITIONS_SHOWN)
                                .collect(),
                        }
                    })
                    .collect();
                let offsets = g
                    .offsets()
                    .take(MAX_OFFSETS_SHOWN)
                    .map(|((topic, partition), o)| OffsetSnapshot {
                        topic: topic.to_string(),
                        partition: *partition,
                        offset: o.offset,
                    })
                    .collect();
                GroupSnapshot {
                    group_id: g.group_id.to_string(),
                    state: g.state().name(),
                    state_since_ms: g.state_timestamp_ms,
                    generation_id: g.generation_id,
                    protocol_type: g.protocol_type.clone(),
                    protocol: g.protocol_name.clone(),
                    leader: g.leader_id().map(|l| l.to_string()),
                    offsets_partition: self.manager.topic_partition_for(&g.group_id).to_string(),
                    members,
                    pending_members: g.pending_members().map(|m| m.to_string()).collect(),
                    awaiting_sync_from: if g.is(GroupState::CompletingRebalance) {
                        g.pending_sync_members()
                            .iter()
                            .map(|m| m.to_string())
                            .collect()
                    } else {
                        Vec::new()
                    },
                    committed_offsets: g.offsets().count(),
                    pending_offset_commits: g.pending_offset_commit_count(),
                    offsets,
                }
            })
            .collect();
        GroupsSnapshot {
            total,
            members,
            committed_offsets,
            limits: Limits {
                groups: self.config.max_groups,
                members: self.config.max_members,
                committed_offsets: self.config.max_committed_offsets,
            },
            list,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_state_is_read_back_from_the_name_it_is_written_with() {
        use GroupState::*;
        for state in [Empty, PreparingRebalance, CompletingRebalance, Stable, Dead] {
            let json = serde_json::to_string(&state).expect("JSON");
            assert_eq!(json, format!("\"{}\"", state.name()));
            let mut de = serde_json::Deserializer::from_str(&json);
            assert_eq!(
                group_state_name(&mut de).expect("a known state"),
                state.name()
            );
        }
        let mut de = serde_json::Deserializer::from_str("\"Sleeping\"");
        assert!(group_state_name(&mut de).is_err());
    }
}
