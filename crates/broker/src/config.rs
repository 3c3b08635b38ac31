//! Broker configuration.
//!
//! Settings carry Kafka's own names (`min.insync.replicas`, `replica.lag.time.max.ms`, ...)
//! so that what you learn here transfers to a real broker. The file is TOML with quoted
//! keys, one flat table, much like Kafka's `server.properties`:
//!
//! ```toml
//! "listeners" = "127.0.0.1:9092"
//! "min.insync.replicas" = 2
//! ```
//!
//! Every setting has a default (Kafka's, where Kafka has one), so an empty file — or no file
//! at all — gives a working broker. Command-line flags override the file.

use std::path::Path;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

/// Which clock drives the timing wheel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ClockMode {
    /// Monotonic wall time: timeouts fire on their own.
    #[default]
    System,
    /// Time stands still until someone advances it (tests, teaching).
    Manual,
}

/// All broker settings. See `config/broker.toml` for the documented defaults.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BrokerConfig {
    /// Address the Kafka listener binds to.
    #[serde(rename = "listeners")]
    pub listen: String,
    /// Host name put in Metadata responses; defaults to the listener's host.
    #[serde(rename = "advertised.host")]
    pub advertised_host: Option<String>,
    /// The leader's broker id. Followers are the replica ids after it.
    #[serde(rename = "broker.id")]
    pub broker_id: i32,
    /// Largest request frame accepted; larger frames close the connection.
    #[serde(rename = "socket.request.max.bytes")]
    pub socket_request_max_bytes: usize,
    /// Largest fetch response (Kafka's `fetch.max.bytes`); a request's `max_bytes` is capped
    /// to it (the first batch is still returned whole, KIP-74).
    #[serde(rename = "fetch.max.bytes")]
    pub fetch_max_bytes: usize,
    /// Requests one connection may have in flight before the broker stops reading it.
    #[serde(rename = "queued.max.requests.per.connection")]
    pub max_in_flight_per_connection: usize,
    /// Create unknown topics on Metadata and Produce.
    #[serde(rename = "auto.create.topics.enable")]
    pub auto_create_topics: bool,
    /// Cap on partitions across all topics, so topic creation cannot exhaust memory.
    #[serde(rename = "max.partitions")]
    pub max_partitions: usize,
    /// Partitions of an auto-created topic.
    #[serde(rename = "num.partitions")]
    pub num_partitions: i32,
    /// Replicas of an auto-created topic (leader included).
    #[serde(rename = "default.replication.factor")]
    pub default_replication_factor: i16,
    /// How many replica ids exist besides the leader (the simulated followers).
    #[serde(rename = "follower.count")]
    pub follower_count: i32,
    /// Minimum ISR size for an `acks=all` produce to be accepted (and for the HW to move).
    #[serde(rename = "min.insync.replicas")]
    pub min_insync_replicas: i32,
    /// Whether a partition whose ISR is all dead may elect a live replica outside it,
    /// losing what only the ISR held (Kafka's default: no; the partition stays offline).
    #[serde(rename = "unclean.leader.election.enable")]
    pub unclean_leader_election_enable: bool,
    /// A follower that has not caught up for this long leaves the ISR.
    #[serde(rename = "replica.lag.time.max.ms")]
    pub replica_lag_time_max_ms: u64,
    /// Per-partition retention by size; -1 keeps everything (subject to the memory cap).
    #[serde(rename = "retention.bytes")]
    pub retention_bytes: i64,
    /// Broker-wide cap on bytes held in partition logs.
    #[serde(rename = "log.memory.max.bytes")]
    pub log_memory_max_bytes: usize,
    /// Largest record batch accepted.
    #[serde(rename = "message.max.bytes")]
    pub message_max_bytes: usize,
    /// Timing wheel: tick of the finest level.
    #[serde(rename = "timer.tick.ms")]
    pub timer_tick_ms: u64,
    /// Timing wheel: buckets per level.
    #[serde(rename = "timer.wheel.size")]
    pub timer_wheel_size: usize,
    /// Purge completed operations from watcher lists after this many.
    #[serde(rename = "purgatory.purge.interval.requests")]
    pub purge_interval_requests: usize,
    /// `system` or `manual`.
    #[serde(rename = "clock")]
    pub clock: ClockMode,
    /// Run the simulated followers inside the broker process.
    #[serde(rename = "followers.embedded")]
    pub embedded_followers: bool,
    /// Embedded followers' long-poll wait (their Fetch `max_wait_ms`).
    #[serde(rename = "follower.fetch.max.wait.ms")]
    pub follower_fetch_max_wait_ms: i32,
    /// Embedded followers' extra delay before each fetch (a slow follower).
    #[serde(rename = "follower.fetch.delay.ms")]
    pub follower_fetch_delay_ms: u64,
    /// Serve the admin HTTP API.
    #[serde(rename = "admin.enable")]
    pub admin_enable: bool,
    /// Admin HTTP listener address.
    #[serde(rename = "admin.listeners")]
    pub admin_listen: String,
    /// If set, state-changing admin calls require `Authorization: Bearer <token>` (and are
    /// then allowed from any address); if unset they are loopback-only.
    #[serde(rename = "admin.token")]
    pub admin_token: Option<String>,

    // --- Group coordinator (Kafka's names and defaults, except where marked "ours") ---
    /// Smallest `session.timeout.ms` a JoinGroup may ask for (else INVALID_SESSION_TIMEOUT).
    #[serde(rename = "group.min.session.timeout.ms")]
    pub group_min_session_timeout_ms: i32,
    /// Largest `session.timeout.ms` a JoinGroup may ask for (else INVALID_SESSION_TIMEOUT).
    #[serde(rename = "group.max.session.timeout.ms")]
    pub group_max_session_timeout_ms: i32,
    /// How long an Empty group waits for more members before its first rebalance completes
    /// (the `InitialDelayedJoin`), re-armed while members keep arriving.
    #[serde(rename = "group.initial.rebalance.delay.ms")]
    pub group_initial_rebalance_delay_ms: i32,
    /// Most members one group may have (GROUP_MAX_SIZE_REACHED past it).
    #[serde(rename = "group.max.size")]
    pub group_max_size: i32,
    /// Partitions of `__consumer_offsets`; a group lives in partition
    /// `abs(groupId.hashCode) % offsets.topic.num.partitions`.
    #[serde(rename = "offsets.topic.num.partitions")]
    pub offsets_topic_num_partitions: i32,
    /// Replicas of `__consumer_offsets` (capped by the replicas this broker has).
    #[serde(rename = "offsets.topic.replication.factor")]
    pub offsets_topic_replication_factor: i16,
    /// How long an offset commit or a group metadata write waits for replication (acks=-1).
    #[serde(rename = "offsets.commit.timeout.ms")]
    pub offsets_commit_timeout_ms: i32,
    /// Partitions of `__transaction_state`, where the transaction coordinator keeps each
    /// transactional id's state (the id's partition: its Java hash modulo this).
    #[serde(rename = "transaction.state.log.num.partitions")]
    pub transaction_state_log_num_partitions: i32,
    /// Replicas of `__transaction_state` (capped by the replicas this broker has).
    #[serde(rename = "transaction.state.log.replication.factor")]
    pub transaction_state_log_replication_factor: i16,
    /// The longest `transaction.timeout.ms` a transactional producer may ask for
    /// (INVALID_TRANSACTION_TIMEOUT past it).
    #[serde(rename = "transaction.max.timeout.ms")]
    pub transaction_max_timeout_ms: i32,
    /// How often the transaction coordinator looks for transactions past their timeout,
    /// to abort them.
    #[serde(rename = "transaction.abort.timed.out.transaction.cleanup.interval.ms")]
    pub transaction_abort_timed_out_transaction_cleanup_interval_ms: i32,
    /// Ours, not Kafka's: broker-wide cap on transactional ids, so transaction state
    /// cannot exhaust memory.
    #[serde(rename = "transaction.coordinator.max.transactional.ids")]
    pub transaction_coordinator_max_transactional_ids: usize,
    /// Longest metadata string an offset commit may carry (OFFSET_METADATA_TOO_LARGE).
    #[serde(rename = "offset.metadata.max.bytes")]
    pub offset_metadata_max_bytes: usize,
    /// Ours, not Kafka's: broker-wide cap on groups, so group state cannot exhaust memory.
    #[serde(rename = "group.coordinator.max.groups")]
    pub group_coordinator_max_groups: usize,
    /// Ours, not Kafka's: broker-wide cap on members (pending ones included) of all groups.
    #[serde(rename = "group.coordinator.max.members")]
    pub group_coordinator_max_members: usize,
    /// Ours, not Kafka's: broker-wide cap on committed offsets held in the offsets cache.
    #[serde(rename = "group.coordinator.max.committed.offsets")]
    pub group_coordinator_max_committed_offsets: usize,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            listen: "127.0.0.1:9092".to_string(),
            advertised_host: None,
            broker_id: 1,
            socket_request_max_bytes: 104_857_600,
            fetch_max_bytes: 57_671_680,
            max_in_flight_per_connection: 100,
            auto_create_topics: true,
            max_partitions: 10_000,
            num_partitions: 1,
            default_replication_factor: 3,
            follower_count: 2,
            min_insync_replicas: 2,
            unclean_leader_election_enable: false,
            replica_lag_time_max_ms: 30_000,
            retention_bytes: -1,
            log_memory_max_bytes: 1 << 30,
            message_max_bytes: 1_048_588,
            timer_tick_ms: 1,
            timer_wheel_size: 20,
            purge_interval_requests: 1000,
            clock: ClockMode::System,
            embedded_followers: true,
            follower_fetch_max_wait_ms: 500,
            follower_fetch_delay_ms: 0,
            admin_enable: true,
            admin_listen: "127.0.0.1:8080".to_string(),
            admin_token: None,
            group_min_session_timeout_ms: 6_000,
            group_max_session_timeout_ms: 1_800_000,
            group_initial_rebalance_delay_ms: 3_000,
            group_max_size: i32::MAX,
            offsets_topic_num_partitions: 50,
            offsets_topic_replication_factor: 3,
            offsets_commit_timeout_ms: 5_000,
            transaction_state_log_num_partitions: 50,
            transaction_state_log_replication_factor: 3,
            transaction_max_timeout_ms: 900_000,
            transaction_abort_timed_out_transaction_cleanup_interval_ms: 10_000,
            transaction_coordinator_max_transactional_ids: 100_000,
            offset_metadata_max_bytes: 4096,
            group_coordinator_max_groups: 10_000,
            group_coordinator_max_members: 100_000,
            group_coordinator_max_committed_offsets: 1_000_000,
        }
    }
}

impl BrokerConfig {
    /// Reads a TOML file. A missing file is an error; use `Default` for no file.
    pub fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config file {}", path.display()))?;
        Self::from_toml(&text).with_context(|| format!("in config file {}", path.display()))
    }

    /// Parses TOML text and validates it.
    pub fn from_toml(text: &str) -> anyhow::Result<Self> {
        let config: BrokerConfig = toml::from_str(text)?;
        config.validate()?;
        Ok(config)
    }

    /// Rejects settings no broker could run with.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.num_partitions < 1 {
            bail!("num.partitions must be >= 1");
        }
        if self.follower_count < 0 {
            bail!("follower.count must be >= 0");
        }
        if self.default_replication_factor < 1
            || i32::from(self.default_replication_factor) > self.follower_count + 1
        {
            bail!(
                "default.replication.factor must be between 1 and follower.count + 1 ({})",
                self.follower_count + 1
            );
        }
        if self.min_insync_replicas < 1 {
            bail!("min.insync.replicas must be >= 1");
        }
        if self.timer_tick_ms < 1 || self.timer_wheel_size < 2 {
            bail!("timer.tick.ms must be >= 1 and timer.wheel.size >= 2");
        }
        if self.socket_request_max_bytes < 1024 {
            bail!("socket.request.max.bytes must be >= 1024");
        }
        if self.follower_fetch_max_wait_ms < 0 {
            bail!("follower.fetch.max.wait.ms must be >= 0");
        }
        if self.admin_token.as_deref() == Some("") {
            bail!("admin.token must not be empty (leave it unset for loopback-only admin calls)");
        }
        if self.max_in_flight_per_connection < 1 {
            bail!("queued.max.requests.per.connection must be >= 1");
        }
        if self.group_min_session_timeout_ms < 0
            || self.group_max_session_timeout_ms < self.group_min_session_timeout_ms
        {
            bail!("group.max.session.timeout.ms must be >= group.min.session.timeout.ms >= 0");
        }
        if self.group_initial_rebalance_delay_ms < 0 || self.offsets_commit_timeout_ms < 0 {
            bail!("group.initial.rebalance.delay.ms and offsets.commit.timeout.ms must be >= 0");
        }
        if !(1..=crate::topics::MAX_PARTITIONS_PER_TOPIC)
            .contains(&self.transaction_state_log_num_partitions)
            || self.transaction_state_log_replication_factor < 1
        {
            bail!("transaction.state.log.num.partitions must be 1 to 10000 and transaction.state.log.replication.factor at least 1");
        }
        if self.transaction_max_timeout_ms < 1
            || self.transaction_abort_timed_out_transaction_cleanup_interval_ms < 1
        {
            bail!("transaction.max.timeout.ms and transaction.abort.timed.out.transaction.cleanup.interval.ms must be >= 1");
        }
        if self.group_max_size < 1 {
            bail!("group.max.size must be >= 1");
        }
        // The topic registry's per-topic limit (topics::MAX_PARTITIONS_PER_TOPIC).
        if !(1..=10_000).contains(&self.offsets_topic_num_partitions) {
            bail!("offsets.topic.num.partitions must be between 1 and 10000");
        }
        if self.offsets_topic_replication_factor < 1 {
            bail!("offsets.topic.replication.factor must be >= 1");
        }
        Ok(())
    }

    /// The host clients are told to connect to.
    pub fn advertised_host(&self) -> String {
        if let Some(host) = &self.advertised_host {
            return host.clone();
        }
        match self.listen.rsplit_once(':') {
            Some((host, _)) if host != "0.0.0.0" && host != "[::]" => {
                host.trim_matches(|c| c == '[' || c == ']').to_string()
            }
            _ => "127.0.0.1".to_string(),
        }
    }

    /// Replica ids of every broker in the simulated cluster: the leader, then followers.
    pub fn all_replica_ids(&self) -> Vec<i32> {
        (0..=self.follower_count)
            .map(|i| self.broker_id + i)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_kafka_defaults() {
        let c = BrokerConfig::from_toml("").unwrap();
        assert_eq!(c.listen, "127.0.0.1:9092");
        assert_eq!(c.min_insync_replicas, 2);
        assert_eq!(c.replica_lag_time_max_ms, 30_000);
        assert_eq!(c.default_replication_factor, 3);
        assert_eq!(c.all_replica_ids(), vec![1, 2, 3]);
    }

    #[test]
    fn kafka_names_parse_and_unknown_keys_are_rejected() {
        let c =
            BrokerConfig::from_toml("\"min.insync.replicas\" = 1\n\"clock\" = \"manual\"").unwrap();
        assert_eq!(c.min_insync_replicas, 1);
        assert_eq!(c.clock, ClockMode::Manual);
        assert!(BrokerConfig::from_toml("\"min.insync.replica\" = 1").is_err());
        assert!(BrokerConfig::from_toml("\"default.replication.factor\" = 4").is_err());
    }

    #[test]
    fn shipped_config_file_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/broker.toml");
        let c = BrokerConfig::from_file(&path).unwrap();
        assert_eq!(c.broker_id, 1);
    }
}
