//! Kafka error codes used by this broker (from Kafka's protocol documentation).
//!
//! Kept as plain `i16` constants because that is what travels on the wire; the names are
//! Kafka's, so a log line or a test reads the same as Kafka's docs.

/// No error.
pub const NONE: i16 = 0;
/// The requested offset is outside the range of offsets kept for the partition.
pub const OFFSET_OUT_OF_RANGE: i16 = 1;
/// A record batch failed its CRC check.
pub const CORRUPT_MESSAGE: i16 = 2;
/// The topic or partition does not exist on this broker.
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// This broker is not the leader (or a follower) for the partition / replica.
pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
/// The request timed out (an `acks=all` produce whose HW never came).
pub const REQUEST_TIMED_OUT: i16 = 7;
/// The replica is not available for the requested partition.
pub const REPLICA_NOT_AVAILABLE: i16 = 9;
/// The record batch is larger than `message.max.bytes`.
pub const MESSAGE_TOO_LARGE: i16 = 10;
/// The topic name is not legal.
pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
/// `acks=all` refused: the ISR is smaller than `min.insync.replicas`.
pub const NOT_ENOUGH_REPLICAS: i16 = 19;
/// Appended, but the ISR fell below `min.insync.replicas` before it was replicated.
pub const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;
/// `acks` was not -1, 0 or 1.
pub const INVALID_REQUIRED_ACKS: i16 = 21;
/// The request's version is not supported.
pub const UNSUPPORTED_VERSION: i16 = 35;
/// CreateTopics: the topic exists.
pub const TOPIC_ALREADY_EXISTS: i16 = 36;
/// CreateTopics: bad partition count.
pub const INVALID_PARTITIONS: i16 = 37;
/// CreateTopics: bad replication factor.
pub const INVALID_REPLICATION_FACTOR: i16 = 38;
/// A config name or value is not acceptable.
pub const INVALID_CONFIG: i16 = 40;
/// An idempotent batch's sequence number left a gap.
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
/// The producer's epoch is older than the broker's.
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
/// Transactions are not supported by this broker.
pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
/// Disk (here: memory) is exhausted: `log.memory.max.bytes` reached.
pub const KAFKA_STORAGE_ERROR: i16 = 56;
/// The producer id is not known to the broker.
pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
/// The fetch session is unknown (this broker creates no sessions).
pub const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
/// The topic id is unknown.
pub const UNKNOWN_TOPIC_ID: i16 = 100;
/// Another producer with a newer epoch exists.
pub const PRODUCER_FENCED: i16 = 90;
/// A record batch is malformed.
pub const INVALID_RECORD: i16 = 87;
/// The request breaks a broker policy (here: `max.partitions`).
pub const POLICY_VIOLATION: i16 = 44;
/// The request itself is malformed.
pub const INVALID_REQUEST: i16 = 42;
