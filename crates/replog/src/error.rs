//! # Errors, and the Kafka errors they map to
//!
//! Every error a partition can return corresponds to one error of the Kafka protocol
//! (`kafka_protocol::ResponseError`, the one table of error codes the whole workspace
//! uses), so the broker can put `error().code()` straight into a response.
//!
//! A partition is either its topic's leader on this broker or a follower of another
//! broker ([`crate::Role`]). A call meant for the other role is refused with
//! [`RoleError`] (`NOT_LEADER_OR_FOLLOWER`) and changes nothing: the broker asks
//! [`crate::Partition::ensure_leader`] before serving a produce, as Kafka's
//! `leaderLogIfLocal` does, and a follower's fetcher that lost a race with a
//! leadership change gets [`FollowerAppendError::Role`] for the response it was about to
//! append.
//! Note what is *not* an error: an idempotent producer retrying a batch the log
//! already holds gets a successful answer (with `duplicate = true`), exactly as Kafka
//! acknowledges such retries with the original offsets.

use kafka_protocol::ResponseError;
use thiserror::Error;

/// Why [`crate::Partition::append`] refused a `records` blob. Nothing was appended.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AppendError {
    /// The CRC-32C stored in a batch does not match its bytes (`CORRUPT_MESSAGE`, 2).
    #[error("corrupt record batch: stored CRC {stored_crc:#010x}, computed {computed_crc:#010x}")]
    CorruptMessage {
        /// The CRC in the batch header.
        stored_crc: u32,
        /// The CRC-32C computed over the batch's bytes.
        computed_crc: u32,
    },
    /// The bytes are not a well-formed sequence of v2 batches (`INVALID_RECORD`, 87):
    /// empty, truncated, a magic other than 2, or an inconsistent header.
    #[error("invalid record batch: {reason}")]
    InvalidRecord {
        /// Human-readable explanation, for logs.
        reason: String,
    },
    /// A batch is larger than `message.max.bytes` (`MESSAGE_TOO_LARGE`, 10).
    #[error("record batch of {size} bytes exceeds the maximum of {max} bytes")]
    MessageTooLarge {
        /// Size of the offending batch.
        size: usize,
        /// The configured limit ([`crate::LogConfig::max_batch_bytes`]).
        max: usize,
    },
    /// An idempotent batch's first sequence number does not follow the producer's last
    /// one, and is not a retry of a recent batch (`OUT_OF_ORDER_SEQUENCE_NUMBER`, 45).
    #[error("out of order sequence for producer {producer_id} (epoch {producer_epoch}): expected {expected_sequence}, got {first_sequence}")]
    OutOfOrderSequence {
        /// The producer id.
        producer_id: i64,
        /// The batch's producer epoch.
        producer_epoch: i16,
        /// The sequence the log expected next (0 for a new epoch).
        expected_sequence: i32,
        /// The batch's `baseSequence`.
        first_sequence: i32,
    },
    /// The batch's producer epoch is older than the one the log knows: a newer
    /// instance of this producer has fenced it (`INVALID_PRODUCER_EPOCH`, 47).
    #[error("producer {producer_id} epoch {producer_epoch} is older than the current epoch {current_epoch}")]
    InvalidProducerEpoch {
        /// The producer id.
        producer_id: i64,
        /// The batch's (stale) epoch.
        producer_epoch: i16,
        /// The epoch the log has seen.
        current_epoch: i16,
    },
    /// An `acks=all` produce arrived while the ISR is smaller than the minimum in force
    /// (`NOT_ENOUGH_REPLICAS`, 19): it is refused before anything is appended, because
    /// the records could not be acknowledged as durable.
    #[error("the ISR has {isr_size} replicas, fewer than the {min_isr} required for acks=all")]
    NotEnoughReplicas {
        /// Replicas in the ISR, leader included.
        isr_size: usize,
        /// The minimum in force: `min(min.insync.replicas, replication factor)`.
        min_isr: usize,
    },
    /// This replica is not the partition's leader (`NOT_LEADER_OR_FOLLOWER`, 6): only the
    /// leader takes a producer's writes; the client refreshes its metadata.
    #[error("{0}")]
    NotLeaderOrFollower(crate::RoleError),
}

impl AppendError {
    /// The Kafka protocol error for this error.
    pub fn error(&self) -> ResponseError {
        match self {
            AppendError::CorruptMessage { .. } => ResponseError::CorruptMessage,
            AppendError::InvalidRecord { .. } => ResponseError::InvalidRecord,
            AppendError::MessageTooLarge { .. } => ResponseError::MessageTooLarge,
            AppendError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
            AppendError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
            AppendError::NotEnoughReplicas { .. } => ResponseError::NotEnoughReplicas,
            AppendError::NotLeaderOrFollower(_) => ResponseError::NotLeaderOrFollower,
        }
    }

    /// The Kafka protocol error code for this error.
    pub fn kafka_error_code(&self) -> i16 {
        self.error().code()
    }
}

/// Why [`crate::Partition::read`] could not serve a fetch.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReadError {
    /// The fetch offset is below the log start offset (retention removed that data)
    /// or above the log end offset (`OFFSET_OUT_OF_RANGE`, 1).
    #[error("fetch offset {fetch_offset} is outside [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        /// The requested offset.
        fetch_offset: i64,
        /// The first offset still in the log.
        log_start_offset: i64,
        /// The log end offset.
        log_end_offset: i64,
    },
}

impl ReadError {
    /// The Kafka protocol error for this error.
    pub fn error(&self) -> ResponseError {
        match self {
            ReadError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        }
    }

    /// The Kafka protocol error code for this error.
    pub fn kafka_error_code(&self) -> i16 {
        self.error().code()
    }
}

/// Why [`crate::Partition::update_follower_fetch`] did not record a follower fetch.
/// The follower's state is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FollowerError {
    /// The id is not one of this partition's follower replicas (the leader itself
    /// counts as "not a follower"). Kafka answers `NOT_LEADER_OR_FOLLOWER` (6) here,
    /// or `UNKNOWN_LEADER_EPOCH` (74) when the fetch carried a current leader epoch;
    /// [`FollowerError::kafka_error_code`] returns the former.
    #[error("replica {replica_id} is not a follower of this partition")]
    NotAReplica {
        /// The unknown replica id.
        replica_id: i32,
    },
    /// This broker is not the partition's leader, so it does not track followers
    /// (`NOT_LEADER_OR_FOLLOWER`, 6).
    #[error(transparent)]
    NotLeader(RoleError),
    /// The follower's fetch offset is below the log start or above the leader's log
    /// end offset (`OFFSET_OUT_OF_RANGE`, 1). A real follower then truncates or
    /// resets to the log start offset.
    #[error(
        "follower fetch offset {fetch_offset} is outside [{log_start_offset}, {log_end_offset}]"
    )]
    OffsetOutOfRange {
        /// The follower's fetch offset.
        fetch_offset: i64,
        /// The leader's log start offset.
        log_start_offset: i64,
        /// The leader's log end offset.
        log_end_offset: i64,
    },
}

impl FollowerError {
    /// The Kafka protocol error for this error.
    pub fn error(&self) -> ResponseError {
        match self {
            FollowerError::NotAReplica { .. } => ResponseError::NotLeaderOrFollower,
            FollowerError::NotLeader(e) => e.error(),
            FollowerError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        }
    }

    /// The Kafka protocol error code for this error.
    pub fn kafka_error_code(&self) -> i16 {
        self.error().code()
    }
}

/// A call made to a partition in the wrong role, or a role change that would go back in
/// leader epochs. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RoleError {
    /// A leader-only call (produce, follower fetch, ISR check) on a follower
    /// (`NOT_LEADER_OR_FOLLOWER`, 6): the client should refresh its metadata and go to
    /// `leader_id`.
    #[error(
        "not the leader: this replica follows broker {leader_id} in leader epoch {leader_epoch}"
    )]
    NotLeader {
        /// The broker this replica follows.
        leader_id: i32,
        /// The leader epoch it follows it in.
        leader_epoch: i32,
    },
    /// A follower-only call (appending fetched records, truncating, taking the leader's
    /// high watermark) on the leader (`NOT_LEADER_OR_FOLLOWER`, 6): a fetch response
    /// from the previous leader that arrived after this replica was made leader.
    #[error("not a follower: this replica is the leader in leader epoch {leader_epoch}")]
    NotFollower {
        /// The epoch this replica leads.
        leader_epoch: i32,
    },
    /// `make_leader` or `make_follower` with a leader epoch older than the partition's
    /// (`FENCED_LEADER_EPOCH`, 74): a stale leadership decision, arriving late.
    #[error("leader epoch {requested} is older than the current leader epoch {current}")]
    StaleLeaderEpoch {
        /// The partition's leader epoch (or, if higher, the latest epoch in its log).
        current: i32,
        /// The epoch of the refused change.
        requested: i32,
    },
}

impl RoleError {
    /// The Kafka protocol error for this error.
    pub fn error(&self) -> ResponseError {
        match self {
            RoleError::NotLeader { .. } | RoleError::NotFollower { .. } => {
                ResponseError::NotLeaderOrFollower
            }
            RoleError::StaleLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
        }
    }

    /// The Kafka protocol error code for this error.
    pub fn kafka_error_code(&self) -> i16 {
        self.error().code()
    }
}

/// Why [`crate::Partition::append_as_follower`] refused records fetched from the leader.
/// Nothing was appended.
///
/// These errors stay inside the broker: a follower's fetcher handles them (by
/// truncating, or by fetching again from its log end offset) rather than answering a
/// client. [`FollowerAppendError::error`] names the closest Kafka error, for logs.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FollowerAppendError {
    /// The partition is the leader (see [`RoleError::NotFollower`]).
    #[error(transparent)]
    Role(#[from] RoleError),
    /// The records do not continue the log: the first batch must start at the log end
    /// offset, and each next batch right after the one before. A gap would leave offsets
    /// no replica can serve, an overlap would store two versions of the same offsets
    /// (Kafka's `UnexpectedAppendOffsetException`; a fetcher that gets it fetches again
    /// from its log end offset).
    #[error("records fetched from the leader start at offset {got}, expected {expected}")]
    UnexpectedOffset {
        /// The offset the next batch must start at.
        expected: i64,
        /// The base offset of the batch that does not.
        got: i64,
    },
    /// A batch is malformed, corrupt or too large, or its leader epoch is impossible
    /// (older than the log's latest epoch, or newer than the epoch this replica
    /// follows).
    #[error(transparent)]
    Invalid(#[from] AppendError),
}

impl FollowerAppendError {
    /// The closest Kafka protocol error: `NOT_LEADER_OR_FOLLOWER` for the role,
    /// `OFFSET_OUT_OF_RANGE` for an unexpected offset, the batch's own error otherwise.
    pub fn error(&self) -> ResponseError {
        match self {
            FollowerAppendError::Role(e) => e.error(),
            FollowerAppendError::UnexpectedOffset { .. } => ResponseError::OffsetOutOfRange,
            FollowerAppendError::Invalid(e) => e.error(),
        }
    }

    /// The Kafka protocol error code for this error.
    pub fn kafka_error_code(&self) -> i16 {
        self.error().code()
    }
}

/// Why [`crate::Partition::delete_records_on_leader`] deleted nothing.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DeleteRecordsError {
    /// This replica does not lead the partition (`NOT_LEADER_OR_FOLLOWER`, 6).
    #[error(transparent)]
    Role(RoleError),
    /// The offset is above the high watermark, or negative and not -1
    /// (`OFFSET_OUT_OF_RANGE`, 1): records above the HW are not on every in-sync replica.
    #[error("cannot delete records below offset {offset}: the high watermark is {high_watermark}")]
    OffsetOutOfRange {
        /// The offset asked for.
        offset: i64,
        /// The partition's high watermark.
        high_watermark: i64,
    },
}

impl DeleteRecordsError {
    /// The Kafka protocol error for this error.
    pub fn error(&self) -> ResponseError {
        match self {
            DeleteRecordsError::Role(e) => e.error(),
            DeleteRecordsError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        }
    }
}
