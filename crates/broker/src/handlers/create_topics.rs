//! CreateTopics: create topics with a partition count, a replication factor (at most the
//! leader plus its simulated followers) and per-topic configs (`min.insync.replicas`,
//! `retention.bytes`). `validate_only` checks without creating.

use std::sync::Arc;

use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, ResponseKind};

use super::describe_configs::topic_source;
use super::{sb, RequestContext};
use crate::error_codes as ec;
use crate::replica_manager::{NewTopic, ReplicaManager, TopicConfig};

/// Handles a CreateTopics request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    ctx: &RequestContext,
    req: CreateTopicsRequest,
) -> ResponseKind {
    let results = req
        .topics
        .into_iter()
        .map(|topic| {
            let result = CreatableTopicResult::default().with_name(topic.name.clone());
            if !topic.assignments.is_empty() {
                return result
                    .with_error_code(ec::INVALID_REQUEST)
                    .with_error_message(Some(sb("manual replica assignments are not supported: the leader is always broker 1")))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1);
            }
            let mut configs = Vec::with_capacity(topic.configs.len());
            for c in &topic.configs {
                match &c.value {
                    Some(v) => configs.push((c.name.to_string(), v.to_string())),
                    None => {
                        return result
                            .with_error_code(ec::INVALID_CONFIG)
                            .with_error_message(Some(sb(&format!("config {} has no value", c.name.as_str()))))
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
                    if ctx.api_version >= 5 {
                        result.with_configs(Some(vec![
                            config_entry(&t.config, "min.insync.replicas", &t.config.min_insync_replicas.to_string()),
                            config_entry(&t.config, "retention.bytes", &t.config.retention_bytes.to_string()),
                        ]))
                    } else {
                        result
                    }
                }
                Err(e) => result
                    .with_error_code(e.code)
                    .with_error_message(Some(sb(&e.message)))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1),
            }
        })
        .collect();
    ResponseKind::CreateTopics(CreateTopicsResponse::default().with_topics(results))
}

/// One effective config of a new topic, with where its value comes from (as
/// DescribeConfigs would report it).
fn config_entry(config: &TopicConfig, name: &str, value: &str) -> CreatableTopicConfigs {
    CreatableTopicConfigs::default()
        .with_name(sb(name))
        .with_value(Some(sb(value)))
        .with_read_only(false)
        .with_config_source(topic_source(config, name))
        .with_is_sensitive(false)
}
