//! Purgatory: a mock Kafka broker that makes delayed operations real and visible.
//!
//! Real Kafka clients connect over the Kafka wire protocol. An `acks=all` produce is appended
//! to an in-memory replicated partition log ([`replog`]) and parked as a
//! [`delayed::DelayedProduce`] in a purgatory ([`timewheel`]) until follower replicas,
//! fetching over the same protocol, move the high watermark past it — or until its timeout
//! fires in the hierarchical timing wheel.
//!
//! Reading order for newcomers:
//! 1. [`server`] — accepting connections;
//! 2. [`connection`] — Kafka framing, in-order responses, bad input;
//! 3. [`handlers`] — one module per Kafka API;
//! 4. [`replica_manager`] — partitions, the HW/ISR chain of events, the purgatories;
//! 5. [`delayed`] — `DelayedProduce` and `DelayedFetch`.

pub mod admin;
pub mod config;
pub mod connection;
pub mod ctl;
pub mod delayed;
pub mod error_codes;
pub mod followers;
pub mod handlers;
pub mod replica_manager;
pub mod server;

pub use config::BrokerConfig;
pub use server::Broker;
