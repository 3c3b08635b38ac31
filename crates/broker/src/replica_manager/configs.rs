//! Altering a topic's configs (IncrementalAlterConfigs, AlterConfigs), live.
//!
//! A topic is an immutable `Arc<Topic>` in each broker's registry, so an alter builds
//! the topic again with the new [`TopicConfig`] (same id, same partition handles) and
//! puts it in the registry's place, then hands each partition log its new settings:
//! `min.insync.replicas` and `max.message.bytes` count from the next produce, and
//! `retention.bytes` is enforced at once (Kafka's log manager would wait for its next
//! retention check, every `log.retention.check.interval.ms`). A lower
//! `min.insync.replicas` may let a held high watermark move, and the produces and
//! fetches it completes are woken as after any other change.
//!
//! With several brokers the cluster checks the new configs once and then applies them
//! on every broker ([`crate::cluster::ClusterLink::alter_topic_config`]), as Kafka's
//! controller writes one ConfigRecord that every broker replays.

use kafka_protocol::ResponseError;

use super::ReplicaManager;
use crate::request::Cause;
use crate::topics::{TopicConfig, TopicError};

impl ReplicaManager {
    /// Gives topic `name` the override set `new_overrides` makes of its current configs
    /// (the whole set: what is not in it returns to its default), checked and, unless
    /// `validate_only`, applied, on every broker of the cluster if there is one.
    /// UNKNOWN_TOPIC_OR_PARTITION for an unknown topic, INVALID_CONFIG for a bad name or
    /// value (nothing is applied).
    ///
    /// One alter at a time, across every broker of the process: reading the current
    /// configs, making the new set and applying it happen under one lock, so that two
    /// incremental alters of one topic, each changing another key, both land.
    pub fn alter_topic_config(
        &self,
        name: &str,
        new_overrides: impl FnOnce(&TopicConfig) -> Result<Vec<(String, String)>, TopicError>,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let _one_at_a_time = self.config_writes.lock();
        let topic = self.topic(name).ok_or_else(|| unknown_topic(name))?;
        let overrides = new_overrides(&topic.config)?;
        let config = self.check_topic_config(name, &overrides)?;
        if validate_only {
            return Ok(());
        }
        match self.cluster() {
            Some(cluster) => cluster.alter_topic_config(name, &overrides),
            None => self.apply_topic_config(name, config),
        }
    }

    /// The configs `overrides` would give topic `name` on this broker.
    pub fn check_topic_config(
        &self,
        name: &str,
        overrides: &[(String, String)],
    ) -> Result<TopicConfig, TopicError> {
        if self.topic(name).is_none() {
            return Err(unknown_topic(name));
        }
        TopicConfig::resolve(&self.config, overrides)
    }

    /// Gives topic `name` on this broker the (already checked) `config`: the registry's
    /// topic is replaced and every partition log takes the new settings now.
    pub fn apply_topic_config(&self, name: &str, config: TopicConfig) -> Result<(), TopicError> {
        let topic = self.topic(name).ok_or_else(|| unknown_topic(name))?;
        let log_config = config.log_config(&self.config);
        let topic = self.topics.replace(topic.with_config(config))?;
        for p in &topic.partitions {
            let change = self.update_partition(p, |log| log.set_config(log_config.clone()));
            self.complete_waiting(&p.tp, &change, Cause::Unknown);
        }
        tracing::info!(
            topic = %name,
            overrides = ?topic.config.overrides(),
            "altered topic configs"
        );
        Ok(())
    }
}

fn unknown_topic(name: &str) -> TopicError {
    TopicError::new(
        ResponseError::UnknownTopicOrPartition,
        format!("The topic '{name}' does not exist."),
    )
}
