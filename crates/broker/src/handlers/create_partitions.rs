//! CreatePartitions: grows topics' partition counts (`kafka-topics --alter --partitions
//! N`, AdminClient `create_partitions`). Partitions can only be added, never removed,
//! because a key's partition is its hash modulo the count: existing data stays where it
//! is, and only new records spread over the new partitions.
//!
//! Parse: each topic's new total and, if given, one manual assignment (the broker ids of
//! its replicas, the first leading) per new partition. Apply: the replica manager checks
//! and adds them, in a cluster through the controller ([`crate::replica_manager`]'s
//! `create_partitions`). Respond: one result per topic, with Kafka's error code and
//! message. A topic named twice in one request is refused once, INVALID_REQUEST
//! ("Duplicate topic name."), listed first, and is not changed, as Kafka 4.4 answers it;
//! an unknown topic carries no message, as in Kafka.
//! `validate_only` runs every check and changes nothing.

use std::collections::HashSet;
use std::sync::Arc;

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, ResponseKind, TopicName,
};
use kafka_protocol::ResponseError;

use super::{sb, RequestContext};
use crate::replica_manager::ReplicaManager;

/// Handles a CreatePartitions request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    _ctx: &RequestContext,
    req: CreatePartitionsRequest,
) -> ResponseKind {
    // A name given twice is answered once, INVALID_REQUEST, before the others, and none
    // of its entries is applied (Kafka 4.4's answer, which the conformance run compares).
    let mut seen = HashSet::new();
    let mut duplicates: Vec<TopicName> = Vec::new();
    for t in &req.topics {
        if !seen.insert(t.name.0.as_str()) && !duplicates.contains(&t.name) {
            duplicates.push(t.name.clone());
        }
    }
    let wanted: Vec<_> = req
        .topics
        .into_iter()
        .filter(|t| !duplicates.contains(&t.name))
        .collect();
    let mut results: Vec<CreatePartitionsTopicResult> = duplicates
        .into_iter()
        .map(|name| {
            CreatePartitionsTopicResult::default()
                .with_name(name)
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_error_message(Some(sb("Duplicate topic name.")))
        })
        .collect();
    for topic in wanted {
        let assignment: Option<Vec<Vec<i32>>> = topic.assignments.map(|a| {
            a.into_iter()
                .map(|p| p.broker_ids.into_iter().map(|b| b.0).collect())
                .collect()
        });
        let result = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
        let outcome = rm.create_partitions(
            topic.name.0.as_str(),
            topic.count,
            assignment,
            req.validate_only,
        );
        results.push(match outcome {
            Ok(_) => result,
            Err(e) => {
                // Kafka's controller gives an unknown topic no message.
                let message =
                    (e.error != ResponseError::UnknownTopicOrPartition).then(|| sb(&e.message));
                result
                    .with_error_code(e.error.code())
                    .with_error_message(message)
            }
        });
    }
    ResponseKind::CreatePartitions(CreatePartitionsResponse::default().with_results(results))
}
