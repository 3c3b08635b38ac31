//! TxnOffsetCommit (API key 28, v0-5): a consumer group's offsets, committed inside a
//! transaction (consume-transform-produce). It arrives at the group's coordinator, which
//! asks the transaction's coordinator whether the transaction is open and holds the
//! group's `__consumer_offsets` partition (AddOffsetsToTxn first; INVALID_TXN_STATE
//! otherwise; from v5, transaction version 2, the request adds it itself), then appends the offsets to that partition as the transaction's own batch,
//! with acks=-1. The group holds them as pending until the transaction's marker lands
//! there: COMMIT makes them the group's offsets, ABORT drops them.
//!
//! A partition of a topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION and is not
//! written, so what a transaction holds is bounded by the partitions that exist.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ResponseKind, TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;

use super::{Reply, RequestContext};
use crate::coordinator::group::{OffsetAndMetadata, OffsetKey};
use crate::coordinator::GroupCoordinator;
use crate::record_batch::wall_clock_ms;
use crate::replica_manager::ReplicaManager;
use crate::txn::TransactionCoordinator;

/// The first TxnOffsetCommit version that adds the group to the transaction itself.
const ADDS_GROUP: i16 = 5;

/// Handles a TxnOffsetCommit request: answered once the offsets are replicated (or at
/// once with the error that refuses them all).
pub fn handle(
    rm: &Arc<ReplicaManager>,
    groups: &Arc<GroupCoordinator>,
    txn: &Arc<TransactionCoordinator>,
    ctx: &RequestContext,
    req: TxnOffsetCommitRequest,
) -> Reply {
    let known = |topic: &str, partition: i32| rm.partition(topic, partition).is_some();
    let now = wall_clock_ms();
    let mut offsets: Vec<(OffsetKey, OffsetAndMetadata)> = Vec::new();
    for t in &req.topics {
        let name: Arc<str> = Arc::from(t.name.0.as_str());
        for p in t
            .partitions
            .iter()
            .filter(|p| known(&name, p.partition_index))
        {
            let offset = OffsetAndMetadata {
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p
                    .committed_metadata
                    .as_ref()
                    .map_or_else(String::new, |m| m.to_string()),
                commit_timestamp_ms: now,
            };
            offsets.push(((name.clone(), p.partition_index), offset));
        }
    }
    let group = req.group_id.0.to_string();
    let id = req.transactional_id.0.to_string();
    let member_id = req.member_id.to_string();
    let instance_id = req.group_instance_id.as_ref().map(|i| i.to_string());
    let (generation_id, producer_id, epoch) =
        (req.generation_id, req.producer_id.0, req.producer_epoch);
    let (tx, rx) = oneshot::channel();
    let respond = move |errors: HashMap<OffsetKey, Option<ResponseError>>,
                        all: Option<ResponseError>| {
        let _ = tx.send(response(&req, &errors, all));
    };
    let commit = {
        let (groups, ctx, group) = (groups.clone(), ctx.clone(), group.clone());
        move |checked: Result<(), ResponseError>| match checked {
            Err(e) => respond(HashMap::new(), Some(e)),
            Ok(()) if offsets.is_empty() => respond(HashMap::new(), None),
            Ok(()) => groups.handle_commit_offsets(
                &ctx,
                &group,
                &member_id,
                instance_id.as_deref(),
                generation_id,
                Some((producer_id, epoch)),
                offsets,
                Box::new(move |results| respond(results.into_iter().collect(), None)),
            ),
        }
    };
    // This broker must coordinate the group; the transaction's coordinator may be
    // another broker's.
    let coordinator = groups
        .manager
        .check_coordinator(&group)
        .and_then(|()| txn.coordinator_of(&id));
    match coordinator {
        Err(e) => commit(Err(e)),
        Ok(c) => match c.verify_offsets(&id, producer_id, epoch, &group) {
            Err(ResponseError::InvalidTxnState) if ctx.api_version >= ADDS_GROUP => {
                c.add_offsets(ctx, &id, producer_id, epoch, &group, Box::new(commit))
            }
            checked => commit(checked),
        },
    }
    Reply::from_callback(rx)
}

/// The answer in the request's shape: a partition that does not exist is
/// UNKNOWN_TOPIC_OR_PARTITION; the others answer `all` if the request was refused as a
/// whole, else their own result.
fn response(
    req: &TxnOffsetCommitRequest,
    errors: &HashMap<OffsetKey, Option<ResponseError>>,
    all: Option<ResponseError>,
) -> ResponseKind {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let name: Arc<str> = Arc::from(t.name.0.as_str());
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let key = (name.clone(), p.partition_index);
                    let error = match errors.get(&key) {
                        Some(result) => *result,
                        None => Some(all.unwrap_or(ResponseError::UnknownTopicOrPartition)),
                    };
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(error.map_or(0, |e| e.code()))
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ResponseKind::TxnOffsetCommit(TxnOffsetCommitResponse::default().with_topics(topics))
}
