//! DescribeConfigs: the settings of a topic (resource type 2) or of the broker (type 4),
//! under Kafka's names, with where each value comes from and its type. Admin tools
//! (`kafka-configs`, AdminClient, kafkajs's admin) use it to show what a topic was created
//! with.
//!
//! A topic's configs come from the topic config table ([`crate::topics::config`]): all
//! 37 of Kafka 4.4's, each with its value, source (set for the topic, the broker's file,
//! or the default), type, documentation (v3+, when asked for) and, when asked for
//! (`include_synonyms`), its synonyms: the topic's value, the broker's, the default, as
//! Kafka lists them. The broker's are its configuration file's settings under Kafka's
//! names ([`describe_broker`]), all read-only. A broker resource names this broker's id,
//! or nothing (the cluster-wide defaults); any other name is INVALID_REQUEST. The configs come back in
//! the order Kafka's come back in: its `java.util.HashMap`'s (`java_hash_map_bucket`),
//! also when the request names the keys it wants.

use std::sync::Arc;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse, ResponseKind};
use kafka_protocol::ResponseError;

use super::config_resource::{check_broker_name, RESOURCE_BROKER, RESOURCE_TOPIC};
use super::{sb, RequestContext};
use crate::replica_manager::ReplicaManager;
use crate::topics::config::describe_broker;
use crate::topics::{ConfigEntry, ConfigType};

/// The table size of the `java.util.HashMap` Kafka 4.4 builds a topic's configs in (its
/// 37 topic configs) and a broker's (350): the answer comes out in that map's order.
const KAFKA_TOPIC_CONFIGS_CAPACITY: u32 = 64;
const KAFKA_BROKER_CONFIGS_CAPACITY: u32 = 512;

/// Where `java.util.HashMap` files the key `name` in a table of `capacity` (a power of
/// two) buckets: `String.hashCode` (over UTF-16 code units), its high half folded into
/// the low half, masked. A HashMap iterates bucket by bucket, so this is the order
/// Kafka's DescribeConfigs answers in — neither sorted nor the order asked for.
/// Measured against Kafka 4.4: the full topic list (37 keys) and broker list (350) and
/// every subset asked for come out in this order.
fn java_hash_map_bucket(name: &str, capacity: u32) -> u32 {
    let hash = name.encode_utf16().fold(0u32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(u32::from(unit))
    });
    (hash ^ (hash >> 16)) & (capacity - 1)
}

/// Handles a DescribeConfigs request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    _ctx: &RequestContext,
    req: DescribeConfigsRequest,
) -> ResponseKind {
    let (include_synonyms, include_documentation) =
        (req.include_synonyms, req.include_documentation);
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
                RESOURCE_BROKER => match check_broker_name(&resource.resource_name, rm, true) {
                    Ok(()) => describe_broker(&rm.config),
                    Err(message) => {
                        return result
                            .with_error_code(ResponseError::InvalidRequest.code())
                            .with_error_message(Some(sb(&message)))
                    }
                },
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
            let mut entries: Vec<ConfigEntry> = entries
                .into_iter()
                .filter(|e| wanted.is_none_or(|keys| keys.iter().any(|k| k.as_str() == e.name)))
                .collect();
            let capacity = if resource.resource_type == RESOURCE_TOPIC {
                KAFKA_TOPIC_CONFIGS_CAPACITY
            } else {
                KAFKA_BROKER_CONFIGS_CAPACITY
            };
            entries.sort_by_key(|e| java_hash_map_bucket(&e.name, capacity));
            let configs = entries
                .into_iter()
                .map(|e| {
                    let sensitive = e.config_type == ConfigType::Password;
                    let value = |v: &str| (!sensitive).then(|| sb(v));
                    let synonyms = if include_synonyms {
                        e.synonyms
                            .iter()
                            .map(|s| {
                                DescribeConfigsSynonym::default()
                                    .with_name(sb(&s.name))
                                    .with_value(value(&s.value))
                                    .with_source(s.source as i8)
                            })
                            .collect()
                    } else {
                        Vec::new()
                    };
                    DescribeConfigsResourceResult::default()
                        .with_name(sb(&e.name))
                        .with_value(value(&e.value))
                        .with_read_only(e.read_only)
                        .with_config_source(e.source as i8)
                        .with_is_sensitive(sensitive)
                        .with_synonyms(synonyms)
                        .with_config_type(e.config_type as i8)
                        .with_documentation(include_documentation.then(|| sb(e.doc)))
                })
                .collect();
            result.with_configs(configs)
        })
        .collect();
    ResponseKind::DescribeConfigs(DescribeConfigsResponse::default().with_results(results))
}
