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

use super::config_resource::{alter_responses, alter_target, refuse_broker_alter, AlterTarget};
use super::RequestContext;
use crate::replica_manager::ReplicaManager;
use crate::topics::config::alter::{check_incremental, incremental, Alteration};
use crate::topics::TopicError;

/// Handles an IncrementalAlterConfigs request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    _ctx: &RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> ResponseKind {
    let responses = alter_responses!(AlterConfigsResourceResponse, &req.resources, |r| alter(
        rm,
        r,
        req.validate_only
    ));
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
            rm.alter_topic_config(&name, |current| incremental(current, &ops), validate_only)
        }
    }
}
