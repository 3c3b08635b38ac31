//! Who sent a request: the few facts from a request's header and socket that travel
//! with it through every layer, down to the delayed operation it may become.
//!
//! A Kafka broker keeps them in its `RequestContext`; the replica manager and the
//! purgatories never look at the request itself, only at this, so that a log line or the
//! state API can say "produce #17 from client rdkafka (127.0.0.1:50412) waits for ...".
//! It lives below the handlers so that the layers under them can use it without
//! importing anything from the wire side.

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
