//! DescribeConfigs: the settings of a topic (resource type 2) or of the broker (type 4),
//! under Kafka's names. Admin tools (kcat -L does not, but `kafka-configs`, AdminClient and
//! kafkajs's admin do) use it to show what a topic was created with.

use std::sync::Arc;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse, ResponseKind};

use super::{sb, RequestContext};
use crate::error_codes as ec;
use crate::replica_manager::ReplicaManager;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
/// Config sources (Kafka's `ConfigSource`): dynamic topic config, static broker config, default.
const SOURCE_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;

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
                            SOURCE_TOPIC,
                        ),
                        (
                            "retention.bytes".into(),
                            t.config.retention_bytes.to_string(),
                            SOURCE_TOPIC,
                        ),
                        ("cleanup.policy".into(), "delete".into(), SOURCE_DEFAULT),
                        (
                            "message.timestamp.type".into(),
                            "CreateTime".into(),
                            SOURCE_DEFAULT,
                        ),
                        (
                            "max.message.bytes".into(),
                            rm.config.message_max_bytes.to_string(),
                            SOURCE_STATIC_BROKER,
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
                            SOURCE_STATIC_BROKER,
                        ),
                        (
                            "auto.create.topics.enable".into(),
                            c.auto_create_topics.to_string(),
                            SOURCE_STATIC_BROKER,
                        ),
                        (
                            "num.partitions".into(),
                            c.num_partitions.to_string(),
                            SOURCE_STATIC_BROKER,
                        ),
                        (
                            "default.replication.factor".into(),
                            c.default_replication_factor.to_string(),
                            SOURCE_STATIC_BROKER,
                        ),
                        (
                            "min.insync.replicas".into(),
                            c.min_insync_replicas.to_string(),
                            SOURCE_STATIC_BROKER,
                        ),
                        (
                            "replica.lag.time.max.ms".into(),
                            c.replica_lag_time_max_ms.to_string(),
                            SOURCE_STATIC_BROKER,
                        ),
                        (
                            "socket.request.max.bytes".into(),
                            c.socket_request_max_bytes.to_string(),
                            SOURCE_STATIC_BROKER,
                        ),
                        (
                            "message.max.bytes".into(),
                            c.message_max_bytes.to_string(),
                            SOURCE_STATIC_BROKER,
                        ),
                        (
                            "retention.bytes".into(),
                            c.retention_bytes.to_string(),
                            SOURCE_STATIC_BROKER,
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
            let wanted = resource.configuration_keys.as_ref();
            let configs = entries
                .into_iter()
                .filter(|(name, _, _)| {
                    wanted.is_none_or(|keys| keys.iter().any(|k| k.as_str() == name))
                })
                .map(|(name, value, source)| {
                    DescribeConfigsResourceResult::default()
                        .with_name(sb(&name))
                        .with_value(Some(sb(&value)))
                        .with_read_only(source != SOURCE_TOPIC)
                        .with_config_source(source)
                })
                .collect();
            result.with_configs(configs)
        })
        .collect();
    ResponseKind::DescribeConfigs(DescribeConfigsResponse::default().with_results(results))
}
