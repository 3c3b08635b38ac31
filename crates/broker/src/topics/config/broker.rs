//! A broker's configs, as DescribeConfigs reports a BROKER resource: every setting of
//! [`BrokerConfig`] under its Kafka name. This broker has no dynamic broker configs (its
//! settings come from its file and flags, once), so every one is read-only, which is
//! what Kafka answers for a broker config it cannot update dynamically; the source is
//! STATIC_BROKER_CONFIG for a setting that differs from the built-in default, else
//! DEFAULT_CONFIG, and the synonyms list both levels, as Kafka's do.

use crate::config::BrokerConfig;

use super::{ConfigEntry, ConfigSource, ConfigSynonym, ConfigType};

/// Settings the configuration file names differently from Kafka: (ours, Kafka's).
const KAFKA_NAMES: &[(&str, &str)] = &[("retention.bytes", "log.retention.bytes")];

const DOC: &str = "Set by the broker's configuration file or flags when it starts; this \
                   broker has no dynamic broker configs.";

/// The settings as (name, value, type), `admin.token` as a PASSWORD.
fn settings(config: &BrokerConfig) -> Vec<(String, String, ConfigType)> {
    let Ok(serde_json::Value::Object(settings)) = serde_json::to_value(config) else {
        return Vec::new();
    };
    settings
        .into_iter()
        .map(|(name, value)| {
            let config_type = match &value {
                _ if name == "admin.token" => ConfigType::Password,
                serde_json::Value::Bool(_) => ConfigType::Boolean,
                serde_json::Value::Number(n)
                    if n.as_i64().is_some_and(|n| i32::try_from(n).is_ok()) =>
                {
                    ConfigType::Int
                }
                serde_json::Value::Number(_) => ConfigType::Long,
                _ => ConfigType::String,
            };
            let value = match value {
                serde_json::Value::String(s) => s,
                serde_json::Value::Null => String::new(),
                other => other.to_string(),
            };
            let name = KAFKA_NAMES
                .iter()
                .find(|(ours, _)| *ours == name)
                .map_or(name, |(_, kafka)| (*kafka).to_string());
            (name, value, config_type)
        })
        .collect()
}

/// Every setting under its Kafka name, as DescribeConfigs reports a broker's
/// configuration (`admin.token` is marked sensitive; the handler withholds its value).
pub fn describe_broker(config: &BrokerConfig) -> Vec<ConfigEntry> {
    let defaults = settings(&BrokerConfig::default());
    settings(config)
        .into_iter()
        .map(|(name, value, config_type)| {
            let default = defaults
                .iter()
                .find(|(n, _, _)| *n == name)
                .map(|(_, v, _)| v.clone());
            let source = if default.as_deref() == Some(value.as_str()) {
                ConfigSource::Default
            } else {
                ConfigSource::StaticBroker
            };
            let mut synonyms = Vec::new();
            if source == ConfigSource::StaticBroker {
                synonyms.push(ConfigSynonym {
                    name: name.clone(),
                    value: value.clone(),
                    source,
                });
            }
            if let Some(default) = default {
                synonyms.push(ConfigSynonym {
                    name: name.clone(),
                    value: default,
                    source: ConfigSource::Default,
                });
            }
            ConfigEntry {
                name,
                value,
                source,
                config_type,
                read_only: true,
                doc: DOC,
                synonyms,
            }
        })
        .collect()
}
