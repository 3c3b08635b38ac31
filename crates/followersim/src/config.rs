//! Settings of one simulated follower.
//!
//! # The Kafka concept
//!
//! A real follower's fetcher thread is tuned by a handful of broker settings, and the
//! defaults here mirror them:
//!
//! | here                  | Kafka broker setting                  | default        |
//! |-----------------------|---------------------------------------|----------------|
//! | `fetch_max_wait_ms`   | `replica.fetch.wait.max.ms`           | 500 ms         |
//! | `fetch_min_bytes`     | `replica.fetch.min.bytes`             | 1              |
//! | `fetch_max_bytes`     | `replica.fetch.response.max.bytes`    | 10 MiB         |
//! | `partition_max_bytes` | `replica.fetch.max.bytes`             | 1 MiB          |
//! | `fetch_backoff_ms`    | `replica.fetch.backoff.ms`            | 1000 ms        |
//!
//! `max_wait_ms` and `min_bytes` make the Fetch a *long poll*: the leader parks it in its
//! fetch purgatory until at least `min_bytes` are available or `max_wait_ms` has passed. With
//! `min_bytes = 1` a healthy follower therefore gets new data the moment it is appended,
//! which is what keeps `acks=all` produce latency low.
//!
//! The remaining knobs are the simulator's own: they make a follower misbehave on purpose.

use crate::log::DEFAULT_RETAIN_BYTES;

/// Settings of one simulated follower. Build with struct update syntax:
///
/// ```
/// use followersim::FollowerConfig;
/// let cfg = FollowerConfig { replica_id: 3, bootstrap: "127.0.0.1:9092".into(), ..Default::default() };
/// assert_eq!(cfg.fetch_max_wait_ms, 500);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowerConfig {
    /// This follower's broker id, sent as `replica_id` in every Fetch. Default 2.
    pub replica_id: i32,
    /// The leader's Kafka listener, `host:port`. Default `127.0.0.1:9092`.
    pub bootstrap: String,
    /// How long the leader may park a Fetch waiting for data (`max_wait_ms`). Default 500.
    pub fetch_max_wait_ms: i32,
    /// Bytes that must be available before the leader answers early (`min_bytes`). Default 1.
    pub fetch_min_bytes: i32,
    /// Cap on the bytes of one Fetch response (`max_bytes`). Default 10 MiB. Changeable at
    /// run time with [`FollowerHandle::set_max_bytes`](crate::FollowerHandle::set_max_bytes).
    pub fetch_max_bytes: i32,
    /// Cap on the bytes per partition in one Fetch response. Default 1 MiB.
    pub partition_max_bytes: i32,
    /// How often to re-read Metadata to find new and deleted partitions. Default 1000 ms.
    pub metadata_refresh_ms: u64,
    /// Extra sleep before every Fetch ("slow follower"). Default 0.
    pub fetch_delay_ms: u64,
    /// "Stay N ms behind" mode. Default 0 (off).
    ///
    /// When non-zero, a Fetch response that carried data is *held* for `lag_ms` (counted
    /// from its arrival) before it is appended and before the next Fetch is sent. Since the
    /// leader learns the follower's new log end offset only from that next Fetch, the
    /// leader's view of this follower, and so the high watermark, trails the data by at
    /// least `lag_ms` (by up to twice that for data that lands while a response is held).
    /// Responses without data are not held, so an idle follower keeps long-polling normally.
    pub lag_ms: u64,
    /// Most bytes of batches kept per partition; older ones are dropped (offsets are
    /// unaffected). 0 keeps offsets only. Default 64 MiB.
    pub retain_bytes: usize,
    /// Time allowed for a request's answer, on top of `fetch_max_wait_ms` for Fetch.
    /// Default 30000 ms.
    pub request_timeout_ms: u64,
    /// Pause after a Fetch that returned errors before fetching again. Default 1000 ms.
    pub fetch_backoff_ms: u64,
    /// First reconnect delay; doubles on each failure. Default 100 ms.
    pub reconnect_backoff_ms: u64,
    /// Longest reconnect delay. Default 2000 ms.
    pub reconnect_backoff_max_ms: u64,
    /// `client_id` in request headers. Default `None`, meaning `followersim-replica-<id>`.
    pub client_id: Option<String>,
    /// Follow only the partitions this broker leads (a broker runs one fetcher per leader
    /// it follows, each connected to that leader). Default `None`: every partition that
    /// lists this replica and is led by someone else.
    pub leader_id: Option<i32>,
}

impl Default for FollowerConfig {
    fn default() -> Self {
        FollowerConfig {
            replica_id: 2,
            bootstrap: "127.0.0.1:9092".to_owned(),
            fetch_max_wait_ms: 500,
            fetch_min_bytes: 1,
            fetch_max_bytes: 10 * 1024 * 1024,
            partition_max_bytes: 1024 * 1024,
            metadata_refresh_ms: 1000,
            fetch_delay_ms: 0,
            lag_ms: 0,
            retain_bytes: DEFAULT_RETAIN_BYTES,
            request_timeout_ms: 30_000,
            fetch_backoff_ms: 1000,
            reconnect_backoff_ms: 100,
            reconnect_backoff_max_ms: 2000,
            client_id: None,
            leader_id: None,
        }
    }
}

impl FollowerConfig {
    /// A default config for replica `replica_id` fetching from `bootstrap`.
    pub fn new(replica_id: i32, bootstrap: impl Into<String>) -> Self {
        FollowerConfig {
            replica_id,
            bootstrap: bootstrap.into(),
            ..Default::default()
        }
    }

    /// The `client_id` to send: the configured one or `followersim-replica-<id>`.
    pub fn effective_client_id(&self) -> String {
        self.client_id
            .clone()
            .unwrap_or_else(|| format!("followersim-replica-{}", self.replica_id))
    }
}
