//! DescribeConfigs: the settings of a topic (resource type 2) or of the broker (type 4),
//! under Kafka's names, with where each value comes from and its type. Admin tools
//! (`kafka-configs`, AdminClient, kafkajs's admin) use it to show what a topic was created
//! with.
//!
//! A topic's configs come from the topic config table ([`crate::topics::config`]); the
//! broker's are its configuration file's settings, under the same Kafka names
//! ([`describe_broker`]).

use std::sync::Arc;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse, ResponseKind};
use kafka_protocol::ResponseError;

use super::{sb, RequestContext};
use crate::replica_manager::ReplicaManager;
use crate::topics::config::describe_broker;
use crate::topics::{ConfigEntry, ConfigType};

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
            let entries: Vec<ConfigEntry> = match resource.resource_type {
                RESOURCE_TOPIC => match rm.topic(&resource.resource_name) {
                    Some(t) => t.config.entries().to_vec(),
                    None => {
                        return result
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                            .with_error_message(Some(sb("unknown topic")))
                    }
                },
                RESOURCE_BROKER => describe_broker(&rm.config),
                other => {
                    return result
                        .with_error_code(ResponseError::InvalidRequest.code())
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
                .filter(|e| wanted.is_none_or(|keys| keys.iter().any(|k| k.as_str() == e.name)))
                .map(|e| {
                    let sensitive = e.config_type == ConfigType::Password;
                    DescribeConfigsResourceResult::default()
                        .with_name(sb(&e.name))
                        .with_value((!sensitive).then(|| sb(&e.value)))
                        .with_read_only(e.read_only)
                        .with_config_source(e.source as i8)
                        .with_is_sensitive(sensitive)
                        .with_config_type(e.config_type as i8)
                        .with_documentation(Some(sb(e.doc)))
                })
                .collect();
            result.with_configs(configs)
        })
        .collect();
    ResponseKind::DescribeConfigs(DescribeConfigsResponse::default().with_results(results))
}
