//! CreateTopics: create topics with a partition count, a replication factor (at most the
//! leader plus its simulated followers) and per-topic configs (see
//! [`crate::topics::config`]). `validate_only` checks without creating. From v5 on the
//! answer carries each new topic's effective configs and where each value comes from. A
//! name given twice in one request is answered once, INVALID_REQUEST, after the others,
//! and is not created, as Kafka's controller answers it.

use std::collections::HashSet;
use std::sync::Arc;

use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, ResponseKind, TopicName,
};
use kafka_protocol::ResponseError;

use super::{sb, RequestContext};
use crate::replica_manager::ReplicaManager;
use crate::topics::NewTopic;

/// Handles a CreateTopics request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    ctx: &RequestContext,
    req: CreateTopicsRequest,
) -> ResponseKind {
    // A name given more than once is refused, once, after the other topics' answers, and
    // none of its entries is created (Kafka's ControllerApis.createTopics).
    let mut seen = HashSet::new();
    let mut duplicates: Vec<TopicName> = Vec::new();
    for topic in &req.topics {
        if !seen.insert(topic.name.0.as_str()) && !duplicates.contains(&topic.name) {
            duplicates.push(topic.name.clone());
        }
    }
    let mut results: Vec<CreatableTopicResult> = req
        .topics
        .into_iter()
        .filter(|topic| !duplicates.contains(&topic.name))
        .map(|topic| {
            let result = CreatableTopicResult::default().with_name(topic.name.clone());
            let failed = |error: ResponseError, message: &str| {
                result
                    .clone()
                    .with_error_code(error.code())
                    .with_error_message(Some(sb(message)))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
            };
            if !topic.assignments.is_empty() {
                return failed(
                    ResponseError::InvalidRequest,
                    "manual replica assignments are not supported: the leader is always broker 1",
                );
            }
            let mut configs = Vec::with_capacity(topic.configs.len());
            for c in &topic.configs {
                match &c.value {
                    Some(v) => configs.push((c.name.to_string(), v.to_string())),
                    None => {
                        return failed(
                            ResponseError::InvalidConfig,
                            &format!("config {} has no value", c.name.as_str()),
                        )
                    }
                }
            }
            let new = NewTopic {
                name: topic.name.0.to_string(),
                partitions: topic.num_partitions,
                replication_factor: topic.replication_factor,
                configs,
            };
            match rm.create_topic(new, req.validate_only) {
                Ok(t) => {
                    let result = result
                        .with_topic_id(t.id)
                        .with_num_partitions(t.partitions.len() as i32)
                        .with_replication_factor(t.replication_factor);
                    // The effective configs are part of the response from v5 on.
                    if ctx.api_version < 5 {
                        return result;
                    }
                    let configs = t
                        .config
                        .entries()
                        .iter()
                        .map(|e| {
                            CreatableTopicConfigs::default()
                                .with_name(sb(&e.name))
                                .with_value(Some(sb(&e.value)))
                                .with_read_only(e.read_only)
                                .with_config_source(e.source as i8)
                                .with_is_sensitive(false)
                        })
                        .collect();
                    result.with_configs(Some(configs))
                }
                Err(e) => failed(e.error, &e.message),
            }
        })
        .collect();
    results.extend(duplicates.into_iter().map(|name| {
        CreatableTopicResult::default()
            .with_name(name)
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(sb("Duplicate topic name.")))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
    }));
    ResponseKind::CreateTopics(CreateTopicsResponse::default().with_topics(results))
}
