//! FindCoordinator: which broker coordinates a group. This one coordinates every group
//! (it leads every partition of `__consumer_offsets`), so the answer is always itself —
//! once `__consumer_offsets` exists: it is created here if it does not yet, and if it
//! cannot be (`max.partitions`), the answer is COORDINATOR_NOT_AVAILABLE, as Kafka answers
//! while its offsets topic is missing.
//!
//! v0-3 ask for one key; v4+ (KIP-699) for a batch of `coordinator_keys`, answered one
//! entry each. Key type 0 is a group, whose coordinator leads its `__consumer_offsets`
//! partition; 1 is a transactional id, whose coordinator leads its `__transaction_state`
//! partition (created here too, if it does not exist yet); anything else is
//! INVALID_REQUEST.

use std::sync::Arc;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse, ResponseKind,
};
use kafka_protocol::ResponseError;

use super::{metadata, sb, RequestContext};
use crate::coordinator::GroupCoordinator;
use crate::replica_manager::ReplicaManager;

/// Kafka's `CoordinatorType.GROUP`.
const GROUP: i8 = 0;
/// Kafka's `CoordinatorType.TRANSACTION`.
const TRANSACTION: i8 = 1;

/// Handles a FindCoordinator request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    coordinator: &GroupCoordinator,
    ctx: &RequestContext,
    req: FindCoordinatorRequest,
) -> ResponseKind {
    // With several brokers, a key's coordinator is the leader of its partition of
    // `__consumer_offsets` (a group) or `__transaction_state` (a transactional id);
    // alone, this broker.
    // None: the partition has no live leader just now (COORDINATOR_NOT_AVAILABLE).
    let node_for = |key_type: i8, key: &str| -> Option<(i32, String, i32)> {
        let Some(cluster) = rm.cluster() else {
            let (host, port) = metadata::advertised(rm);
            return Some((rm.config.broker_id, host, port));
        };
        let tp = if key_type == TRANSACTION {
            crate::txn::log::partition_for(rm, key)
        } else {
            coordinator.manager.topic_partition_for(key)
        };
        let leader = cluster.partition(&tp.topic, tp.partition).map(|p| p.leader);
        cluster
            .brokers()
            .into_iter()
            .find(|(id, _, _)| Some(*id) == leader)
    };
    let no_leader = || {
        (
            ResponseError::CoordinatorNotAvailable,
            "the key's partition (of __consumer_offsets or __transaction_state) has no leader just now".to_string(),
        )
    };
    let found = |key_type: i8| -> Result<(), (ResponseError, String)> {
        match key_type {
            GROUP => coordinator
                .find_coordinator()
                .map_err(|why| (ResponseError::CoordinatorNotAvailable, why)),
            TRANSACTION => crate::txn::log::ensure_topic(rm).map_err(|e| {
                (
                    e,
                    format!(
                        "{} cannot be created",
                        crate::topics::TRANSACTION_STATE_TOPIC
                    ),
                )
            }),
            other => Err((
                ResponseError::InvalidRequest,
                format!("unknown coordinator key type {other}"),
            )),
        }
    };
    let v = ctx.api_version;
    let mut response = FindCoordinatorResponse::default();
    if v >= 4 {
        let result = found(req.key_type);
        response.coordinators = req
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let node = result
                    .clone()
                    .and_then(|()| node_for(req.key_type, &key).ok_or_else(no_leader));
                let entry = Coordinator::default().with_key(key);
                match &node {
                    Ok((node, host, port)) => entry
                        .with_node_id(BrokerId(*node))
                        .with_host(sb(host))
                        .with_port(*port),
                    Err((error, message)) => entry
                        .with_node_id(BrokerId(-1))
                        .with_port(-1)
                        .with_error_code(error.code())
                        .with_error_message(Some(sb(message))),
                }
            })
            .collect();
        return ResponseKind::FindCoordinator(response);
    }
    let key_type = if v >= 1 { req.key_type } else { GROUP };
    match found(key_type).and_then(|()| node_for(key_type, &req.key).ok_or_else(no_leader)) {
        Ok((node, host, port)) => {
            response.node_id = BrokerId(node);
            response.host = sb(&host);
            response.port = port;
        }
        Err((error, message)) => {
            response.node_id = BrokerId(-1);
            response.port = -1;
            response.error_code = error.code();
            if v >= 1 {
                response.error_message = Some(sb(&message));
            }
        }
    }
    ResponseKind::FindCoordinator(response)
}
