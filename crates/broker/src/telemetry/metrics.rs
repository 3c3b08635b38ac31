//! The counters and histograms behind `/metrics`, updated on the request path.
//!
//! Everything here is an atomic add: a request's phase times go into its request name's
//! histograms (allocated the first time that name is seen), expirations and ISR changes
//! into counters. `admin/metrics.rs` reads them, with the gauges it takes from the broker's
//! state, and renders them under Kafka's JMX names.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use parking_lot::Mutex;

use super::histogram::Histogram;
use super::RequestName;
use crate::partition::TopicPartition;

/// Kafka's `RequestChannel` phases, in the order a request goes through them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Received, waiting for its handler.
    RequestQueue = 0,
    /// In its handler (for a produce: the append).
    Local = 1,
    /// Parked in a purgatory.
    Remote = 2,
    /// Answered, waiting for the connection's writer (responses go out in order).
    ResponseQueue = 3,
    /// Being encoded and written.
    ResponseSend = 4,
    /// All of it.
    Total = 5,
}

impl Phase {
    /// Every phase.
    pub const ALL: [Phase; 6] = [
        Phase::RequestQueue,
        Phase::Local,
        Phase::Remote,
        Phase::ResponseQueue,
        Phase::ResponseSend,
        Phase::Total,
    ];

    /// Kafka's histogram name for the phase.
    pub fn kafka_name(self) -> &'static str {
        match self {
            Phase::RequestQueue => "RequestQueueTimeMs",
            Phase::Local => "LocalTimeMs",
            Phase::Remote => "RemoteTimeMs",
            Phase::ResponseQueue => "ResponseQueueTimeMs",
            Phase::ResponseSend => "ResponseSendTimeMs",
            Phase::Total => "TotalTimeMs",
        }
    }

    /// The key used in JSON (`request_queue`, `local`, ...).
    pub fn key(self) -> &'static str {
        match self {
            Phase::RequestQueue => "request_queue",
            Phase::Local => "local",
            Phase::Remote => "remote",
            Phase::ResponseQueue => "response_queue",
            Phase::ResponseSend => "response_send",
            Phase::Total => "total",
        }
    }
}

/// Versions counted per request name (Kafka's `RequestsPerSec{request,version}`).
pub const VERSIONS: usize = 32;

/// One request name's metrics (Kafka's `RequestMetrics`).
pub struct RequestMetrics {
    /// Requests answered, per API version.
    pub versions: [AtomicU64; VERSIONS],
    /// One histogram per [`Phase`].
    pub phases: [Histogram; 6],
}

impl Default for RequestMetrics {
    fn default() -> Self {
        RequestMetrics {
            versions: std::array::from_fn(|_| AtomicU64::new(0)),
            phases: std::array::from_fn(|_| Histogram::default()),
        }
    }
}

/// Every counter and histogram the request path updates.
pub struct Metrics {
    requests: [OnceLock<Box<RequestMetrics>>; RequestName::SLOTS],
    /// `DelayedProduceMetrics.ExpiresPerSec`: partitions of produces that expired.
    pub produce_expired: AtomicU64,
    produce_expired_by_partition: Mutex<BTreeMap<TopicPartition, u64>>,
    /// `DelayedFetchMetrics.ExpiresPerSec{fetcherType="follower"}`.
    pub fetch_expired_follower: AtomicU64,
    /// `DelayedFetchMetrics.ExpiresPerSec{fetcherType="consumer"}`.
    pub fetch_expired_consumer: AtomicU64,
    /// `ReplicaManager.IsrShrinksPerSec`: partitions whose ISR shrank, per shrink.
    pub isr_shrinks: AtomicU64,
    /// `ReplicaManager.IsrExpandsPerSec`.
    pub isr_expands: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            requests: [const { OnceLock::new() }; RequestName::SLOTS],
            produce_expired: AtomicU64::new(0),
            produce_expired_by_partition: Mutex::new(BTreeMap::new()),
            fetch_expired_follower: AtomicU64::new(0),
            fetch_expired_consumer: AtomicU64::new(0),
            isr_shrinks: AtomicU64::new(0),
            isr_expands: AtomicU64::new(0),
        }
    }
}

impl Metrics {
    /// The metrics of one request name, created on first use.
    pub fn request(&self, name: RequestName) -> &RequestMetrics {
        self.requests[name.slot()].get_or_init(Box::default)
    }

    /// Records one answered request: its version and its phase times.
    pub fn record_request(&self, name: RequestName, version: i16, phases: &[Duration; 6]) {
        let m = self.request(name);
        let v = (version.max(0) as usize).min(VERSIONS - 1);
        m.versions[v].fetch_add(1, Ordering::Relaxed);
        for (h, d) in m.phases.iter().zip(phases) {
            h.record(*d);
        }
    }

    /// Every request name seen so far, with its metrics.
    pub fn requests(&self) -> impl Iterator<Item = (RequestName, &RequestMetrics)> {
        self.requests
            .iter()
            .enumerate()
            .filter_map(|(slot, m)| m.get().map(|m| (RequestName::from_slot(slot), &**m)))
    }

    /// One partition of a produce expired (Kafka marks the aggregate and the partition).
    pub fn record_produce_expiration(&self, tp: &TopicPartition) {
        self.produce_expired.fetch_add(1, Ordering::Relaxed);
        *self
            .produce_expired_by_partition
            .lock()
            .entry(tp.clone())
            .or_default() += 1;
    }

    /// Produce expirations per partition.
    pub fn produce_expirations_by_partition(&self) -> Vec<(TopicPartition, u64)> {
        self.produce_expired_by_partition
            .lock()
            .iter()
            .map(|(tp, n)| (tp.clone(), *n))
            .collect()
    }

    /// A fetch expired.
    pub fn record_fetch_expiration(&self, from_follower: bool) {
        let counter = if from_follower {
            &self.fetch_expired_follower
        } else {
            &self.fetch_expired_consumer
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
