//! Telemetry: each request's journey through Kafka's phases, the replication events that
//! drive parked requests to completion, and the counters behind `/metrics`.
//!
//! Kafka's `RequestChannel` times every request in phases: queued until a handler takes it
//! (RequestQueueTimeMs), in the handler (LocalTimeMs: for a produce, the append), parked in
//! a purgatory (RemoteTimeMs), answered but waiting to be written (ResponseQueueTimeMs —
//! here, behind earlier responses on the same connection), and written
//! (ResponseSendTimeMs). This module records the same phases for every request, keeps the
//! last few thousand requests in a ring ([`requests`]) with what they touched and what
//! ended their wait, and the replication events ([`events`]) that make up the middle of a
//! produce's story.
//!
//! Costs on the request path, by design: a handful of `Instant::now()` per request, one
//! atomic add to number it, three or four uncontended per-slot locks in the rings (whose
//! strings and vectors are reused, so nothing is allocated once the ring has filled), and
//! one relaxed atomic add per phase histogram. No global lock; nothing is serialised or
//! formatted until someone asks (`/api/requests`, the live view, a scrape).
//!
//! A request is identified down the layers by a [`TraceId`] in its [`RequestContext`].
//! Telemetry only observes: the replica manager calls it after each domain call, and a
//! parked operation's completion reaches it through the callback the replica manager gave
//! the operation (`produce_completed`, `fetch_completed`), never from inside the operation.

pub mod events;
pub mod histogram;
pub mod metrics;
mod replication;
pub mod requests;
mod ring;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, RequestKind};
use kafka_protocol::ResponseError;

use events::{EventKind, EventLog};
use metrics::Metrics;
pub use requests::{FaultNote, Outcome, Park, PartitionNote, RequestView};
use requests::{RequestEntry, RequestLog};

use crate::partition::TopicPartition;
use crate::request::RequestContext;
pub use crate::request::{Cause, TraceId};

/// Kafka's name for a request in its metrics: the API's name, except that fetches are
/// split into `FetchConsumer` and `FetchFollower`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RequestName(u8);

impl RequestName {
    /// Slots for per-name metrics: one per API key, plus `FetchFollower`.
    pub const SLOTS: usize = 256;
    const FETCH_FOLLOWER: u8 = 255;

    /// The name of a decoded request.
    pub fn of(api_key: ApiKey, request: &RequestKind) -> Self {
        match request {
            RequestKind::Fetch(fetch) if fetch.replica_id.0 >= 0 => {
                RequestName(Self::FETCH_FOLLOWER)
            }
            _ => RequestName((api_key as i16).clamp(0, 254) as u8),
        }
    }

    /// `FetchFollower`.
    pub fn fetch_follower() -> Self {
        RequestName(Self::FETCH_FOLLOWER)
    }

    /// The name for an API key (a fetch counts as `FetchConsumer`).
    pub fn of_key(api_key: ApiKey) -> Self {
        RequestName((api_key as i16).clamp(0, 254) as u8)
    }

    /// Its metrics slot.
    pub fn slot(self) -> usize {
        self.0 as usize
    }

    /// The name in a metrics slot.
    pub fn from_slot(slot: usize) -> Self {
        RequestName(slot.min(255) as u8)
    }

    /// `Produce`, `FetchConsumer`, `FetchFollower`, `Metadata`, ...
    pub fn name(self) -> String {
        if self.0 == Self::FETCH_FOLLOWER {
            return "FetchFollower".into();
        }
        match ApiKey::try_from(i16::from(self.0)) {
            Ok(ApiKey::Fetch) => "FetchConsumer".into(),
            Ok(key) => format!("{key:?}"),
            Err(()) => format!("Api{}", self.0),
        }
    }
}

/// Kafka's name for an error code: `REQUEST_TIMED_OUT`, `NOT_ENOUGH_REPLICAS`, ...
pub fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None => "NONE".into(),
        Some(ResponseError::Unknown(c)) => format!("UNKNOWN_ERROR_CODE_{c}"),
        Some(e) => {
            let camel = e.to_string();
            let mut out = String::with_capacity(camel.len() + 8);
            for (i, c) in camel.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(c.to_ascii_uppercase());
            }
            out
        }
    }
}

/// The times a connection takes for one request, carried with its response slot.
#[derive(Clone, Copy, Debug)]
pub struct RequestTiming {
    /// Its record in the request log.
    pub trace: TraceId,
    /// Its metrics name.
    pub name: RequestName,
    /// API version.
    pub api_version: i16,
    /// Its frame had been read.
    pub received: Instant,
    /// Its handler started.
    pub local_start: Instant,
    /// Its handler returned.
    pub local_end: Instant,
}

/// The broker's telemetry (one per broker).
#[derive(Default)]
pub struct Telemetry {
    /// Recent requests.
    pub requests: RequestLog,
    /// Recent replication events.
    pub events: EventLog,
    /// Counters and histograms.
    pub metrics: Metrics,
    /// Requests finished (for long polls: "anything new?").
    finished: AtomicU64,
}

impl Telemetry {
    /// Opens a request's record when its frame has been decoded.
    pub fn begin(
        &self,
        name: RequestName,
        ctx: &RequestContext,
        received: Instant,
        broker_ms: u64,
    ) -> TraceId {
        let events_from = self.events.next_seq();
        TraceId(self.requests.ring().push(|seq, e: &mut RequestEntry| {
            e.seq = seq;
            e.name = name;
            e.api_version = ctx.api_version;
            e.correlation_id = ctx.correlation_id;
            e.client_id.clear();
            e.client_id.push_str(&ctx.client_id);
            e.peer = Some(ctx.peer);
            e.broker_ms = broker_ms;
            e.received = Some(received);
            e.local_start = None;
            e.local_end = None;
            e.completed = None;
            e.send_start = None;
            e.send_end = None;
            e.acks = None;
            e.replica_id = None;
            e.fetch_wait = None;
            e.partitions.clear();
            e.park = None;
            e.cause = Cause::Unknown;
            e.answered_later = false;
            e.outcome = Outcome::Pending;
            e.fault = None;
            e.events_from = events_from;
            e.events_to = 0;
        }))
    }

    /// A produce was appended: where each partition's batch landed, and whether it parked.
    /// An untraced request (`TraceId::NONE`: the coordinator's appends, tests) is not in
    /// the log, and the ring ignores it.
    pub fn note_produce(
        &self,
        trace: TraceId,
        acks: i16,
        partitions: impl Iterator<Item = PartitionNote>,
        park: Option<Park>,
    ) {
        self.requests.ring().with(trace.0, |e| {
            e.acks = Some(acks);
            e.partitions.extend(partitions);
            e.park = park;
        });
    }

    /// A fetch was read: from where, and whether it parked.
    pub fn note_fetch(
        &self,
        trace: TraceId,
        replica_id: i32,
        wait: (usize, u64),
        partitions: impl Iterator<Item = PartitionNote>,
        park: Option<Park>,
    ) {
        self.requests.ring().with(trace.0, |e| {
            e.replica_id = Some(replica_id);
            e.fetch_wait = Some(wait);
            e.partitions.extend(partitions);
            e.park = park;
        });
    }

    /// A request other than a produce or a fetch was handled: its partitions, and
    /// whether it parked (DeleteRecords).
    pub fn note_parked(
        &self,
        trace: TraceId,
        partitions: impl Iterator<Item = PartitionNote>,
        park: Option<Park>,
    ) {
        self.requests.ring().with(trace.0, |e| {
            e.partitions.extend(partitions);
            e.park = park;
        });
    }

    /// A fault rule fired on the request (`crate::faults`): the request log says which.
    pub fn note_fault(&self, trace: TraceId, fault: FaultNote) {
        self.requests
            .ring()
            .with(trace.0, |e| e.fault = Some(fault));
    }

    /// A parked operation completed: why, and (in partition order) each partition's error.
    pub fn completed(
        &self,
        trace: TraceId,
        cause: Cause,
        errors: impl IntoIterator<Item = Option<i16>>,
    ) {
        let now = Instant::now();
        let events_to = self.events.next_seq();
        self.requests.ring().with(trace.0, |e| {
            e.completed = Some(now);
            e.cause = cause;
            e.events_to = events_to;
            for (p, error) in e.partitions.iter_mut().zip(errors) {
                if error.is_some() {
                    p.error = error;
                }
            }
        });
    }

    /// A parked produce completed. Besides [`Telemetry::completed`], Kafka's
    /// DelayedProduceMetrics count one expiration per partition its timeout answered.
    pub fn produce_completed<'a>(
        &self,
        trace: TraceId,
        cause: Cause,
        partitions: impl Iterator<Item = (&'a TopicPartition, Option<ResponseError>)> + Clone,
    ) {
        if cause == Cause::Expired {
            for (tp, error) in partitions.clone() {
                if error == Some(ResponseError::RequestTimedOut) {
                    self.metrics.record_produce_expiration(tp);
                }
            }
        }
        self.completed(trace, cause, partitions.map(|(_, e)| e.map(|e| e.code())));
    }

    /// A parked fetch completed. Besides [`Telemetry::completed`], Kafka's
    /// DelayedFetchMetrics count an expiration per fetcher type (follower or consumer).
    pub fn fetch_completed(
        &self,
        trace: TraceId,
        cause: Cause,
        from_follower: bool,
        errors: impl IntoIterator<Item = Option<ResponseError>>,
    ) {
        if cause == Cause::Expired {
            self.metrics.record_fetch_expiration(from_follower);
        }
        self.completed(
            trace,
            cause,
            errors.into_iter().map(|e| e.map(|e| e.code())),
        );
    }

    /// The response has been written (or the request needs none, or the connection
    /// closed): closes the record and adds the request to the metrics.
    ///
    /// `answered` is when the connection got the response of a request its handler had
    /// answered "later": what completed it may not have told the request log (operations
    /// other than DelayedProduce and DelayedFetch), and then this is when it did.
    pub fn finish(
        &self,
        timing: &RequestTiming,
        answered: Option<Instant>,
        send_start: Instant,
        send_end: Instant,
        outcome: Outcome,
    ) {
        let phases = self
            .requests
            .ring()
            .with(timing.trace.0, |e| {
                if let (Some(at), None) = (answered, e.completed) {
                    e.completed = Some(at);
                    e.answered_later = e.park.is_none();
                }
                e.local_start = Some(timing.local_start);
                e.local_end = Some(timing.local_end);
                e.send_start = Some(send_start);
                e.send_end = Some(send_end);
                e.outcome = outcome;
                if e.park.is_none() && !e.answered_later && e.cause == Cause::Unknown {
                    e.cause = Cause::Immediate;
                }
                e.phases().map(Option::unwrap_or_default)
            })
            .unwrap_or_else(|| {
                // The record is gone (the ring wrapped while it waited): what the
                // connection saw, with the wait counted as response queue time.
                let d = |a: Instant, b: Instant| a.saturating_duration_since(b);
                [
                    d(timing.local_start, timing.received),
                    d(timing.local_end, timing.local_start),
                    Duration::ZERO,
                    d(send_start, timing.local_end),
                    d(send_end, send_start),
                    d(send_end, timing.received),
                ]
            });
        if outcome != Outcome::Closed {
            self.metrics
                .record_request(timing.name, timing.api_version, &phases);
        }
        self.finished.fetch_add(1, Ordering::Release);
    }

    /// How many requests have finished since the broker started.
    pub fn finished(&self) -> u64 {
        self.finished.load(Ordering::Acquire)
    }

    /// A follower's fetch moved its log end offset, the HW, or the ISR.
    pub fn record_event(&self, tp: &TopicPartition, broker_ms: u64, kind: EventKind) -> u64 {
        self.events.record(tp, broker_ms, kind)
    }

    /// Recent requests, newest first, that pass `filter`.
    pub fn recent_requests(
        &self,
        after: u64,
        limit: usize,
        filter: &RequestFilter,
    ) -> Vec<RequestView> {
        self.requests.ring().newest(after, limit, |e| {
            filter.matches(e).then(|| e.view(&self.events))
        })
    }

    /// One request's view, if the log still holds it.
    pub fn request(&self, seq: u64) -> Option<RequestView> {
        self.requests.ring().with(seq, |e| e.view(&self.events))
    }

    /// The number the next request will get.
    pub fn next_request_seq(&self) -> u64 {
        self.requests.ring().next_seq()
    }
}

/// The client id prefix of the simulated followers (`followersim-replica-2`, ...).
pub const FOLLOWER_CLIENT_PREFIX: &str = "followersim";

/// Which requests `/api/requests` and `ctl trace` show.
#[derive(Clone, Debug, Default)]
pub struct RequestFilter {
    /// Only this client id (exact).
    pub client: Option<String>,
    /// Only requests that touched this topic.
    pub topic: Option<String>,
    /// Only this request name (`Produce`, `FetchConsumer`, ...).
    pub request: Option<String>,
    /// Leave out replication traffic: follower fetches, and the simulated followers'
    /// other requests (Metadata, ListOffsets...), known by their client id.
    pub no_followers: bool,
    /// Only finished requests.
    pub done_only: bool,
}

impl RequestFilter {
    fn matches(&self, e: &RequestEntry) -> bool {
        if self.done_only && e.outcome == Outcome::Pending {
            return false;
        }
        if self.no_followers
            && (e.name == RequestName(RequestName::FETCH_FOLLOWER)
                || e.client_id.starts_with(FOLLOWER_CLIENT_PREFIX))
        {
            return false;
        }
        if let Some(c) = &self.client {
            if &e.client_id != c {
                return false;
            }
        }
        if let Some(t) = &self.topic {
            if !e.partitions.iter().any(|p| &*p.tp.topic == t.as_str()) {
                return false;
            }
        }
        if let Some(r) = &self.request {
            if !e.name.name().eq_ignore_ascii_case(r) {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests;
