//! Topic configs: one typed table says which per-topic settings exist, their Kafka type,
//! where their default comes from, how a value is checked, and what they mean here.
//!
//! Kafka keeps this in `LogConfig`'s `ConfigDef`. The table lists every config Kafka 4.4
//! lists for a topic (37; `message.downconversion.enable` is gone since Kafka 4.0), with
//! Kafka's types, defaults, bounds and broker synonyms. This in-memory broker acts on
//! four of them (`min.insync.replicas`, `retention.bytes`, `max.message.bytes`,
//! `unclean.leader.election.enable`); the others are checked as Kafka checks them,
//! stored, and reported, and their documentation says they have no effect here, so
//! tools that set them (Terraform, `kafka-configs`) round-trip them.
//!
//! Everything that reads or writes topic configs goes through here: auto-creation and
//! CreateTopics resolve a topic's values from what the client set and the broker's
//! defaults, CreateTopics v5+ echoes them, DescribeConfigs lists them with source, type,
//! documentation and synonyms, and IncrementalAlterConfigs / AlterConfigs compute a new
//! override set ([`alter`]) that [`TopicConfig::resolve`] checks again.

pub mod alter;
mod broker;
mod values;

pub use broker::describe_broker;

use kafka_protocol::ResponseError;
use replog::LogConfig;

use crate::config::BrokerConfig;

use super::TopicError;
use values::Check;

/// `min.insync.replicas`.
pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";
/// `retention.bytes`.
pub const RETENTION_BYTES: &str = "retention.bytes";
/// `retention.ms`.
pub const RETENTION_MS: &str = "retention.ms";
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
    /// `DOUBLE`.
    Double = 6,
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
    /// `STATIC_BROKER_CONFIG`: the broker's configuration file (or flags) set it to
    /// something other than the built-in default.
    StaticBroker = 4,
    /// `DEFAULT_CONFIG`: the built-in default.
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

/// One per-topic config.
pub struct TopicConfigDef {
    /// Kafka's name.
    pub name: &'static str,
    /// Kafka's type.
    pub config_type: ConfigType,
    /// What it does here.
    pub doc: &'static str,
    /// The broker config Kafka lists as its synonym (`log.retention.bytes` for
    /// `retention.bytes`), if Kafka lists one.
    pub synonym: Option<&'static str>,
    fallback: Fallback,
    check: Check,
}

/// Shorthand for the table's rows.
const fn def(
    name: &'static str,
    config_type: ConfigType,
    fallback: Fallback,
    synonym: Option<&'static str>,
    check: Check,
    doc: &'static str,
) -> TopicConfigDef {
    TopicConfigDef {
        name,
        config_type,
        doc,
        synonym,
        fallback,
        check,
    }
}

use ConfigType as T;
use Fallback::{Broker, Kafka};

const LONG_MAX: &str = "9223372036854775807";
const POLICIES: &[&str] = &["compact", "delete"];
const COMPRESSION: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];

/// Every topic config Kafka 4.4 has, in the order Kafka's `LogConfig` defines them
/// (DescribeConfigs answers in a `java.util.HashMap`'s order, and keys that share a
/// bucket come out in the order they went in: this one).
#[rustfmt::skip]
pub static TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def("segment.bytes", T::Int, Kafka("1073741824"), Some("log.segment.bytes"),
        Check::Int(1_048_576, i32::MAX as i64),
        "Has no effect here: the in-memory log is one list of batches, not segments."),
    def("segment.ms", T::Long, Kafka("604800000"), None, Check::Long(1),
        "Has no effect here: the in-memory log is one list of batches, not segments."),
    def("segment.jitter.ms", T::Long, Kafka("0"), None, Check::Long(0),
        "Has no effect here: the in-memory log is one list of batches, not segments."),
    def("segment.index.bytes", T::Int, Kafka("10485760"), Some("log.index.size.max.bytes"),
        Check::Int(4, i32::MAX as i64),
        "Has no effect here: the in-memory log needs no offset index."),
    def("flush.messages", T::Long, Kafka(LONG_MAX), Some("log.flush.interval.messages"),
        Check::Long(1),
        "Has no effect here: the log is in memory and never flushed to disk."),
    def("flush.ms", T::Long, Kafka(LONG_MAX), None, Check::Long(0),
        "Has no effect here: the log is in memory and never flushed to disk."),
    def(RETENTION_BYTES, T::Long, Broker(|b| b.retention_bytes.to_string()),
        Some("log.retention.bytes"), Check::Long(i64::MIN),
        "Bytes a partition may hold before its oldest batches below the high watermark are \
         deleted; negative keeps everything (up to log.memory.max.bytes). A change applies \
         at once (Kafka applies it on its next retention check)."),
    def(RETENTION_MS, T::Long, Kafka("604800000"), None, Check::Long(-1),
        "Has no effect here: batches are deleted by retention.bytes and \
         log.memory.max.bytes, never by age."),
    def(MAX_MESSAGE_BYTES, T::Int, Broker(|b| b.message_max_bytes.to_string()),
        Some("message.max.bytes"), Check::Int(0, i32::MAX as i64),
        "The largest record batch a producer may append (MESSAGE_TOO_LARGE above it); a \
         change applies to the next append."),
    def("index.interval.bytes", T::Int, Kafka("4096"), Some("log.index.interval.bytes"),
        Check::Int(0, i32::MAX as i64),
        "Has no effect here: the in-memory log needs no offset index."),
    def("delete.retention.ms", T::Long, Kafka("86400000"),
        Some("log.cleaner.delete.retention.ms"), Check::Long(0),
        "Has no effect here: there is no log cleaner, so tombstones are never removed by it."),
    def("min.compaction.lag.ms", T::Long, Kafka("0"), Some("log.cleaner.min.compaction.lag.ms"),
        Check::Long(0),
        "Has no effect here: the log is never compacted."),
    def("max.compaction.lag.ms", T::Long, Kafka(LONG_MAX),
        Some("log.cleaner.max.compaction.lag.ms"), Check::Long(1),
        "Has no effect here: the log is never compacted."),
    def("file.delete.delay.ms", T::Long, Kafka("60000"), Some("log.segment.delete.delay.ms"),
        Check::Long(0),
        "Has no effect here: the log is in memory and has no segment files."),
    def("min.cleanable.dirty.ratio", T::Double, Kafka("0.5"),
        Some("log.cleaner.min.cleanable.ratio"), Check::Ratio,
        "Has no effect here: the log is never compacted."),
    def(CLEANUP_POLICY, T::List, Kafka("delete"), Some("log.cleanup.policy"),
        Check::ListOf(POLICIES),
        "Recorded and reported; this in-memory log deletes by retention.bytes only and never \
         compacts, whatever the policy."),
    def(UNCLEAN_LEADER_ELECTION_ENABLE, T::Boolean,
        Broker(|b| b.unclean_leader_election_enable.to_string()),
        Some("unclean.leader.election.enable"), Check::Bool,
        "With several brokers: whether a partition whose in-sync replicas are all down may \
         elect another live replica, which loses what only the ISR held. Turning it on \
         elects such a leader at once."),
    def(MIN_INSYNC_REPLICAS, T::Int, Broker(|b| b.min_insync_replicas.to_string()),
        Some("min.insync.replicas"), Check::Int(1, i32::MAX as i64),
        "Replicas (leader included) that must be in the ISR for an acks=all produce to be \
         accepted (else NOT_ENOUGH_REPLICAS) and for the high watermark to advance; the \
         replication factor caps it. A change applies at once, on every broker."),
    def("compression.type", T::String, Kafka("producer"), Some("compression.type"),
        Check::OneOf(COMPRESSION),
        "Has no effect here: batches are stored as the producer compressed them (Kafka's \
         'producer')."),
    def("compression.gzip.level", T::Int, Kafka("-1"), Some("compression.gzip.level"),
        Check::GzipLevel,
        "Has no effect here: batches are stored as the producer compressed them."),
    def("compression.lz4.level", T::Int, Kafka("9"), Some("compression.lz4.level"),
        Check::Int(1, 17),
        "Has no effect here: batches are stored as the producer compressed them."),
    def("compression.zstd.level", T::Int, Kafka("3"), Some("compression.zstd.level"),
        Check::Int(-131_072, 22),
        "Has no effect here: batches are stored as the producer compressed them."),
    def("preallocate", T::Boolean, Kafka("false"), Some("log.preallocate"), Check::Bool,
        "Has no effect here: the log is in memory and has no segment files."),
    def(MESSAGE_TIMESTAMP_TYPE, T::String, Kafka("CreateTime"),
        Some("log.message.timestamp.type"), Check::OneOf(&["CreateTime", "LogAppendTime"]),
        "Has no effect here: batches keep the producer's timestamps (CreateTime)."),
    def("message.timestamp.before.max.ms", T::Long, Kafka(LONG_MAX),
        Some("log.message.timestamp.before.max.ms"), Check::Long(0),
        "Has no effect here: record timestamps are not checked."),
    def("message.timestamp.after.max.ms", T::Long, Kafka("3600000"),
        Some("log.message.timestamp.after.max.ms"), Check::Long(0),
        "Has no effect here: record timestamps are not checked."),
    def("leader.replication.throttled.replicas", T::List, Kafka(""), None, Check::Replicas,
        "Has no effect here: replication is not throttled."),
    def("follower.replication.throttled.replicas", T::List, Kafka(""), None, Check::Replicas,
        "Has no effect here: replication is not throttled."),
    def("remote.storage.enable", T::Boolean, Kafka("false"), None, Check::LocalOnly,
        "Tiered storage is off on this broker, as on a Kafka broker without \
         remote.log.storage.system.enable: only false is accepted."),
    def("local.retention.ms", T::Long, Kafka("-2"), Some("log.local.retention.ms"),
        Check::Long(-2),
        "Has no effect here: there is no tiered storage."),
    def("local.retention.bytes", T::Long, Kafka("-2"), Some("log.local.retention.bytes"),
        Check::Long(-2),
        "Has no effect here: there is no tiered storage."),
    def("remote.copy.lag.ms", T::Long, Kafka("0"), Some("log.remote.copy.lag.ms"),
        Check::Long(0),
        "Has no effect here: there is no tiered storage."),
    def("remote.copy.lag.bytes", T::Long, Kafka("-1"), Some("log.remote.copy.lag.bytes"),
        Check::Long(-1),
        "Has no effect here: there is no tiered storage."),
    def("remote.log.copy.disable", T::Boolean, Kafka("false"), None, Check::Bool,
        "Has no effect here: there is no tiered storage."),
    def("remote.log.delete.on.disable", T::Boolean, Kafka("false"), None, Check::Bool,
        "Has no effect here: there is no tiered storage."),
    def("max.decompressed.message.bytes", T::Int, Kafka("2147483639"),
        Some("max.decompressed.message.bytes"), Check::Int(0, i32::MAX as i64),
        "Has no effect here: batches are stored as received and never decompressed."),
    def("errors.deadletterqueue.group.enable", T::Boolean, Kafka("false"), None, Check::Bool,
        "Has no effect here: there are no share groups."),
];

/// A topic config by name.
pub fn topic_config_def(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// One value a config's synonyms list (DescribeConfigs v1+ with `include_synonyms`):
/// the topic's own setting, then the broker's, then the default, as Kafka lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigSynonym {
    /// The name at that level (`log.retention.bytes` for the broker's `retention.bytes`).
    pub name: String,
    /// Its value there.
    pub value: String,
    /// Which level.
    pub source: ConfigSource,
}

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
    /// Whether it cannot be altered.
    pub read_only: bool,
    /// What it does here.
    pub doc: &'static str,
    /// Where else a value could come from, most specific first.
    pub synonyms: Vec<ConfigSynonym>,
}

/// The Kafka error for a bad config, with Kafka's wording.
fn invalid(message: String) -> TopicError {
    TopicError::new(ResponseError::InvalidConfig, message)
}

/// A topic's configs, resolved from what its creator (or a later alter) set and the
/// broker's defaults.
#[derive(Debug, Clone)]
pub struct TopicConfig {
    /// The values set for the topic, checked and in canonical form, in table order.
    overrides: Vec<(String, String)>,
    entries: Vec<ConfigEntry>,
}

impl TopicConfig {
    /// Resolves every config: the value `set` gives it, else its fallback. Unknown names,
    /// bad values and names given twice are INVALID_CONFIG, worded as Kafka words them.
    pub fn resolve(broker: &BrokerConfig, set: &[(String, String)]) -> Result<Self, TopicError> {
        for (i, (name, _)) in set.iter().enumerate() {
            if topic_config_def(name).is_none() {
                return Err(invalid(format!("Unknown topic config name: {name}")));
            }
            if set[..i].iter().any(|(earlier, _)| earlier == name) {
                return Err(invalid(format!("{name} is given more than once")));
            }
        }
        let defaults = BrokerConfig::default();
        let mut overrides = Vec::new();
        let mut entries = Vec::with_capacity(TOPIC_CONFIGS.len());
        for def in TOPIC_CONFIGS {
            let given = set.iter().find(|(name, _)| name == def.name);
            let mut synonyms = Vec::new();
            let own = match given {
                Some((_, value)) => {
                    let value = def.check.check(value).map_err(|why| {
                        invalid(format!(
                            "Invalid value {value} for configuration {}: {why}",
                            def.name
                        ))
                    })?;
                    overrides.push((def.name.to_string(), value.clone()));
                    synonyms.push(ConfigSynonym {
                        name: def.name.to_string(),
                        value: value.clone(),
                        source: ConfigSource::DynamicTopic,
                    });
                    Some(value)
                }
                None => None,
            };
            let (fallback, fallback_source, default) = match def.fallback {
                Broker(read) => {
                    let (value, default) = (read(broker), read(&defaults));
                    let source = if value == default {
                        ConfigSource::Default
                    } else {
                        ConfigSource::StaticBroker
                    };
                    (value, source, default)
                }
                Kafka(value) => (value.to_string(), ConfigSource::Default, value.to_string()),
            };
            if let Some(synonym) = def.synonym {
                if fallback_source == ConfigSource::StaticBroker {
                    synonyms.push(ConfigSynonym {
                        name: synonym.to_string(),
                        value: fallback.clone(),
                        source: ConfigSource::StaticBroker,
                    });
                }
                synonyms.push(ConfigSynonym {
                    name: synonym.to_string(),
                    value: default,
                    source: ConfigSource::Default,
                });
            }
            let (value, source) = match own {
                Some(value) => (value, ConfigSource::DynamicTopic),
                None => (fallback, fallback_source),
            };
            entries.push(ConfigEntry {
                name: def.name.to_string(),
                value,
                source,
                config_type: def.config_type,
                read_only: false,
                doc: def.doc,
                synonyms,
            });
        }
        Ok(TopicConfig { overrides, entries })
    }

    /// The values set for this topic (its DYNAMIC_TOPIC_CONFIG entries), in table order.
    pub fn overrides(&self) -> &[(String, String)] {
        &self.overrides
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
mod tests;
