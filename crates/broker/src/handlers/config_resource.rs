//! The config resources DescribeConfigs, IncrementalAlterConfigs and AlterConfigs name,
//! checked as Kafka checks them: a TOPIC (type 2) by name, a BROKER (type 4) by this
//! broker's id or `""` (the cluster-wide defaults); any other type is INVALID_REQUEST.
//!
//! This broker has no dynamic broker configs: an alter that names any broker config is
//! INVALID_REQUEST with the message Kafka gives for a config it cannot update
//! dynamically.

use std::collections::HashSet;

use kafka_protocol::ResponseError;

use kafka_protocol::protocol::StrBytes;

use super::sb;
use crate::replica_manager::ReplicaManager;
use crate::topics::TopicError;

/// `ConfigResource.Type.TOPIC`.
pub const RESOURCE_TOPIC: i8 = 2;
/// `ConfigResource.Type.BROKER`.
pub const RESOURCE_BROKER: i8 = 4;

/// What an alter request's resource names.
pub enum AlterTarget {
    /// A topic, by name.
    Topic(String),
    /// This broker (or the cluster-wide broker defaults).
    Broker,
}

/// Checks a BROKER resource's name as Kafka does: empty, or this broker's id read as
/// Java's `Integer.parseInt` reads it (so `01` is broker 1). `describe` picks Kafka's
/// wording for DescribeConfigs, whose messages differ from the alter APIs'.
pub fn check_broker_name(name: &str, rm: &ReplicaManager, describe: bool) -> Result<(), String> {
    if name.is_empty() {
        return Ok(());
    }
    let broker_id = rm.config.broker_id;
    match name.parse::<i32>() {
        Ok(id) if id == broker_id => Ok(()),
        Ok(_) if describe => Err(format!(
            "Unexpected broker id, expected {broker_id} or empty string, but received {name}"
        )),
        Ok(_) => Err(format!(
            "Unexpected broker id, expected {broker_id}, but received {name}"
        )),
        Err(_) if describe => Err(format!("Broker id must be an integer, but it is: {name}")),
        Err(_) => Err(format!("Node id must be an integer, but it is: {name}")),
    }
}

/// What an alter request's resource names, or Kafka's INVALID_REQUEST for it.
pub fn alter_target(
    resource_type: i8,
    name: &str,
    rm: &ReplicaManager,
) -> Result<AlterTarget, TopicError> {
    let bad = |message: String| TopicError::new(ResponseError::InvalidRequest, message);
    match resource_type {
        RESOURCE_TOPIC if name.is_empty() => {
            Err(bad("Default topic resources are not allowed.".into()))
        }
        RESOURCE_TOPIC => Ok(AlterTarget::Topic(name.to_string())),
        RESOURCE_BROKER => check_broker_name(name, rm, false)
            .map(|()| AlterTarget::Broker)
            .map_err(bad),
        other => Err(bad(format!("Unknown resource type {other}"))),
    }
}

/// Kafka's answer to altering broker configs `names`: none can change while the broker
/// runs. Naming none changes nothing, which succeeds.
pub fn refuse_broker_alter<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), TopicError> {
    let names: Vec<&str> = names.collect();
    if names.is_empty() {
        return Ok(());
    }
    Err(TopicError::new(
        ResponseError::InvalidRequest,
        format!(
            "Cannot update these configs dynamically: [{}]",
            names.join(", ")
        ),
    ))
}

/// The outcome of each resource of an alter request, in order: a resource named more
/// than once (its type and name) is INVALID_REQUEST, every time it appears, and nothing of
/// it changes, as Kafka answers; any other is what `alter` makes of it. `key` names a
/// resource.
pub fn alter_each<'r, R>(
    resources: &'r [R],
    key: impl Fn(&'r R) -> (i8, &'r str),
    alter: impl Fn(&'r R) -> Result<(), TopicError>,
) -> impl Iterator<Item = (&'r R, Result<(), TopicError>)> {
    let mut seen = HashSet::new();
    let mut repeated = HashSet::new();
    for resource in resources {
        if !seen.insert(key(resource)) {
            repeated.insert(key(resource));
        }
    }
    resources.iter().map(move |resource| {
        let outcome = if repeated.contains(&key(resource)) {
            Err(TopicError::new(
                ResponseError::InvalidRequest,
                "Each resource must appear at most once.",
            ))
        } else {
            alter(resource)
        };
        (resource, outcome)
    })
}

/// The response entries of an alter request: AlterConfigs and IncrementalAlterConfigs
/// name their request and response entries alike, with the same fields, under types of
/// their own, so one macro answers both. `$alter` makes one resource's outcome.
macro_rules! alter_responses {
    ($response:ty, $resources:expr, $alter:expr) => {
        $crate::handlers::config_resource::alter_each(
            $resources,
            |r| (r.resource_type, r.resource_name.as_str()),
            $alter,
        )
        .map(|(resource, outcome)| {
            let (code, message) = $crate::handlers::config_resource::error_fields(outcome);
            <$response>::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone())
                .with_error_code(code)
                .with_error_message(message)
        })
        .collect()
    };
}
pub(crate) use alter_responses;

/// A resource's `error_code` and `error_message`, as both alter APIs answer them.
pub fn error_fields(outcome: Result<(), TopicError>) -> (i16, Option<StrBytes>) {
    match outcome {
        Ok(()) => (0, None),
        Err(e) => (e.error.code(), Some(sb(&e.message))),
    }
}
