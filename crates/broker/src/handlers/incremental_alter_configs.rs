//! IncrementalAlterConfigs (API key 44, v0-1): changes some of a topic's configs —
//! SET a value, DELETE an override (back to the default), APPEND to or SUBTRACT from a
//! LIST config such as `cleanup.policy` — without restating the others. It is what
//! `kafka-configs --alter`, the Java AdminClient, confluent-kafka's
//! `incremental_alter_configs` and Terraform's Kafka provider send.
//!
//! Each resource is answered on its own, as Kafka answers it: a resource named twice,
//! a key named twice, a null value, an unknown resource type or an empty topic name
//! is INVALID_REQUEST; an unknown topic UNKNOWN_TOPIC_OR_PARTITION; an unknown config,
//! APPEND/SUBTRACT on a non-LIST config, or a value its check refuses INVALID_CONFIG
//! (and nothing of that resource changes). `validate_only` checks and changes nothing.
//! The change applies at once, on every broker ([`ReplicaManager::alter_topic_config`]).
//! Broker resources are refused: this broker has no dynamic broker configs.

use std::sync::Arc;

use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, ResponseKind,
};
use kafka_protocol::ResponseError;

use super::config_resource::{
    alter_target, refuse_broker_alter, repeated, repeated_error, AlterTarget,
};
use super::{sb, RequestContext};
use crate::replica_manager::ReplicaManager;
use crate::topics::config::alter::{check_incremental, incremental, Alteration};
use crate::topics::TopicError;

/// Handles an IncrementalAlterConfigs request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    _ctx: &RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> ResponseKind {
    let repeated = repeated(
        req.resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.as_str())),
    );
    let responses = req
        .resources
        .iter()
        .map(|resource| {
            let response = AlterConfigsResourceResponse::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            let key = (resource.resource_type, resource.resource_name.to_string());
            let outcome = if repeated.contains(&key) {
                Err(repeated_error())
            } else {
                alter(rm, resource, req.validate_only)
            };
            match outcome {
                Ok(()) => response.with_error_message(None),
                Err(e) => response
                    .with_error_code(e.error.code())
                    .with_error_message(Some(sb(&e.message))),
            }
        })
        .collect();
    ResponseKind::IncrementalAlterConfigs(
        IncrementalAlterConfigsResponse::default().with_responses(responses),
    )
}

/// Parses, checks and applies one resource's operations.
fn alter(
    rm: &ReplicaManager,
    resource: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), TopicError> {
    let target = alter_target(resource.resource_type, &resource.resource_name, rm)?;
    let alterations: Vec<Alteration> = resource
        .configs
        .iter()
        .map(|c| Alteration {
            name: c.name.to_string(),
            op: c.config_operation,
            value: c.value.as_ref().map(|v| v.to_string()),
        })
        .collect();
    let ops = check_incremental(&alterations)?;
    match target {
        AlterTarget::Broker => refuse_broker_alter(alterations.iter().map(|a| a.name.as_str())),
        AlterTarget::Topic(name) => {
            let topic = rm.topic(&name).ok_or_else(|| {
                TopicError::new(
                    ResponseError::UnknownTopicOrPartition,
                    format!("The topic '{name}' does not exist."),
                )
            })?;
            let overrides = incremental(&topic.config, &ops)?;
            rm.alter_topic_config(&name, &overrides, validate_only)
        }
    }
}
