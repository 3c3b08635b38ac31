//! What a scenario saw: named fields in the order they were seen, compared field by field.
//!
//! A scenario writes down what a Kafka user could tell apart — error codes by Kafka's
//! names, offsets, high watermarks, log starts, which partitions answered, whether an answer
//! came at once or after the wait it asked for — and nothing that differs between any two
//! runs (topic names carry a run id, times are rounded into "at once" or "waited").

use std::fmt::Display;

use kafka_protocol::ResponseError;

/// The fields one scenario saw on one broker.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Observation {
    fields: Vec<(String, String)>,
}

impl Observation {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `key = value`. A key seen twice keeps both, in order (a scenario that asks the
    /// same thing twice names the steps, so this is a scenario's mistake, but it stays visible).
    pub fn set(&mut self, key: impl Into<String>, value: impl Display) -> &mut Self {
        self.fields.push((key.into(), value.to_string()));
        self
    }

    /// Records an error code under `key`, by Kafka's name (`NONE` for 0).
    pub fn error(&mut self, key: impl Into<String>, code: i16) -> &mut Self {
        self.set(key, error_name(code))
    }

    pub fn fields(&self) -> &[(String, String)] {
        &self.fields
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// One field's two values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldDiff {
    pub key: String,
    pub kafka: Option<String>,
    pub ours: Option<String>,
}

/// The fields whose values differ, in the order Kafka's observation names them, then the
/// ones only ours has.
pub fn diff(kafka: &Observation, ours: &Observation) -> Vec<FieldDiff> {
    let mut out = Vec::new();
    for (key, value) in &kafka.fields {
        let other = ours.get(key);
        if other != Some(value.as_str()) {
            out.push(FieldDiff {
                key: key.clone(),
                kafka: Some(value.clone()),
                ours: other.map(str::to_owned),
            });
        }
    }
    for (key, value) in &ours.fields {
        if kafka.get(key).is_none() {
            out.push(FieldDiff {
                key: key.clone(),
                kafka: None,
                ours: Some(value.clone()),
            });
        }
    }
    out
}

/// Kafka's name for an error code: `NONE`, `NOT_LEADER_OR_FOLLOWER`, ... (the protocol
/// guide's spelling), or `ERROR_<code>` for a code this build does not know.
pub fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None => "NONE".to_owned(),
        Some(ResponseError::Unknown(code)) => format!("ERROR_{code}"),
        Some(known) => upper_snake(&known.to_string()),
    }
}

/// `NotEnoughReplicasAfterAppend` -> `NOT_ENOUGH_REPLICAS_AFTER_APPEND`.
fn upper_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_read_as_kafkas_names() {
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(error_name(20), "NOT_ENOUGH_REPLICAS_AFTER_APPEND");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(9999), "ERROR_9999");
    }

    #[test]
    fn a_diff_names_changed_missing_and_extra_fields() {
        let mut kafka = Observation::new();
        kafka.set("error", "NONE").set("offset", 3).set("hw", 4);
        let mut ours = Observation::new();
        ours.set("error", "NONE").set("offset", 2).set("extra", 1);
        let d = diff(&kafka, &ours);
        let keys: Vec<_> = d.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(keys, ["offset", "hw", "extra"]);
        assert_eq!(d[1].ours, None);
        assert_eq!(d[2].kafka, None);
        assert!(diff(&kafka, &kafka.clone()).is_empty());
    }
}
