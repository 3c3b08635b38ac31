//! Topic configs: one typed table says which per-topic settings exist, their Kafka type,
//! where their default comes from, how a value is checked, and what they mean.
//!
//! Kafka keeps this in `LogConfig`'s `ConfigDef`. Three places read it here: auto-creation
//! and CreateTopics (resolve a topic's values from what the client set and the broker's
//! defaults), CreateTopics v5+ (echo the effective values) and DescribeConfigs (list them
//! with their source, type and whether they can be set). Each config is named once, below.

use kafka_protocol::ResponseError;
use replog::LogConfig;

use crate::config::BrokerConfig;

use super::TopicError;

/// `min.insync.replicas`.
pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";
/// `retention.bytes`.
pub const RETENTION_BYTES: &str = "retention.bytes";
/// `max.message.bytes`.
pub const MAX_MESSAGE_BYTES: &str = "max.message.bytes";
/// `cleanup.policy`.
pub const CLEANUP_POLICY: &str = "cleanup.policy";
/// `unclean.leader.election.enable`.
pub const UNCLEAN_LEADER_ELECTION_ENABLE: &str = "unclean.leader.election.enable";
/// `message.timestamp.type`.
pub const MESSAGE_TIMESTAMP_TYPE: &str = "message.timestamp.type";

/// Kafka's `ConfigType` codes (DescribeConfigs v3+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i8)]
pub enum ConfigType {
    /// `BOOLEAN`.
    Boolean = 1,
    /// `STRING`.
    String = 2,
    /// `INT`.
    Int = 3,
    /// `LONG`.
    Long = 5,
    /// `LIST`.
    List = 7,
    /// `PASSWORD`.
    Password = 9,
}

/// Kafka's `ConfigSource` codes, as DescribeConfigs (v1+) and CreateTopics (v5+) report
/// where a value comes from. Clients map them to names, and some (kafka-python's admin
/// client) refuse a response with a code they do not know, such as the field's default -1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i8)]
pub enum ConfigSource {
    /// `DYNAMIC_TOPIC_CONFIG`: set for this topic.
    DynamicTopic = 1,
    /// `STATIC_BROKER_CONFIG`: the broker's configuration.
    StaticBroker = 4,
    /// `DEFAULT_CONFIG`: Kafka's built-in default.
    Default = 5,
}

/// Where a config's value comes from when a topic does not set it.
#[derive(Clone, Copy)]
enum Fallback {
    /// The broker's setting of the same meaning (`min.insync.replicas`,
    /// `message.max.bytes` for `max.message.bytes`, ...).
    Broker(fn(&BrokerConfig) -> String),
    /// Kafka's built-in default, which this broker does not let you change.
    Kafka(&'static str),
}

/// Checks a value a client sets and returns it in canonical form, or says what is wrong.
type Parser = fn(&str) -> Result<String, String>;

/// One per-topic config.
pub struct TopicConfigDef {
    /// Kafka's name.
    pub name: &'static str,
    /// Kafka's type.
    pub config_type: ConfigType,
    /// What it does here.
    pub doc: &'static str,
    fallback: Fallback,
    /// `None` if the config cannot be set on this broker.
    parse: Option<Parser>,
}

impl TopicConfigDef {
    /// Whether CreateTopics may set it.
    pub fn settable(&self) -> bool {
        self.parse.is_some()
    }
}

fn integer_at_least(min: i64) -> impl Fn(&str) -> Result<String, String> {
    move |value| match value.trim().parse::<i64>() {
        Ok(v) if v >= min => Ok(v.to_string()),
        Ok(v) => Err(format!("must be at least {min}, got {v}")),
        Err(_) => Err(format!("must be an integer, got {value:?}")),
    }
}

fn int_at_least_1(value: &str) -> Result<String, String> {
    integer_at_least(1)(value).and_then(fits_i32)
}

fn int_at_least_0(value: &str) -> Result<String, String> {
    integer_at_least(0)(value).and_then(fits_i32)
}

fn long_at_least_minus_1(value: &str) -> Result<String, String> {
    integer_at_least(-1)(value)
}

fn fits_i32(value: String) -> Result<String, String> {
    match value.parse::<i32>() {
        Ok(_) => Ok(value),
        Err(_) => Err(format!("{value} does not fit in an INT")),
    }
}

fn boolean(value: &str) -> Result<String, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok("true".into()),
        "false" => Ok("false".into()),
        _ => Err(format!("must be true or false, got {value:?}")),
    }
}

fn cleanup_policy(value: &str) -> Result<String, String> {
    let mut policies: Vec<&str> = value.split(',').map(str::trim).collect();
    policies.sort_unstable();
    policies.dedup();
    if policies.iter().all(|p| *p == "delete" || *p == "compact") {
        Ok(policies.join(","))
    } else {
        Err(format!("must be delete, compact or both, got {value:?}"))
    }
}

/// Every topic config this broker knows, in DescribeConfigs order.
pub static TOPIC_CONFIGS: &[TopicConfigDef] = &[
    TopicConfigDef {
        name: MIN_INSYNC_REPLICAS,
        config_type: ConfigType::Int,
        doc: "Replicas (leader included) that must be in the ISR for an acks=all produce to be \
              accepted and for the high watermark to advance; the replication factor caps it.",
        fallback: Fallback::Broker(|b| b.min_insync_replicas.to_string()),
        parse: Some(int_at_least_1),
    },
    TopicConfigDef {
        name: RETENTION_BYTES,
        config_type: ConfigType::Long,
        doc: "Bytes a partition may hold before its oldest batches below the high watermark \
              are deleted; -1 keeps everything (up to log.memory.max.bytes).",
        fallback: Fallback::Broker(|b| b.retention_bytes.to_string()),
        parse: Some(long_at_least_minus_1),
    },
    TopicConfigDef {
        name: MAX_MESSAGE_BYTES,
        config_type: ConfigType::Int,
        doc: "The largest record batch a producer may append (MESSAGE_TOO_LARGE above it).",
        fallback: Fallback::Broker(|b| b.message_max_bytes.to_string()),
        parse: Some(int_at_least_0),
    },
    TopicConfigDef {
        name: CLEANUP_POLICY,
        config_type: ConfigType::List,
        doc: "Recorded and reported; this in-memory log deletes by retention.bytes only and \
              never compacts.",
        fallback: Fallback::Kafka("delete"),
        parse: Some(cleanup_policy),
    },
    TopicConfigDef {
        name: UNCLEAN_LEADER_ELECTION_ENABLE,
        config_type: ConfigType::Boolean,
        doc: "With several brokers: whether a partition whose in-sync replicas are all down \
              may elect another live replica, which loses what only the ISR held.",
        fallback: Fallback::Broker(|b| b.unclean_leader_election_enable.to_string()),
        parse: Some(boolean),
    },
    TopicConfigDef {
        name: MESSAGE_TIMESTAMP_TYPE,
        config_type: ConfigType::String,
        doc: "Batches keep the producer's timestamps.",
        fallback: Fallback::Kafka("CreateTime"),
        parse: None,
    },
];

/// One topic's value of one config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Kafka's name.
    pub name: String,
    /// The value, as Kafka prints it.
    pub value: String,
    /// Where it comes from.
    pub source: ConfigSource,
    /// Kafka's type.
    pub config_type: ConfigType,
    /// Whether it can be set (on CreateTopics).
    pub read_only: bool,
    /// What it does here.
    pub doc: &'static str,
}

/// Every setting under its Kafka name, as DescribeConfigs reports a broker's
/// configuration (`admin.token` is marked sensitive and its value withheld).
pub fn describe_broker(config: &BrokerConfig) -> Vec<ConfigEntry> {
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
            ConfigEntry {
                name,
                value,
                source: ConfigSource::StaticBroker,
                config_type,
                read_only: true,
                doc: "",
            }
        })
        .collect()
}

/// A topic's configs, resolved from what its creator set and the broker's defaults.
#[derive(Debug, Clone)]
pub struct TopicConfig {
    entries: Vec<ConfigEntry>,
}

impl TopicConfig {
    /// Resolves every config: the value `set` gives it, else its fallback. Unknown names,
    /// read-only configs, bad values and names given twice are INVALID_CONFIG.
    pub fn resolve(broker: &BrokerConfig, set: &[(String, String)]) -> Result<Self, TopicError> {
        let invalid = |message: String| TopicError::new(ResponseError::InvalidConfig, message);
        for (i, (name, _)) in set.iter().enumerate() {
            let Some(def) = TOPIC_CONFIGS.iter().find(|d| d.name == name) else {
                let settable: Vec<&str> = TOPIC_CONFIGS
                    .iter()
                    .filter(|d| d.settable())
                    .map(|d| d.name)
                    .collect();
                return Err(invalid(format!(
                    "unsupported topic config {name:?}; supported: {}",
                    settable.join(", ")
                )));
            };
            if !def.settable() {
                return Err(invalid(format!("{name} cannot be set on this broker")));
            }
            if set[..i].iter().any(|(earlier, _)| earlier == name) {
                return Err(invalid(format!("{name} is given more than once")));
            }
        }
        let entries = TOPIC_CONFIGS
            .iter()
            .map(|def| {
                let given = set.iter().find(|(name, _)| name == def.name);
                let (value, source) = match (given, def.parse) {
                    (Some((_, value)), Some(parse)) => (
                        parse(value).map_err(|why| {
                            invalid(format!("invalid value {value:?} for {}: {why}", def.name))
                        })?,
                        ConfigSource::DynamicTopic,
                    ),
                    _ => match def.fallback {
                        Fallback::Broker(read) => (read(broker), ConfigSource::StaticBroker),
                        Fallback::Kafka(value) => (value.to_string(), ConfigSource::Default),
                    },
                };
                Ok(ConfigEntry {
                    name: def.name.to_string(),
                    value,
                    source,
                    config_type: def.config_type,
                    read_only: !def.settable(),
                    doc: def.doc,
                })
            })
            .collect::<Result<Vec<_>, TopicError>>()?;
        Ok(TopicConfig { entries })
    }

    /// Every config with its value and source, in table order.
    pub fn entries(&self) -> &[ConfigEntry] {
        &self.entries
    }

    /// One config's entry.
    pub fn entry(&self, name: &str) -> Option<&ConfigEntry> {
        self.entries.iter().find(|e| e.name == name)
    }

    fn number(&self, name: &str) -> i64 {
        // Values were checked by `resolve` (or come from a validated broker config).
        self.entry(name)
            .and_then(|e| e.value.parse().ok())
            .unwrap_or_default()
    }

    /// `min.insync.replicas` as set (the partition caps it by the replication factor).
    pub fn min_insync_replicas(&self) -> i32 {
        i32::try_from(self.number(MIN_INSYNC_REPLICAS)).unwrap_or(i32::MAX)
    }

    /// `retention.bytes`.
    pub fn retention_bytes(&self) -> i64 {
        self.number(RETENTION_BYTES)
    }

    /// `max.message.bytes`.
    pub fn max_message_bytes(&self) -> usize {
        usize::try_from(self.number(MAX_MESSAGE_BYTES)).unwrap_or(0)
    }

    /// `unclean.leader.election.enable`.
    pub fn unclean_leader_election(&self) -> bool {
        self.entry(UNCLEAN_LEADER_ELECTION_ENABLE)
            .is_some_and(|e| e.value == "true")
    }

    /// The settings each of the topic's partition logs runs with.
    pub fn log_config(&self, broker: &BrokerConfig) -> LogConfig {
        LogConfig {
            replica_lag_time_max_ms: broker.replica_lag_time_max_ms,
            min_insync_replicas: usize::try_from(self.min_insync_replicas()).unwrap_or(1),
            retention_bytes: self.retention_bytes(),
            max_batch_bytes: self.max_message_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_come_from_the_broker_or_kafka_and_say_so() {
        let broker = BrokerConfig {
            min_insync_replicas: 3,
            ..BrokerConfig::default()
        };
        let config = TopicConfig::resolve(&broker, &[]).unwrap();
        assert_eq!(config.min_insync_replicas(), 3);
        let min_isr = config.entry(MIN_INSYNC_REPLICAS).unwrap();
        assert_eq!(min_isr.source, ConfigSource::StaticBroker);
        assert!(!min_isr.read_only);
        let ts = config.entry(MESSAGE_TIMESTAMP_TYPE).unwrap();
        assert_eq!(
            (ts.value.as_str(), ts.source),
            ("CreateTime", ConfigSource::Default)
        );
        assert!(ts.read_only);
        assert_eq!(config.entries().len(), TOPIC_CONFIGS.len());
    }

    #[test]
    fn the_broker_is_described_under_kafka_names_and_its_token_is_withheld() {
        let broker = BrokerConfig {
            admin_token: Some("s3cret".into()),
            ..BrokerConfig::default()
        };
        let entries = describe_broker(&broker);
        let find = |name: &str| entries.iter().find(|e| e.name == name).unwrap();
        let min_isr = find(MIN_INSYNC_REPLICAS);
        assert_eq!(
            (min_isr.value.as_str(), min_isr.config_type),
            ("2", ConfigType::Int)
        );
        assert_eq!(
            find("auto.create.topics.enable").config_type,
            ConfigType::Boolean
        );
        assert_eq!(find("listeners").value, "127.0.0.1:9092");
        assert_eq!(find("admin.token").config_type, ConfigType::Password);
        assert!(entries
            .iter()
            .all(|e| e.source == ConfigSource::StaticBroker && e.read_only));
        // The handler withholds PASSWORD values; make sure nothing else would leak it.
        assert!(entries
            .iter()
            .filter(|e| e.name != "admin.token")
            .all(|e| !e.value.contains("s3cret")));
    }

    #[test]
    fn values_set_by_the_creator_are_checked_and_marked_as_topic_configs() {
        let broker = BrokerConfig::default();
        let config = TopicConfig::resolve(
            &broker,
            &set(&[
                (MIN_INSYNC_REPLICAS, "1"),
                (RETENTION_BYTES, "4096"),
                (CLEANUP_POLICY, "delete,compact"),
            ]),
        )
        .unwrap();
        assert_eq!(config.min_insync_replicas(), 1);
        assert_eq!(config.retention_bytes(), 4096);
        let policy = config.entry(CLEANUP_POLICY).unwrap();
        assert_eq!(
            (policy.value.as_str(), policy.source),
            ("compact,delete", ConfigSource::DynamicTopic)
        );
        assert_eq!(config.log_config(&broker).min_insync_replicas, 1);

        for bad in [
            set(&[(MIN_INSYNC_REPLICAS, "0")]),
            set(&[(MIN_INSYNC_REPLICAS, "two")]),
            set(&[(MIN_INSYNC_REPLICAS, "99999999999")]),
            set(&[(RETENTION_BYTES, "-2")]),
            set(&[(CLEANUP_POLICY, "shred")]),
            set(&[(MESSAGE_TIMESTAMP_TYPE, "LogAppendTime")]),
            set(&[("segment.bytes", "1")]),
            set(&[(RETENTION_BYTES, "1"), (RETENTION_BYTES, "2")]),
        ] {
            let err = TopicConfig::resolve(&broker, &bad).unwrap_err();
            assert_eq!(err.error, ResponseError::InvalidConfig, "{bad:?}");
        }
    }
}
