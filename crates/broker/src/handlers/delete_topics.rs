//! DeleteTopics: remove topics by name (or, v6+, by id). Requests parked on a deleted
//! topic's partitions complete at once with UNKNOWN_TOPIC_OR_PARTITION.

use std::sync::Arc;

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    DeleteTopicsRequest, DeleteTopicsResponse, ResponseKind, TopicName,
};
use kafka_protocol::ResponseError;

use super::{sb, RequestContext};
use crate::replica_manager::ReplicaManager;

/// Handles a DeleteTopics request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    ctx: &RequestContext,
    req: DeleteTopicsRequest,
) -> ResponseKind {
    // v0-5 name topics in `topic_names`; v6+ in `topics`, by name or id.
    let targets: Vec<(Option<String>, uuid::Uuid)> = if ctx.api_version >= 6 {
        req.topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id))
            .collect()
    } else {
        req.topic_names
            .iter()
            .map(|n| (Some(n.0.to_string()), uuid::Uuid::nil()))
            .collect()
    };
    let responses = targets
        .into_iter()
        .map(|(name, id)| {
            let resolved = match &name {
                Some(n) => rm.topic(n),
                None => rm.topic_by_id(id),
            };
            let result = DeletableTopicResult::default()
                .with_name(name.as_deref().map(|n| TopicName(sb(n))))
                .with_topic_id(id);
            let Some(topic) = resolved else {
                let error = if name.is_some() {
                    ResponseError::UnknownTopicOrPartition
                } else {
                    ResponseError::UnknownTopicId
                };
                return result.with_error_code(error.code());
            };
            match rm.delete_topic(&topic.name) {
                Ok(()) => result
                    .with_name(Some(TopicName(sb(&topic.name))))
                    .with_topic_id(topic.id),
                Err(e) => result
                    .with_error_code(e.error.code())
                    .with_error_message(Some(sb(&e.message))),
            }
        })
        .collect();
    ResponseKind::DeleteTopics(DeleteTopicsResponse::default().with_responses(responses))
}
