//! What IncrementalAlterConfigs and AlterConfigs do to a topic's override set, checked
//! as Kafka checks them.
//!
//! Kafka's broker checks a request's shape first (a key given twice, a null value: the
//! whole resource is INVALID_REQUEST) and then the controller computes the new overrides
//! and validates every value (INVALID_CONFIG, nothing applied if one fails). The same
//! two steps here: [`check_incremental`] / [`check_replacement`] for the shape,
//! [`incremental`] for the new override set, and [`super::TopicConfig::resolve`] for the
//! values.
//!
//! * SET puts a value, DELETE removes the override (an unknown or unset name is fine).
//! * APPEND and SUBTRACT add items to or remove items from a LIST config's current
//!   value (the topic's, else its default: APPEND `compact` to the default `delete` is
//!   `delete,compact`); on any other type they are INVALID_CONFIG.
//! * AlterConfigs (the legacy API) replaces the whole override set with what it lists.

use kafka_protocol::ResponseError;

use super::values::list;
use super::{invalid, topic_config_def, ConfigType, TopicConfig};
use crate::topics::TopicError;

/// One IncrementalAlterConfigs operation (Kafka's `AlterConfigOp.OpType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlterOp {
    /// `SET` (0).
    Set,
    /// `DELETE` (1).
    Delete,
    /// `APPEND` (2).
    Append,
    /// `SUBTRACT` (3).
    Subtract,
}

impl AlterOp {
    /// The operation a wire code names.
    pub fn from_code(code: i8) -> Option<AlterOp> {
        match code {
            0 => Some(AlterOp::Set),
            1 => Some(AlterOp::Delete),
            2 => Some(AlterOp::Append),
            3 => Some(AlterOp::Subtract),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            AlterOp::Set => "SET",
            AlterOp::Delete => "DELETE",
            AlterOp::Append => "APPEND",
            AlterOp::Subtract => "SUBTRACT",
        }
    }
}

/// One config an IncrementalAlterConfigs resource names.
#[derive(Debug, Clone)]
pub struct Alteration {
    /// Config name.
    pub name: String,
    /// The wire's operation code.
    pub op: i8,
    /// The value (ignored by DELETE).
    pub value: Option<String>,
}

fn bad_request(message: impl Into<String>) -> TopicError {
    TopicError::new(ResponseError::InvalidRequest, message)
}

/// The shape checks of one IncrementalAlterConfigs resource: known operations, no key
/// twice, a value for every operation but DELETE. Each failure is INVALID_REQUEST.
pub fn check_incremental(
    alterations: &[Alteration],
) -> Result<Vec<(AlterOp, &Alteration)>, TopicError> {
    check_keys(alterations.iter().map(|a| a.name.as_str()))?;
    alterations
        .iter()
        .map(|a| {
            let op = AlterOp::from_code(a.op)
                .ok_or_else(|| bad_request(format!("Unknown config operation {}", a.op)))?;
            if op != AlterOp::Delete && a.value.is_none() {
                return Err(bad_request(format!(
                    "Null value not supported for : {}",
                    a.name
                )));
            }
            Ok((op, a))
        })
        .collect()
}

/// The shape checks of one AlterConfigs resource: no key twice, no null value
/// (INVALID_REQUEST); returns the new override set, whose names and values
/// [`TopicConfig::resolve`] checks.
pub fn check_replacement(
    set: &[(String, Option<String>)],
) -> Result<Vec<(String, String)>, TopicError> {
    check_keys(set.iter().map(|(name, _)| name.as_str()))?;
    set.iter()
        .map(|(name, value)| match value {
            Some(v) => Ok((name.clone(), v.clone())),
            None => Err(bad_request(format!(
                "Null value not supported for : {name}"
            ))),
        })
        .collect()
}

fn check_keys<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), TopicError> {
    // A set, not a list: a hostile request may name millions of keys.
    let mut seen = std::collections::HashSet::new();
    for name in names {
        if !seen.insert(name) {
            return Err(bad_request("Error due to duplicate config keys"));
        }
    }
    Ok(())
}

/// The override set `ops` (already shape-checked) make of `current`'s. Unknown names
/// (except for DELETE) and APPEND or SUBTRACT on a config that is not a LIST are
/// INVALID_CONFIG; values are checked when the result is resolved.
pub fn incremental(
    current: &TopicConfig,
    ops: &[(AlterOp, &Alteration)],
) -> Result<Vec<(String, String)>, TopicError> {
    let mut overrides = current.overrides().to_vec();
    for (op, a) in ops {
        let name = a.name.as_str();
        let value = a.value.as_deref().unwrap_or_default();
        let def = topic_config_def(name);
        if *op == AlterOp::Delete {
            overrides.retain(|(n, _)| n != name);
            continue;
        }
        let Some(def) = def else {
            return Err(invalid(format!("Unknown topic config name: {name}")));
        };
        let new_value = match op {
            AlterOp::Set => value.to_string(),
            _ if def.config_type != ConfigType::List => {
                return Err(invalid(format!(
                    "Can't {} to key {name} because its type is not LIST.",
                    op.name()
                )))
            }
            _ => {
                let now = overrides
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.clone())
                    .or_else(|| current.entry(name).map(|e| e.value.clone()))
                    .unwrap_or_default();
                let given = list(value);
                if *op == AlterOp::Append {
                    // `list` drops the repeats the appended items bring.
                    list(&format!("{now},{}", given.join(","))).join(",")
                } else {
                    let given: std::collections::HashSet<&str> = given.into_iter().collect();
                    let mut items = list(&now);
                    items.retain(|item| !given.contains(item));
                    items.join(",")
                }
            }
        };
        match overrides.iter_mut().find(|(n, _)| n == name) {
            Some(entry) => entry.1 = new_value,
            None => overrides.push((name.to_string(), new_value)),
        }
    }
    Ok(overrides)
}
