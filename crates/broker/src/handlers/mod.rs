//! Request handlers, one module per Kafka API — the layout is the protocol.
//!
//! A handler translates: the decoded wire request into the replica manager's domain calls
//! (`append_records`, `fetch_messages`, topic lookups) or the group coordinator's
//! (`handle_join_group`, `handle_commit_offsets`, ...), and the domain results back into
//! the wire response for the request's version. It holds no state and makes no decision
//! that belongs to the broker's model — those live in [`crate::replica_manager`].
//!
//! It returns a [`Reply`]: a response now, a response later (the request was parked in a
//! purgatory and a delayed operation's callback will send it), no response at all
//! (`acks=0`), or "close the connection". The connection keeps replies in request order.

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use tokio::sync::oneshot;

use crate::apis::KafkaApis;
pub use crate::request::RequestContext;

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_configs;
pub mod api_versions;
pub mod config_resource;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_transactions;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sync_group;
pub mod txn_offset_commit;

#[cfg(test)]
mod tests;

/// What a handler gives back.
pub enum Reply {
    /// Answer now.
    Now(Box<ResponseKind>),
    /// Parked: a delayed operation will send the response.
    Later(oneshot::Receiver<ResponseKind>),
    /// No response is sent (`acks=0`).
    Nothing,
    /// Send the responses owed before this one, then close the connection, logging why.
    /// Kafka's answer to a failed `acks=0` produce: the producer cannot be told of the
    /// error, so the broker drops the connection and the producer refreshes its metadata.
    Close(String),
}

impl Reply {
    /// An immediate response.
    pub fn now(response: ResponseKind) -> Reply {
        Reply::Now(Box::new(response))
    }

    /// A response a replica-manager callback sends: if the callback already ran (nothing
    /// was parked) the response goes out now, otherwise when the delayed operation
    /// completes.
    pub fn from_callback(mut rx: oneshot::Receiver<ResponseKind>) -> Reply {
        match rx.try_recv() {
            Ok(response) => Reply::now(response),
            Err(oneshot::error::TryRecvError::Empty) => Reply::Later(rx),
            // The callback was dropped without answering: the request can never be
            // answered, so the connection closes (awaiting `rx` now would fail forever).
            Err(oneshot::error::TryRecvError::Closed) => {
                Reply::Close("the request was dropped unanswered".into())
            }
        }
    }
}

/// The APIs this broker implements and the versions it accepts: (key, min, max).
///
/// Chosen to cover librdkafka 2.x, kafka-python 3.x, kafkajs 2.2 and the Java client 3.x+.
/// Produce is advertised from v0 like Kafka 4 does (older librdkafka disables compression
/// when the minimum is above 0), but v0-2 are refused when they arrive, as Kafka 4 does.
/// Fetch stops at v12, the last version that names topics rather than topic ids.
///
/// The classic group APIs (the group coordinator) cover librdkafka 2.x (FindCoordinator
/// 0-2, JoinGroup 0-5, SyncGroup 0-3, Heartbeat 0-3, LeaveGroup 0-1, OffsetCommit and
/// OffsetFetch up to 9, DeleteGroups 0-1), kafkajs 2.2 (its non-flexible versions: up to
/// JoinGroup 5, SyncGroup 3, LeaveGroup 3, OffsetCommit 5, OffsetFetch 4, ListGroups 2,
/// DescribeGroups 2) and kafka-python 3 (which takes the highest version both sides know:
/// JoinGroup 7, SyncGroup 5, OffsetCommit and OffsetFetch 8, FindCoordinator 6, ...), up to
/// the last versions kafka-protocol knows that still name topics (OffsetCommit and
/// OffsetFetch 10 use topic ids). OffsetCommit starts at v2 and OffsetFetch at v1, as in
/// Kafka 4.
pub const SUPPORTED_APIS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 0, 12),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::AddPartitionsToTxn, 0, 5),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 5),
    (ApiKey::TxnOffsetCommit, 0, 5),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 1),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::DescribeLogDirs, 1, 4),
];

/// Produce versions we advertise but refuse (Kafka 4 removed them).
pub const PRODUCE_MIN_ACCEPTED: i16 = 3;

/// The supported version range of an API, if we implement it.
pub fn supported_range(key: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED_APIS
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|(_, min, max)| (*min, *max))
}

impl KafkaApis {
    /// Routes a decoded request to its handler (Kafka's `KafkaApis.handle`), passing each
    /// handler only the component its API needs.
    pub fn handle(&self, ctx: &RequestContext, request: RequestKind) -> Reply {
        let rm = &self.replica_manager;
        let gc = &self.group_coordinator;
        match request {
            RequestKind::ApiVersions(r) => Reply::now(api_versions::handle(ctx, r)),
            RequestKind::Metadata(r) => Reply::now(metadata::handle(rm, ctx, r)),
            RequestKind::Produce(r) => produce::handle(rm, &self.txn_coordinator, ctx, r),
            RequestKind::Fetch(r) => fetch::handle(rm, ctx, r),
            RequestKind::ListOffsets(r) => Reply::now(list_offsets::handle(rm, ctx, r)),
            RequestKind::InitProducerId(r) => {
                init_producer_id::handle(rm, &self.txn_coordinator, ctx, r)
            }
            RequestKind::AddPartitionsToTxn(r) => {
                add_partitions_to_txn::handle(rm, &self.txn_coordinator, ctx, r)
            }
            RequestKind::AddOffsetsToTxn(r) => {
                add_offsets_to_txn::handle(&self.txn_coordinator, ctx, r)
            }
            RequestKind::TxnOffsetCommit(r) => {
                txn_offset_commit::handle(rm, gc, &self.txn_coordinator, ctx, r)
            }
            RequestKind::EndTxn(r) => end_txn::handle(rm, &self.txn_coordinator, ctx, r),
            RequestKind::DescribeTransactions(r) => {
                Reply::now(describe_transactions::handle(&self.txn_coordinator, ctx, r))
            }
            RequestKind::ListTransactions(r) => {
                Reply::now(list_transactions::handle(&self.txn_coordinator, ctx, r))
            }
            RequestKind::DescribeProducers(r) => Reply::now(describe_producers::handle(rm, ctx, r)),
            RequestKind::OffsetForLeaderEpoch(r) => {
                Reply::now(offset_for_leader_epoch::handle(rm, ctx, r))
            }
            RequestKind::CreateTopics(r) => Reply::now(create_topics::handle(rm, ctx, r)),
            RequestKind::DeleteTopics(r) => Reply::now(delete_topics::handle(rm, ctx, r)),
            RequestKind::DeleteRecords(r) => delete_records::handle(rm, ctx, r),
            RequestKind::CreatePartitions(r) => Reply::now(create_partitions::handle(rm, ctx, r)),
            RequestKind::DescribeConfigs(r) => Reply::now(describe_configs::handle(rm, ctx, r)),
            RequestKind::AlterConfigs(r) => Reply::now(alter_configs::handle(rm, ctx, r)),
            RequestKind::IncrementalAlterConfigs(r) => {
                Reply::now(incremental_alter_configs::handle(rm, ctx, r))
            }
            RequestKind::FindCoordinator(r) => Reply::now(find_coordinator::handle(rm, gc, ctx, r)),
            RequestKind::JoinGroup(r) => join_group::handle(gc, ctx, r),
            RequestKind::SyncGroup(r) => sync_group::handle(gc, ctx, r),
            RequestKind::Heartbeat(r) => heartbeat::handle(gc, ctx, r),
            RequestKind::LeaveGroup(r) => leave_group::handle(gc, ctx, r),
            RequestKind::OffsetCommit(r) => offset_commit::handle(rm, gc, ctx, r),
            RequestKind::OffsetFetch(r) => offset_fetch::handle(gc, ctx, r),
            RequestKind::ListGroups(r) => Reply::now(list_groups::handle(gc, ctx, r)),
            RequestKind::DescribeGroups(r) => Reply::now(describe_groups::handle(gc, ctx, r)),
            RequestKind::DeleteGroups(r) => delete_groups::handle(gc, ctx, r),
            RequestKind::OffsetDelete(r) => offset_delete::handle(rm, gc, ctx, r),
            RequestKind::DescribeLogDirs(r) => Reply::now(describe_log_dirs::handle(rm, ctx, r)),
            // The frontend only decodes APIs listed in SUPPORTED_APIS.
            _ => Reply::Nothing,
        }
    }
}

/// Shorthand for building a `StrBytes` from a `&str`.
pub fn sb(s: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(s.to_string())
}
