//! AlterConfigs (API key 33, v0-2), the legacy API IncrementalAlterConfigs replaced: it
//! *replaces* a topic's whole override set with the configs it lists, so a config it
//! leaves out returns to its default (Kafka's semantics, which is why tools moved to the
//! incremental API). Older clients and kafka-python's `alter_configs` still send it.
//!
//! Errors are Kafka's, per resource: a resource named twice, a key named twice, a null
//! value, an unknown resource type or an empty topic name is INVALID_REQUEST; an unknown
//! topic UNKNOWN_TOPIC_OR_PARTITION; an unknown config or a bad value INVALID_CONFIG (and
//! nothing of that resource changes). `validate_only` checks and changes nothing. The
//! change applies at once, on every broker ([`ReplicaManager::alter_topic_config`]).
//! Broker resources are refused: this broker has no dynamic broker configs.

use std::sync::Arc;

use kafka_protocol::messages::alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse, ResponseKind};

use super::config_resource::{alter_responses, alter_target, refuse_broker_alter, AlterTarget};
use super::RequestContext;
use crate::replica_manager::ReplicaManager;
use crate::topics::config::alter::check_replacement;
use crate::topics::TopicError;

/// Handles an AlterConfigs request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    _ctx: &RequestContext,
    req: AlterConfigsRequest,
) -> ResponseKind {
    let responses = alter_responses!(AlterConfigsResourceResponse, &req.resources, |r| alter(
        rm,
        r,
        req.validate_only
    ));
    ResponseKind::AlterConfigs(AlterConfigsResponse::default().with_responses(responses))
}

/// Parses, checks and applies one resource's new override set.
fn alter(
    rm: &ReplicaManager,
    resource: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), TopicError> {
    let target = alter_target(resource.resource_type, &resource.resource_name, rm)?;
    let set: Vec<(String, Option<String>)> = resource
        .configs
        .iter()
        .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
        .collect();
    let overrides = check_replacement(&set)?;
    match target {
        AlterTarget::Broker => refuse_broker_alter(set.iter().map(|(name, _)| name.as_str())),
        AlterTarget::Topic(name) => {
            rm.alter_topic_config(&name, |_current| Ok(overrides), validate_only)
        }
    }
}
