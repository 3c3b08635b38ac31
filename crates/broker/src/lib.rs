//! Purgatory: a mock Kafka broker that makes delayed operations real and visible.
//!
//! Real Kafka clients connect over the Kafka wire protocol. An `acks=all` produce is appended
//! to an in-memory replicated partition log ([`replog`]) and parked as a
//! [`delayed::DelayedProduce`] in a purgatory ([`timewheel`]) until follower replicas,
//! fetching over the same protocol, move the high watermark past it — or until its timeout
//! fires in the hierarchical timing wheel.
//!
//! Reading order for newcomers, top to bottom as a request travels (Kafka's
//! `SocketServer` → `KafkaApis` → `ReplicaManager` → `Partition`):
//! 1. [`server`] — accepting connections;
//! 2. [`connection`] — Kafka framing, in-order responses, bad input;
//! 3. [`handlers`] — one module per Kafka API: wire to domain and back, nothing more;
//!    group APIs go to [`coordinator`] (Kafka's `GroupCoordinator`), which appends to
//!    `__consumer_offsets` through the replica manager;
//! 4. [`replica_manager`] — `append_records`, `fetch_messages`, the HW/ISR chain of events,
//!    the purgatories; beside it [`topics`] (the registry and the topic config table);
//! 5. [`delayed`] — `DelayedProduce`, `DelayedFetch`, and the coordinator's `DelayedJoin`,
//!    `DelayedSync` and `DelayedHeartbeat`, which answer through callbacks;
//! 6. [`partition`] — the lock around one `replog::Partition`.
//!
//! Beside the request path: [`faults`], the rules that make a broker misbehave on purpose
//! (applied by the connection before a handler runs), and [`testing`], a broker or cluster
//! inside a Rust test.
//!
//! A broker that follows a partition fetches it from the leader with the `followersim`
//! fetch loop, appending into its own log: [`replica_fetcher`].
//!
//! Data flows down and answers flow back through callbacks: no module imports the layer
//! above it. [`request`] (who sent a request) is shared by every layer, and so is
//! [`telemetry`] (what happened to it: phases, causes, replication events, metrics).
//! [`record_batch`] writes record batches where the broker is its own client (the
//! coordinator's `__consumer_offsets`, the live view's test produce).

pub mod admin;
pub mod apis;
pub mod cluster;
pub mod config;
pub mod connection;
pub mod coordinator;
pub mod delayed;
pub mod faults;
pub mod followers;
pub mod handlers;
pub mod partition;
pub mod record_batch;
pub mod replica_fetcher;
pub mod replica_manager;
pub mod request;
pub mod server;
pub mod telemetry;
#[cfg(any(test, feature = "test-util"))]
pub mod test_util;
pub mod testing;
pub mod topics;
pub mod txn;

pub use config::BrokerConfig;
pub use server::Broker;
