//! The error codes are Kafka's.

use crate::ErrorCode;

#[test]
fn every_error_code_has_kafkas_number_and_name() {
    let table = [
        (
            ErrorCode::UnknownTopicOrPartition,
            3,
            "UNKNOWN_TOPIC_OR_PARTITION",
        ),
        (ErrorCode::NotLeaderOrFollower, 6, "NOT_LEADER_OR_FOLLOWER"),
        (
            ErrorCode::InvalidTopicException,
            17,
            "INVALID_TOPIC_EXCEPTION",
        ),
        (ErrorCode::TopicAlreadyExists, 36, "TOPIC_ALREADY_EXISTS"),
        (ErrorCode::InvalidPartitions, 37, "INVALID_PARTITIONS"),
        (
            ErrorCode::InvalidReplicationFactor,
            38,
            "INVALID_REPLICATION_FACTOR",
        ),
        (
            ErrorCode::InvalidReplicaAssignment,
            39,
            "INVALID_REPLICA_ASSIGNMENT",
        ),
        (ErrorCode::NotController, 41, "NOT_CONTROLLER"),
        (ErrorCode::InvalidRequest, 42, "INVALID_REQUEST"),
        (ErrorCode::FencedLeaderEpoch, 74, "FENCED_LEADER_EPOCH"),
        (
            ErrorCode::PreferredLeaderNotAvailable,
            80,
            "PREFERRED_LEADER_NOT_AVAILABLE",
        ),
        (ErrorCode::ElectionNotNeeded, 84, "ELECTION_NOT_NEEDED"),
        (
            ErrorCode::InvalidUpdateVersion,
            95,
            "INVALID_UPDATE_VERSION",
        ),
        (
            ErrorCode::DuplicateBrokerRegistration,
            101,
            "DUPLICATE_BROKER_REGISTRATION",
        ),
        (
            ErrorCode::BrokerIdNotRegistered,
            102,
            "BROKER_ID_NOT_REGISTERED",
        ),
        (ErrorCode::IneligibleReplica, 107, "INELIGIBLE_REPLICA"),
    ];
    for (code, value, name) in table {
        assert_eq!((code.value(), code.name()), (value, name));
    }
}
