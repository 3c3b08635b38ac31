//! DescribeConfigs: the settings of a topic (resource type 2) or of the broker (type 4),
//! under Kafka's names. Admin tools (kcat -L does not, but `kafka-configs`, AdminClient and
//! kafkajs's admin do) use it to show what a topic was created with.

use std::sync::Arc;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse, ResponseKind};

use super::{config_source, sb, RequestContext};
use crate::error_codes as ec;
use crate::replica_manager::{ReplicaManager, TopicConfig, SETTABLE_TOPIC_CONFIGS};

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;

/// Handles a DescribeConfigs request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    _ctx: &RequestContext,
    req: DescribeConfigsRequest,
) -> ResponseKind {
    let results = req
        .resources
        .into_iter()
        .map(|resource| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            let entries: Vec<(String, String, i8)> = match resource.resource_type {
                RESOURCE_TOPIC => match rm.topic(&resource.resource_name) {
                    Some(t) => vec![
                        (
                            "min.insync.replicas".into(),
                            t.config.min_insync_replicas.to_string(),
                            topic_source(&t.config, "min.insync.replicas"),
                        ),
                        (
                            "retention.bytes".into(),
                            t.config.retention_bytes.to_string(),
                            topic_source(&t.config, "retention.bytes"),
                        ),
                        (
                            "cleanup.policy".into(),
                            "delete".into(),
                            config_source::DEFAULT,
                        ),
                        (
                            "message.timestamp.type".into(),
                            "CreateTime".into(),
                            config_source::DEFAULT,
                        ),
                        (
                            "max.message.bytes".into(),
                            rm.config.message_max_bytes.to_string(),
                            config_source::STATIC_BROKER,
                        ),
                    ],
                    None => {
                        return result
                            .with_error_code(ec::UNKNOWN_TOPIC_OR_PARTITION)
                            .with_error_message(Some(sb("unknown topic")))
                    }
                },
                RESOURCE_BROKER => {
                    let c = &rm.config;
                    vec![
                        (
                            "broker.id".into(),
                            c.broker_id.to_string(),
                            config_source::STATIC_BROKER,
                        ),
                        (
                            "auto.create.topics.enable".into(),
                            c.auto_create_topics.to_string(),
                            config_source::STATIC_BROKER,
                        ),
                        (
                            "num.partitions".into(),
                            c.num_partitions.to_string(),
                            config_source::STATIC_BROKER,
                        ),
                        (
                            "default.replication.factor".into(),
                            c.default_replication_factor.to_string(),
                            config_source::STATIC_BROKER,
                        ),
                        (
                            "min.insync.replicas".into(),
                            c.min_insync_replicas.to_string(),
                            config_source::STATIC_BROKER,
                        ),
                        (
                            "replica.lag.time.max.ms".into(),
                            c.replica_lag_time_max_ms.to_string(),
                            config_source::STATIC_BROKER,
                        ),
                        (
                            "socket.request.max.bytes".into(),
                            c.socket_request_max_bytes.to_string(),
                            config_source::STATIC_BROKER,
                        ),
                        (
                            "message.max.bytes".into(),
                            c.message_max_bytes.to_string(),
                            config_source::STATIC_BROKER,
                        ),
                        (
                            "retention.bytes".into(),
                            c.retention_bytes.to_string(),
                            config_source::STATIC_BROKER,
                        ),
                    ]
                }
                other => {
                    return result
                        .with_error_code(ec::INVALID_REQUEST)
                        .with_error_message(Some(sb(&format!(
                            "unsupported resource type {other}"
                        ))))
                }
            };
            // No list means every key, and (as Kafka's broker reads it) so does an empty
            // one: some clients send `[]` when they want everything.
            let wanted = resource
                .configuration_keys
                .as_ref()
                .filter(|keys| !keys.is_empty());
            let configs = entries
                .into_iter()
                .filter(|(name, _, _)| {
                    wanted.is_none_or(|keys| keys.iter().any(|k| k.as_str() == name))
                })
                .map(|(name, value, source)| {
                    let config_type = config_type(&name);
                    // Only the topic configs CreateTopics accepts can be set at all.
                    let settable = resource.resource_type == RESOURCE_TOPIC
                        && SETTABLE_TOPIC_CONFIGS.contains(&name.as_str());
                    DescribeConfigsResourceResult::default()
                        .with_name(sb(&name))
                        .with_value(Some(sb(&value)))
                        .with_read_only(!settable)
                        .with_config_source(source)
                        .with_config_type(config_type)
                })
                .collect();
            result.with_configs(configs)
        })
        .collect();
    ResponseKind::DescribeConfigs(DescribeConfigsResponse::default().with_results(results))
}

/// Where a topic's value of a settable config comes from: set on CreateTopics, or the
/// broker's own.
pub(crate) fn topic_source(config: &TopicConfig, name: &str) -> i8 {
    if config.is_override(name) {
        config_source::TOPIC
    } else {
        config_source::STATIC_BROKER
    }
}

/// Kafka's `ConfigType` (DescribeConfigs v3+) of each config this broker reports, so that
/// admin tools can show and validate values.
fn config_type(name: &str) -> i8 {
    const BOOLEAN: i8 = 1;
    const STRING: i8 = 2;
    const INT: i8 = 3;
    const LONG: i8 = 5;
    const LIST: i8 = 7;
    match name {
        "auto.create.topics.enable" => BOOLEAN,
        "message.timestamp.type" => STRING,
        "retention.bytes" | "replica.lag.time.max.ms" => LONG,
        "cleanup.policy" => LIST,
        _ => INT,
    }
}
