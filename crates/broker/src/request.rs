//! Who sent a request: the few facts from a request's header and socket that travel
//! with it through every layer, down to the delayed operation it may become.
//!
//! A Kafka broker keeps them in its `RequestContext`; the replica manager and the
//! purgatories never look at the request itself, only at this, so that a log line or the
//! state API can say "produce #17 from client rdkafka (127.0.0.1:50412) waits for ...".
//! It lives below the handlers so that the layers under them can use it without
//! importing anything from the wire side. Beside it: the request's number in the request
//! log ([`TraceId`]), and what completed it if it was parked ([`Cause`]), which the change
//! that completed it names when it wakes the purgatories.

use std::net::{Ipv4Addr, SocketAddr};

/// Who sent a request, for responses, logs and the state API.
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// The client's correlation id.
    pub correlation_id: i32,
    /// The client's `client.id`.
    pub client_id: String,
    /// The request's API version.
    pub api_version: i16,
    /// The peer address.
    pub peer: SocketAddr,
    /// The request's record in the broker's request log (`TraceId::NONE` if untraced):
    /// the layers below note what it did there, and a parked operation what ended it.
    pub trace: TraceId,
}

impl RequestContext {
    /// The context of a request the broker makes to itself (e.g. the group coordinator
    /// appending to `__consumer_offsets` on a client's behalf keeps the client's context;
    /// this is for work with no client at all, and for tests).
    pub fn internal(client_id: &str) -> Self {
        RequestContext {
            correlation_id: -1,
            client_id: client_id.to_string(),
            api_version: 0,
            peer: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            trace: TraceId::NONE,
        }
    }
}

/// Identifies a request in the request log (0: not traced).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TraceId(pub u64);

impl TraceId {
    /// A request that is not in the log (internal work, tests).
    pub const NONE: TraceId = TraceId(0);

    /// Its number in the request log.
    pub fn seq(self) -> u64 {
        self.0
    }
}

/// What completed a parked request (or why it did not need to park).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Cause {
    /// Not known (not completed yet, or completed outside any traced change).
    #[default]
    Unknown,
    /// Answered without waiting in a purgatory.
    Immediate,
    /// A follower's fetch moved its log end offset (and with it, perhaps, the HW).
    FollowerFetch {
        /// The follower's replica id.
        replica: i32,
        /// Its fetch offset: its new log end offset.
        fetch_offset: i64,
        /// The high watermark after the fetch.
        high_watermark: i64,
        /// The follower fetch's own request number in the request log.
        request: u64,
        /// The follower fetch's correlation id.
        correlation_id: i32,
    },
    /// A produce appended to the partition (what a parked follower fetch waits for; with
    /// the leader alone in the ISR it also moves the HW).
    Append {
        /// The produce's request number in the request log.
        request: u64,
        /// The partition's log end offset after the append.
        log_end_offset: i64,
    },
    /// The periodic ISR check removed followers, and the HW moved on without them.
    IsrShrink {
        /// The high watermark after the shrink.
        high_watermark: i64,
    },
    /// Topics were created or deleted: a parked follower fetch ends so that the
    /// follower's next fetch names the partitions it was just told of.
    PartitionsChanged,
    /// The timeout fired in the timing wheel.
    Expired,
    /// Completed with an error (the Kafka error code).
    Error(i16),
}
