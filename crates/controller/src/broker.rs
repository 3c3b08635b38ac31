//! # A registered broker: id, address, liveness and incarnation
//!
//! In KRaft a broker registers with the controller when it starts and then heartbeats;
//! one that stops heartbeating is *fenced*, and every restart registers again and gets
//! a new **broker epoch**, so requests from the previous incarnation can be told apart.
//! Here the process that runs the brokers tells the controller directly that a broker
//! died or came back; `alive` is the opposite of fenced, and `incarnation` plays the
//! broker epoch: 0 at the first registration, one more at every restart.

use serde::{Deserialize, Serialize};

/// One broker as the controller knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Broker {
    /// Broker id (`node.id`), 0 or more.
    pub id: i32,
    /// Listener address, `host:port`, as clients should connect to it.
    pub address: String,
    /// Whether it is running (not fenced). Only live brokers lead, join an ISR, or get
    /// new replicas.
    pub alive: bool,
    /// Bumped on every restart, like KRaft's broker epoch.
    pub incarnation: i64,
}
