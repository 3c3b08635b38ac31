//! # Errors, each with the Kafka protocol error code the broker would answer
//!
//! Every refusal of the controller is one error of the Kafka protocol, so the broker
//! can put [`Error::code`] straight into a CreateTopics, CreatePartitions,
//! AlterPartition or ElectLeaders response. The codes are Kafka's (checked against
//! the protocol's error table); this crate keeps its own small copy of the ones it
//! uses, [`ErrorCode`], rather than depending on a protocol crate.
//!
//! A refused call changes nothing: the image is exactly as it was before it.

use thiserror::Error;

use crate::partition::TopicPartition;

/// The Kafka protocol errors the controller can answer, with their numeric codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i16)]
pub enum ErrorCode {
    /// `UNKNOWN_TOPIC_OR_PARTITION`: no such topic, or no such partition in it.
    UnknownTopicOrPartition = 3,
    /// `NOT_LEADER_OR_FOLLOWER`: the request must come from the partition's leader.
    NotLeaderOrFollower = 6,
    /// `INVALID_TOPIC_EXCEPTION`: the topic name is not a legal Kafka topic name.
    InvalidTopicException = 17,
    /// `TOPIC_ALREADY_EXISTS`.
    TopicAlreadyExists = 36,
    /// `INVALID_PARTITIONS`: a partition count below 1, or not above the current one.
    InvalidPartitions = 37,
    /// `INVALID_REPLICATION_FACTOR`: below 1, or above the number of live brokers.
    InvalidReplicationFactor = 38,
    /// `INVALID_REPLICA_ASSIGNMENT`: an explicit assignment that cannot be used.
    InvalidReplicaAssignment = 39,
    /// `NOT_CONTROLLER`: the caller knows a newer leader epoch than the controller.
    NotController = 41,
    /// `INVALID_REQUEST`: a malformed request, e.g. an ISR without the leader.
    InvalidRequest = 42,
    /// `FENCED_LEADER_EPOCH`: the caller's leader epoch is older than the current one.
    FencedLeaderEpoch = 74,
    /// `PREFERRED_LEADER_NOT_AVAILABLE`: the first replica is dead or not in the ISR.
    PreferredLeaderNotAvailable = 80,
    /// `ELECTION_NOT_NEEDED`: the preferred replica already leads.
    ElectionNotNeeded = 84,
    /// `INVALID_UPDATE_VERSION`: the caller's partition epoch is not the current one.
    InvalidUpdateVersion = 95,
    /// `DUPLICATE_BROKER_REGISTRATION`: the broker id is registered and alive.
    DuplicateBrokerRegistration = 101,
    /// `BROKER_ID_NOT_REGISTERED`.
    BrokerIdNotRegistered = 102,
    /// `INELIGIBLE_REPLICA`: a proposed ISR member is dead or not a replica.
    IneligibleReplica = 107,
}

impl ErrorCode {
    /// The numeric code, as it goes on the wire.
    pub fn value(self) -> i16 {
        self as i16
    }

    /// Kafka's name for the error, e.g. `"FENCED_LEADER_EPOCH"`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::UnknownTopicOrPartition => "UNKNOWN_TOPIC_OR_PARTITION",
            ErrorCode::NotLeaderOrFollower => "NOT_LEADER_OR_FOLLOWER",
            ErrorCode::InvalidTopicException => "INVALID_TOPIC_EXCEPTION",
            ErrorCode::TopicAlreadyExists => "TOPIC_ALREADY_EXISTS",
            ErrorCode::InvalidPartitions => "INVALID_PARTITIONS",
            ErrorCode::InvalidReplicationFactor => "INVALID_REPLICATION_FACTOR",
            ErrorCode::InvalidReplicaAssignment => "INVALID_REPLICA_ASSIGNMENT",
            ErrorCode::NotController => "NOT_CONTROLLER",
            ErrorCode::InvalidRequest => "INVALID_REQUEST",
            ErrorCode::FencedLeaderEpoch => "FENCED_LEADER_EPOCH",
            ErrorCode::PreferredLeaderNotAvailable => "PREFERRED_LEADER_NOT_AVAILABLE",
            ErrorCode::ElectionNotNeeded => "ELECTION_NOT_NEEDED",
            ErrorCode::InvalidUpdateVersion => "INVALID_UPDATE_VERSION",
            ErrorCode::DuplicateBrokerRegistration => "DUPLICATE_BROKER_REGISTRATION",
            ErrorCode::BrokerIdNotRegistered => "BROKER_ID_NOT_REGISTERED",
            ErrorCode::IneligibleReplica => "INELIGIBLE_REPLICA",
        }
    }
}

/// Why the controller refused a call. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// No topic of that name, or the topic has no such partition.
    #[error("unknown topic or partition {topic}{}", partition.map(|p| format!("-{p}")).unwrap_or_default())]
    UnknownTopicOrPartition {
        /// The topic asked for.
        topic: String,
        /// The partition asked for, if the call named one.
        partition: Option<i32>,
    },
    /// An AlterPartition from a broker that does not lead the partition.
    #[error("broker {broker} is not the leader of {tp} (the leader is {leader})")]
    NotLeaderOrFollower {
        /// The partition.
        tp: TopicPartition,
        /// The broker that sent the request.
        broker: i32,
        /// The current leader, -1 if there is none.
        leader: i32,
    },
    /// The topic name is empty, too long, `.` or `..`, or has characters Kafka refuses.
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopic {
        /// The name asked for.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// `create_topic` for a name that is taken.
    #[error("topic {topic} already exists")]
    TopicAlreadyExists {
        /// The topic.
        topic: String,
    },
    /// A partition count below 1, or a `create_partitions` total not above the current one.
    #[error("invalid partition count {requested} (the topic has {current})")]
    InvalidPartitions {
        /// The count asked for.
        requested: i32,
        /// The topic's current count (0 for a new topic).
        current: i32,
    },
    /// A replication factor below 1 or above the number of live brokers.
    #[error("replication factor {replication_factor} is not between 1 and the {live_brokers} live brokers")]
    InvalidReplicationFactor {
        /// The factor asked for.
        replication_factor: i16,
        /// Live brokers available for the assignment.
        live_brokers: usize,
    },
    /// An explicit assignment with no partitions, an empty or uneven replica list, a
    /// repeated broker, an unregistered broker, or no live broker for a partition.
    #[error("{reason}")]
    InvalidReplicaAssignment {
        /// What is wrong with it.
        reason: String,
    },
    /// An AlterPartition carrying a leader epoch newer than the controller's: the
    /// leader must have heard of it from another controller. Kafka answers
    /// `NOT_CONTROLLER` so the leader looks for the current one.
    #[error("{tp}: leader epoch {request_epoch} is newer than the controller's {current_epoch}")]
    NotController {
        /// The partition.
        tp: TopicPartition,
        /// The leader epoch in the request.
        request_epoch: i32,
        /// The controller's leader epoch.
        current_epoch: i32,
    },
    /// A malformed request: a negative broker id, or a proposed ISR that is empty,
    /// repeats a broker, or leaves out the leader.
    #[error("invalid request: {reason}")]
    InvalidRequest {
        /// What is wrong with it.
        reason: String,
    },
    /// An AlterPartition from a leader whose leader epoch is older than the current
    /// one: a newer leader has been elected since.
    #[error("{tp}: leader epoch {request_epoch} is older than the current {current_epoch}")]
    FencedLeaderEpoch {
        /// The partition.
        tp: TopicPartition,
        /// The leader epoch in the request.
        request_epoch: i32,
        /// The current leader epoch.
        current_epoch: i32,
    },
    /// A preferred election whose first replica is dead or not in the ISR.
    #[error("{tp}: preferred leader {preferred} is not alive and in sync")]
    PreferredLeaderNotAvailable {
        /// The partition.
        tp: TopicPartition,
        /// The first replica.
        preferred: i32,
    },
    /// A preferred election for a partition its first replica already leads.
    #[error("{tp}: the preferred leader {preferred} already leads")]
    ElectionNotNeeded {
        /// The partition.
        tp: TopicPartition,
        /// The first replica, the current leader.
        preferred: i32,
    },
    /// An AlterPartition based on another version of the partition state than the
    /// current one: the controller changed it since (e.g. removed a dead follower).
    #[error("{tp}: partition epoch {request_epoch} is not the current {current_epoch}")]
    InvalidUpdateVersion {
        /// The partition.
        tp: TopicPartition,
        /// The partition epoch in the request.
        request_epoch: i32,
        /// The current partition epoch.
        current_epoch: i32,
    },
    /// `register_broker` for an id already registered, or `broker_restarted` for a
    /// broker that is alive.
    #[error("broker {id} is already registered and alive")]
    DuplicateBrokerRegistration {
        /// The broker id.
        id: i32,
    },
    /// A call naming a broker that never registered.
    #[error("broker {id} is not registered")]
    BrokerIdNotRegistered {
        /// The broker id.
        id: i32,
    },
    /// A proposed ISR with a broker that is not a replica of the partition, or is dead.
    #[error("{tp}: broker {broker} cannot be in the ISR: {reason}")]
    IneligibleReplica {
        /// The partition.
        tp: TopicPartition,
        /// The ineligible broker.
        broker: i32,
        /// Why: `"not a replica"` or `"not alive"`.
        reason: &'static str,
    },
}

impl Error {
    /// The Kafka protocol error this error is.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::UnknownTopicOrPartition { .. } => ErrorCode::UnknownTopicOrPartition,
            Error::NotLeaderOrFollower { .. } => ErrorCode::NotLeaderOrFollower,
            Error::InvalidTopic { .. } => ErrorCode::InvalidTopicException,
            Error::TopicAlreadyExists { .. } => ErrorCode::TopicAlreadyExists,
            Error::InvalidPartitions { .. } => ErrorCode::InvalidPartitions,
            Error::InvalidReplicationFactor { .. } => ErrorCode::InvalidReplicationFactor,
            Error::InvalidReplicaAssignment { .. } => ErrorCode::InvalidReplicaAssignment,
            Error::NotController { .. } => ErrorCode::NotController,
            Error::InvalidRequest { .. } => ErrorCode::InvalidRequest,
            Error::FencedLeaderEpoch { .. } => ErrorCode::FencedLeaderEpoch,
            Error::PreferredLeaderNotAvailable { .. } => ErrorCode::PreferredLeaderNotAvailable,
            Error::ElectionNotNeeded { .. } => ErrorCode::ElectionNotNeeded,
            Error::InvalidUpdateVersion { .. } => ErrorCode::InvalidUpdateVersion,
            Error::DuplicateBrokerRegistration { .. } => ErrorCode::DuplicateBrokerRegistration,
            Error::BrokerIdNotRegistered { .. } => ErrorCode::BrokerIdNotRegistered,
            Error::IneligibleReplica { .. } => ErrorCode::IneligibleReplica,
        }
    }

    /// The numeric Kafka error code, for a response.
    pub fn kafka_error_code(&self) -> i16 {
        self.code().value()
    }
}
