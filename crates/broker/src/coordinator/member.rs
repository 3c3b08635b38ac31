//! One member of a classic consumer group (Kafka's `MemberMetadata`): who it is, the
//! protocols it offers, its timeouts, its assignment, and the JoinGroup / SyncGroup
//! response it may be waiting for.
//!
//! A member that sent JoinGroup during a rebalance is *awaiting join*: its response
//! callback is kept here until the DelayedJoin completes. A member that sent SyncGroup
//! before the leader's assignment was stored is *awaiting sync*. Both count as alive for
//! the session timeout: Kafka does not expire a member the coordinator itself keeps waiting.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::JoinGroupParams;

/// A JoinGroup answer (Kafka's `JoinGroupResult`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupResult {
    /// For the leader: every member's id, instance id and metadata for the chosen protocol.
    pub members: Vec<JoinedMember>,
    /// The member's id (new, or as given).
    pub member_id: String,
    /// The generation, -1 on error.
    pub generation_id: i32,
    /// The group's protocol type (`consumer`).
    pub protocol_type: Option<String>,
    /// The protocol chosen for this generation (an assignor name, e.g. `range`).
    pub protocol_name: Option<String>,
    /// The leader's member id.
    pub leader_id: String,
    /// JoinGroup v9: a static leader that rejoined a stable group must not reassign.
    pub skip_assignment: bool,
    /// `None` on success.
    pub error: Option<ResponseError>,
}

impl JoinGroupResult {
    /// An error answer.
    pub fn error(member_id: &str, error: ResponseError) -> Self {
        JoinGroupResult {
            members: Vec::new(),
            member_id: member_id.to_string(),
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader_id: String::new(),
            skip_assignment: false,
            error: Some(error),
        }
    }
}

/// One member as the leader sees it in its JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
    /// The member's metadata for the chosen protocol (a consumer's subscription).
    pub metadata: Bytes,
}

/// A SyncGroup answer (Kafka's `SyncGroupResult`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupResult {
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The generation's protocol.
    pub protocol_name: Option<String>,
    /// The member's assignment, as the leader encoded it.
    pub assignment: Bytes,
    /// `None` on success.
    pub error: Option<ResponseError>,
}

impl SyncGroupResult {
    /// An error answer.
    pub fn error(error: ResponseError) -> Self {
        SyncGroupResult {
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
            error: Some(error),
        }
    }
}

/// Where a parked JoinGroup's answer goes. It only sends (it is called with the group lock
/// held, so it must not lock anything itself).
pub type JoinCallback = Box<dyn FnOnce(JoinGroupResult) + Send>;
/// Where a parked SyncGroup's answer goes; the same rule applies.
pub type SyncCallback = Box<dyn FnOnce(SyncGroupResult) + Send>;

/// One member of a group.
pub struct MemberMetadata {
    /// Member id, handed out by the coordinator (`<client.id>-<uuid>`).
    pub member_id: Arc<str>,
    /// `group.instance.id` (static membership, KIP-345).
    pub group_instance_id: Option<String>,
    /// The client's `client.id`.
    pub client_id: String,
    /// The client's address, as Kafka shows it (`/127.0.0.1`).
    pub client_host: String,
    /// How long a rebalance may wait for this member to rejoin.
    pub rebalance_timeout_ms: i32,
    /// How long the member may go without a heartbeat.
    pub session_timeout_ms: i32,
    /// The protocol type (`consumer` for consumers).
    pub protocol_type: String,
    /// The protocols it supports, by preference, each with its metadata.
    pub supported_protocols: Vec<(String, Bytes)>,
    /// Its assignment in the current generation.
    pub assignment: Bytes,
    /// Its parked JoinGroup, during a rebalance.
    pub awaiting_join: Option<JoinCallback>,
    /// Its parked SyncGroup, until the leader's assignment is stored.
    pub awaiting_sync: Option<SyncCallback>,
    /// Joined in the current rebalance for the first time.
    pub is_new: bool,
    /// Moves on with every heartbeat, join or sync; a DelayedHeartbeat parked at an older
    /// epoch is stale.
    pub heartbeat_epoch: u64,
    /// When the current DelayedHeartbeat expires (broker clock), for the state view.
    pub session_deadline_ms: u64,
}

impl MemberMetadata {
    /// A member as a `__consumer_offsets` group record stored it: in the generation,
    /// with its subscription (the metadata for `protocol`) and assignment.
    pub fn loaded(
        v: &super::records::MemberMetadataValue,
        protocol_type: &str,
        protocol: Option<&str>,
    ) -> Self {
        MemberMetadata {
            member_id: Arc::from(v.member_id.as_str()),
            group_instance_id: v.group_instance_id.clone(),
            client_id: v.client_id.clone(),
            client_host: v.client_host.clone(),
            rebalance_timeout_ms: v.rebalance_timeout,
            session_timeout_ms: v.session_timeout,
            protocol_type: protocol_type.to_string(),
            supported_protocols: protocol
                .map(|p| vec![(p.to_string(), v.subscription.clone())])
                .unwrap_or_default(),
            assignment: v.assignment.clone(),
            awaiting_join: None,
            awaiting_sync: None,
            is_new: false,
            heartbeat_epoch: 0,
            session_deadline_ms: 0,
        }
    }

    /// A member joining for the first time with the id `member_id`: new, nothing parked,
    /// no assignment, no heartbeat yet.
    pub fn joining(member_id: Arc<str>, p: &JoinGroupParams) -> Self {
        MemberMetadata {
            member_id,
            group_instance_id: p.group_instance_id.clone(),
            client_id: p.client_id.clone(),
            client_host: p.client_host.clone(),
            rebalance_timeout_ms: p.rebalance_timeout_ms,
            session_timeout_ms: p.session_timeout_ms,
            protocol_type: p.protocol_type.clone(),
            supported_protocols: p.protocols.clone(),
            assignment: Bytes::new(),
            awaiting_join: None,
            awaiting_sync: None,
            is_new: true,
            heartbeat_epoch: 0,
            session_deadline_ms: 0,
        }
    }

    /// Is a JoinGroup of this member parked?
    pub fn is_awaiting_join(&self) -> bool {
        self.awaiting_join.is_some()
    }

    /// Is a SyncGroup of this member parked?
    pub fn is_awaiting_sync(&self) -> bool {
        self.awaiting_sync.is_some()
    }

    /// Kafka's `hasSatisfiedHeartbeat`, asked when a DelayedHeartbeat parked at the
    /// member's current epoch expires: a member the coordinator keeps waiting (its JoinGroup
    /// or SyncGroup is parked) is alive — unless it is new, whose first join may not wait
    /// forever.
    pub fn keeps_session_alive(&self) -> bool {
        !self.is_new && (self.is_awaiting_join() || self.is_awaiting_sync())
    }

    /// The metadata it gave for `protocol`.
    pub fn metadata(&self, protocol: &str) -> Option<&Bytes> {
        self.supported_protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, metadata)| metadata)
    }

    /// Same protocols, in the same order, with the same metadata (Kafka's `matches`).
    pub fn matches(&self, protocols: &[(String, Bytes)]) -> bool {
        self.supported_protocols == protocols
    }

    /// Its vote: the first of its protocols (by its preference) among `candidates`.
    pub fn vote<'a>(&'a self, candidates: &[&str]) -> Option<&'a str> {
        self.supported_protocols
            .iter()
            .map(|(name, _)| name.as_str())
            .find(|name| candidates.contains(name))
    }
}

/// The protocol type of consumer groups, whose member metadata is a
/// `ConsumerProtocolSubscription`.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// The topics of a consumer subscription: a version, then the body, read as version 0,
/// the prefix every later version starts with (as Kafka reads it, so that a newer client's
/// subscription parses too). `None` if the bytes are not one.
pub fn subscription_topics(metadata: &Bytes) -> Option<Vec<String>> {
    use kafka_protocol::messages::ConsumerProtocolSubscription;
    use kafka_protocol::protocol::Decodable;
    let mut buf = metadata.clone();
    if buf.len() < 2 || bytes::Buf::get_i16(&mut buf) < 0 {
        return None;
    }
    // The bytes come from a client: a decoder failure must not cost the coordinator.
    let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        ConsumerProtocolSubscription::decode(&mut buf, 0)
    }))
    .ok()?
    .ok()?;
    Some(decoded.topics.iter().map(|t| t.to_string()).collect())
}
