//! The request log: one record per request, from the moment its frame is read to the
//! moment its response is written, for `/api/requests`, `ctl trace` and the live view.
//!
//! The connection opens a record when it decodes a request ([`Telemetry::begin`]); the
//! replica manager notes what a produce appended or where a fetch reads from, and whether
//! it parked; a parked operation notes what completed it; the connection's writer closes
//! the record with the phase times once the response is on the wire. The story of a
//! request — `produce #17 client=rdkafka demo-0 appended @42 → parked (needs HW 43) →
//! follower 2 fetch @43 → follower 3 fetch @43 → HW 43 → completed after 0.41 ms` — is
//! assembled only when someone reads it, from the record and the replication events
//! between its append and its completion.
//!
//! [`Telemetry::begin`]: super::Telemetry::begin

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::events::{EventKind, EventLog};
use super::metrics::Phase;
use super::ring::{Numbered, Ring};
use super::{error_name, Cause, RequestName};
use crate::partition::TopicPartition;

/// Requests kept.
pub const REQUESTS_KEPT: usize = 4096;

/// What a request did to (or read from) one partition.
#[derive(Clone, Debug)]
pub struct PartitionNote {
    /// The partition.
    pub tp: TopicPartition,
    /// A produce: the first offset appended (-1 if refused). A fetch: the fetch offset.
    pub offset: i64,
    /// A produce: the last offset appended.
    pub last_offset: i64,
    /// An `acks=all` produce: the high watermark it needs (`last_offset + 1`).
    pub required: Option<i64>,
    /// The Kafka error code, if this partition failed.
    pub error: Option<i16>,
}

/// Where and until when a request waited.
#[derive(Clone, Copy, Debug)]
pub struct Park {
    /// The purgatory's name (Kafka's `delayedOperation`: `Produce`, `Fetch`).
    pub purgatory: &'static str,
    /// When it was parked, on the broker clock.
    pub created_ms: u64,
    /// When its timeout fires, on the broker clock.
    pub deadline_ms: u64,
}

/// A fault rule that fired on a request (`crate::faults`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FaultNote {
    /// The rule's id.
    pub rule: u64,
    /// What it did: `error NOT_LEADER_OR_FOLLOWER (6)`, `delay 800 ms`, `disconnect`, ...
    pub action: String,
}

/// How a request ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Outcome {
    /// Not yet.
    #[default]
    Pending,
    /// Its response was written.
    Sent,
    /// No response is sent (`acks=0`).
    NoResponse,
    /// The connection was closed instead (or before) answering it.
    Closed,
}

/// One request's record.
#[derive(Default)]
pub struct RequestEntry {
    /// Its number in the log (1, 2, ...).
    pub seq: u64,
    /// Kafka's request name for metrics (`Produce`, `FetchFollower`, ...).
    pub name: RequestName,
    /// API version.
    pub api_version: i16,
    /// Correlation id.
    pub correlation_id: i32,
    /// The client's `client.id`.
    pub client_id: String,
    /// The client's address.
    pub peer: Option<SocketAddr>,
    /// When it arrived, on the broker clock.
    pub broker_ms: u64,
    /// When its frame had been read.
    pub received: Option<Instant>,
    /// When its handler started.
    pub local_start: Option<Instant>,
    /// When its handler returned.
    pub local_end: Option<Instant>,
    /// When the delayed operation it became completed.
    pub completed: Option<Instant>,
    /// When the writer took its response.
    pub send_start: Option<Instant>,
    /// When its response had been written.
    pub send_end: Option<Instant>,
    /// A produce's `acks`.
    pub acks: Option<i16>,
    /// A fetch's replica id (-1 for consumers).
    pub replica_id: Option<i32>,
    /// A fetch's `min_bytes` and `max_wait_ms`.
    pub fetch_wait: Option<(usize, u64)>,
    /// The partitions it touched.
    pub partitions: Vec<PartitionNote>,
    /// Set if it was parked in a purgatory.
    pub park: Option<Park>,
    /// What completed it (or `Immediate`).
    pub cause: Cause,
    /// Answered later by an operation that reports nothing to the request log (a group
    /// coordinator's DelayedJoin, say): `completed` is when the connection got the answer.
    pub answered_later: bool,
    /// How it ended.
    pub outcome: Outcome,
    /// The fault rule that fired on it, if one did.
    pub fault: Option<FaultNote>,
    /// Replication events from this number on may belong to its story...
    pub events_from: u64,
    /// ...up to (not including) this one, recorded at completion.
    pub events_to: u64,
}

impl Numbered for RequestEntry {
    fn seq(&self) -> u64 {
        self.seq
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn since(later: Option<Instant>, earlier: Option<Instant>) -> Option<Duration> {
    Some(later?.saturating_duration_since(earlier?))
}

impl RequestEntry {
    /// The phase durations known so far (Kafka's `RequestChannel` metrics): queue, local,
    /// remote, response queue, response send, total.
    pub fn phases(&self) -> [Option<Duration>; 6] {
        // A parked request waits from its handler's end until its operation completes; an
        // operation that completed inside the handler waited for nothing.
        let waited = self.park.is_some() || self.answered_later;
        let ready = match (self.completed, self.local_end) {
            (Some(c), Some(l)) => Some(c.max(l)),
            (None, l) if !waited => l,
            _ => None,
        };
        let remote = if waited {
            since(self.completed, self.local_end)
        } else {
            self.local_end.map(|_| Duration::ZERO)
        };
        [
            since(self.local_start, self.received),
            since(self.local_end, self.local_start),
            remote,
            since(self.send_start, ready),
            since(self.send_end, self.send_start),
            since(self.send_end, self.received),
        ]
    }

    /// `produce`, `fetch`, `follower-fetch`, `metadata`, `api-versions`, ...
    pub fn kind(&self) -> String {
        match self.name.name().as_str() {
            "FetchConsumer" => "fetch".into(),
            "FetchFollower" => "follower-fetch".into(),
            other => {
                let mut out = String::new();
                for (i, c) in other.chars().enumerate() {
                    if c.is_ascii_uppercase() && i > 0 {
                        out.push('-');
                    }
                    out.push(c.to_ascii_lowercase());
                }
                out
            }
        }
    }

    /// The first error code among its partitions (or from its cause).
    pub fn error(&self) -> Option<i16> {
        self.partitions
            .iter()
            .find_map(|p| p.error)
            .or(match self.cause {
                Cause::Error(code) => Some(code),
                _ => None,
            })
    }

    /// The story's steps: (ms since the request arrived, what happened).
    pub fn steps(&self, events: &EventLog) -> Vec<(Option<f64>, String)> {
        let at = |t: Option<Instant>| since(t, self.received).map(ms);
        let mut steps = Vec::new();
        if let Some(fault) = &self.fault {
            steps.push((
                Some(0.0),
                format!("fault rule {} fired: {}", fault.rule, fault.action),
            ));
        }
        let name = self.name.name();
        let parts = |f: &dyn Fn(&PartitionNote) -> String| {
            self.partitions.iter().map(f).collect::<Vec<_>>().join(", ")
        };
        match name.as_str() {
            "Produce" => {
                let multi = self.partitions.len() > 1;
                let appended = parts(&|p| {
                    let place = if multi {
                        format!(" on {}", p.tp)
                    } else {
                        String::new()
                    };
                    match p.error {
                        Some(code) if p.offset < 0 => {
                            format!("refused{place}: {}", error_name(code))
                        }
                        _ if p.last_offset > p.offset => {
                            format!("appended @{}..{}{place}", p.offset, p.last_offset)
                        }
                        _ => format!("appended @{}{place}", p.offset),
                    }
                });
                if !appended.is_empty() {
                    steps.push((at(self.local_end), appended));
                }
                if let Some(park) = &self.park {
                    let needs = parts(&|p| match p.required {
                        Some(r) if multi => format!("HW {r} on {}", p.tp),
                        Some(r) => format!("HW {r}"),
                        None => String::new(),
                    });
                    steps.push((
                        at(self.local_end),
                        format!("parked (needs {needs}, deadline {} ms)", park.deadline_ms),
                    ));
                    steps.extend(self.produce_events(events));
                }
            }
            "FetchConsumer" | "FetchFollower" => {
                let from = parts(&|p| format!("@{}", p.offset));
                if !from.is_empty() && self.partitions.len() == 1 {
                    steps.push((at(self.local_start), format!("from {from}")));
                }
                if let (Some(park), Some((min_bytes, max_wait))) = (&self.park, self.fetch_wait) {
                    let bound = if name == "FetchFollower" {
                        "new data"
                    } else {
                        "the high watermark to move"
                    };
                    steps.push((
                        at(self.local_end),
                        format!(
                            "parked (waits for {bound}, min_bytes {min_bytes}, up to {max_wait} ms, deadline {} ms)",
                            park.deadline_ms
                        ),
                    ));
                }
            }
            _ => {}
        }
        // What ended the wait, or the answer.
        let total = at(self.completed).or(at(self.send_end));
        let error = self.error().map(error_name);
        let end = if self.park.is_some() {
            if self.completed.is_none() {
                "waiting".to_string()
            } else {
                let why = match self.cause {
                    Cause::Expired => "expired".to_string(),
                    Cause::FollowerFetch {
                        replica,
                        fetch_offset,
                        high_watermark,
                        correlation_id,
                        ..
                    } => {
                        if name == "Produce" {
                            "completed".to_string()
                        } else {
                            format!(
                                "HW {high_watermark} at follower {replica} fetch #{correlation_id} @{fetch_offset} → completed"
                            )
                        }
                    }
                    Cause::Append {
                        request,
                        log_end_offset,
                    } => {
                        format!("data appended by request {request} (log end {log_end_offset}) → completed")
                    }
                    Cause::IsrShrink { high_watermark } => {
                        format!("ISR shrink moved HW to {high_watermark} → completed")
                    }
                    Cause::PartitionsChanged => {
                        "topics changed → answered, so the next fetch names them".to_string()
                    }
                    Cause::Error(_) => "completed with an error".to_string(),
                    Cause::Unknown | Cause::Immediate => "completed".to_string(),
                };
                let mut s = why;
                if let Some(t) = total {
                    let _ = write!(s, " after {t:.2} ms");
                }
                if let Some(e) = &error {
                    let _ = write!(s, ": {e}");
                }
                s
            }
        } else {
            let mut s = match (self.outcome, self.acks) {
                (Outcome::NoResponse, _) => "no response (acks=0)".to_string(),
                (Outcome::Closed, _) => "connection closed".to_string(),
                (Outcome::Pending, _) => "in flight".to_string(),
                (_, Some(1)) => "answered (acks=1)".to_string(),
                _ if self.answered_later => {
                    "answered when its delayed operation completed".to_string()
                }
                _ => "answered".to_string(),
            };
            if self.outcome != Outcome::Pending {
                if let Some(t) = total {
                    let _ = write!(s, " in {t:.2} ms");
                }
            }
            if let Some(e) = &error {
                let _ = write!(s, ": {e}");
            }
            s
        };
        steps.push((total, end));
        steps
    }

    /// The replication events that moved this produce's partitions towards its required
    /// offsets: each follower's first fetch at or past it, and the HW reaching it.
    fn produce_events(&self, events: &EventLog) -> Vec<(Option<f64>, String)> {
        let to = if self.events_to > 0 {
            self.events_to
        } else {
            events.next_seq()
        };
        let multi = self.partitions.len() > 1;
        let mut seen: Vec<(usize, i32)> = Vec::new();
        let mut hw_seen: Vec<usize> = Vec::new();
        events.range(self.events_from, to, |e| {
            let tp = e.tp.as_ref()?;
            let (i, p) = self
                .partitions
                .iter()
                .enumerate()
                .find(|(_, p)| &p.tp == tp)?;
            let required = p.required?;
            let at = since(e.at, self.received).map(ms);
            let place = if multi {
                format!(" on {tp}")
            } else {
                String::new()
            };
            match &e.kind {
                EventKind::FollowerFetch {
                    replica,
                    fetch_offset,
                    hw_after,
                    ..
                } if *fetch_offset >= required && !seen.contains(&(i, *replica)) => {
                    seen.push((i, *replica));
                    let mut s = format!("follower {replica} fetch @{fetch_offset}{place}");
                    if *hw_after >= required && !hw_seen.contains(&i) {
                        hw_seen.push(i);
                        let _ = write!(s, " → HW {hw_after}");
                    }
                    Some((at, s))
                }
                EventKind::IsrShrink {
                    removed, hw_after, ..
                } => {
                    let mut s = format!("ISR shrink: {removed:?} left{place}");
                    if *hw_after >= required && !hw_seen.contains(&i) {
                        hw_seen.push(i);
                        let _ = write!(s, " → HW {hw_after}");
                    }
                    Some((at, s))
                }
                EventKind::IsrExpand { replica, .. } => {
                    Some((at, format!("ISR expand: {replica} rejoined{place}")))
                }
                _ => None,
            }
        })
    }

    /// The view served by `/api/requests` and the live page.
    pub fn view(&self, events: &EventLog) -> RequestView {
        let phases = self.phases();
        let steps = self.steps(events);
        let mut story = format!("{} #{}", self.kind(), self.correlation_id);
        match self.replica_id {
            Some(r) if r >= 0 => {
                let _ = write!(story, " replica={r}");
            }
            _ => {
                let _ = write!(story, " client={}", one_line(&self.client_id));
            }
        }
        if !self.partitions.is_empty() {
            let tps: Vec<String> = self.partitions.iter().map(|p| p.tp.to_string()).collect();
            let _ = write!(story, " {}", one_line(&tps.join(",")));
        }
        for (i, (_, text)) in steps.iter().enumerate() {
            story.push_str(if i == 0 { " " } else { " → " });
            story.push_str(text);
        }
        let state = if self.outcome != Outcome::Pending {
            "done"
        } else if self.park.is_some() && self.completed.is_none() {
            "parked"
        } else {
            "in_flight"
        };
        RequestView {
            seq: self.seq,
            request: self.name.name(),
            kind: self.kind(),
            api_version: self.api_version,
            correlation_id: self.correlation_id,
            client_id: self.client_id.clone(),
            peer: self.peer.map(|p| p.to_string()).unwrap_or_default(),
            at_ms: self.broker_ms,
            state,
            acks: self.acks,
            replica_id: self.replica_id,
            partitions: self
                .partitions
                .iter()
                .map(|p| PartitionView {
                    topic: p.tp.topic.to_string(),
                    partition: p.tp.partition,
                    offset: p.offset,
                    last_offset: p.last_offset,
                    required_offset: p.required,
                    error: p.error.map(error_name),
                })
                .collect(),
            purgatory: self.park.map(|p| p.purgatory),
            deadline_ms: self.park.map(|p| p.deadline_ms),
            phases_ms: PhasesView {
                request_queue: phases[Phase::RequestQueue as usize].map(ms),
                local: phases[Phase::Local as usize].map(ms),
                remote: phases[Phase::Remote as usize].map(ms),
                response_queue: phases[Phase::ResponseQueue as usize].map(ms),
                response_send: phases[Phase::ResponseSend as usize].map(ms),
                total: phases[Phase::Total as usize].map(ms),
            },
            cause: cause_view(self.cause),
            error: self.error().map(error_name),
            fault: self.fault.clone(),
            steps: steps
                .into_iter()
                .map(|(at_ms, text)| StepView { at_ms, text })
                .collect(),
            story,
        }
    }
}

/// Keeps a story on one line whatever a client id or topic holds.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// One partition of a [`RequestView`].
#[derive(Clone, Debug, Serialize)]
pub struct PartitionView {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Produce: first offset appended. Fetch: fetch offset.
    pub offset: i64,
    /// Produce: last offset appended.
    pub last_offset: i64,
    /// `acks=all`: the high watermark needed.
    pub required_offset: Option<i64>,
    /// Kafka's error name, if this partition failed.
    pub error: Option<String>,
}

/// Kafka's `RequestChannel` phases of one request, in ms (`null` until known).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PhasesView {
    /// RequestQueueTimeMs: read, waiting for its handler.
    pub request_queue: Option<f64>,
    /// LocalTimeMs: in its handler (a produce's append).
    pub local: Option<f64>,
    /// RemoteTimeMs: parked in a purgatory.
    pub remote: Option<f64>,
    /// ResponseQueueTimeMs: answered, waiting for the writer (in-order responses).
    pub response_queue: Option<f64>,
    /// ResponseSendTimeMs: encoding and writing.
    pub response_send: Option<f64>,
    /// TotalTimeMs.
    pub total: Option<f64>,
}

/// One step of a request's story.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StepView {
    /// Milliseconds after the request arrived, if known.
    pub at_ms: Option<f64>,
    /// What happened.
    pub text: String,
}

/// What completed a request, for JSON.
#[derive(Clone, Debug, Serialize)]
pub struct CauseView {
    /// `immediate`, `follower_fetch`, `append`, `isr_shrink`, `expired`, `error`, `unknown`.
    pub kind: &'static str,
    /// The follower, for `follower_fetch`.
    pub replica: Option<i32>,
    /// Its fetch offset.
    pub fetch_offset: Option<i64>,
    /// The HW after.
    pub high_watermark: Option<i64>,
    /// The request that caused it (a follower fetch or a produce).
    pub request: Option<u64>,
    /// The causing follower fetch's correlation id.
    pub correlation_id: Option<i32>,
    /// For `error`: Kafka's error name.
    pub error: Option<String>,
}

fn cause_view(cause: Cause) -> CauseView {
    let mut v = CauseView {
        kind: "unknown",
        replica: None,
        fetch_offset: None,
        high_watermark: None,
        request: None,
        correlation_id: None,
        error: None,
    };
    match cause {
        Cause::Unknown => {}
        Cause::Immediate => v.kind = "immediate",
        Cause::FollowerFetch {
            replica,
            fetch_offset,
            high_watermark,
            request,
            correlation_id,
        } => {
            v.kind = "follower_fetch";
            v.replica = Some(replica);
            v.fetch_offset = Some(fetch_offset);
            v.high_watermark = Some(high_watermark);
            v.request = Some(request);
            v.correlation_id = Some(correlation_id);
        }
        Cause::Append {
            request,
            log_end_offset,
        } => {
            v.kind = "append";
            v.request = Some(request);
            v.high_watermark = Some(log_end_offset);
        }
        Cause::IsrShrink { high_watermark } => {
            v.kind = "isr_shrink";
            v.high_watermark = Some(high_watermark);
        }
        Cause::PartitionsChanged => v.kind = "partitions_changed",
        Cause::Expired => v.kind = "expired",
        Cause::Error(code) => {
            v.kind = "error";
            v.error = Some(error_name(code));
        }
    }
    v
}

/// A request as `/api/requests` serves it.
#[derive(Clone, Debug, Serialize)]
pub struct RequestView {
    /// Its number in the log.
    pub seq: u64,
    /// Kafka's request name (`Produce`, `FetchConsumer`, `FetchFollower`, `Metadata`, ...).
    pub request: String,
    /// The story's word for it (`produce`, `fetch`, `follower-fetch`, ...).
    pub kind: String,
    /// API version.
    pub api_version: i16,
    /// Correlation id.
    pub correlation_id: i32,
    /// The client's `client.id`.
    pub client_id: String,
    /// The client's address.
    pub peer: String,
    /// When it arrived, on the broker clock.
    pub at_ms: u64,
    /// `in_flight`, `parked` or `done`.
    pub state: &'static str,
    /// A produce's acks.
    pub acks: Option<i16>,
    /// A fetch's replica id.
    pub replica_id: Option<i32>,
    /// The partitions it touched.
    pub partitions: Vec<PartitionView>,
    /// The purgatory it was parked in.
    pub purgatory: Option<&'static str>,
    /// Its timeout there, on the broker clock.
    pub deadline_ms: Option<u64>,
    /// Kafka's phases in ms, `null` until known.
    pub phases_ms: PhasesView,
    /// What ended its wait.
    pub cause: CauseView,
    /// Kafka's error name, if it failed.
    pub error: Option<String>,
    /// The fault rule that fired on it: `{"rule": 3, "action": "delay 800 ms"}`.
    pub fault: Option<FaultNote>,
    /// The story, step by step (left out where only the one-line story is wanted).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepView>,
    /// The story on one line.
    pub story: String,
}

/// The ring of recent requests.
pub struct RequestLog {
    ring: Ring<RequestEntry>,
}

impl Default for RequestLog {
    fn default() -> Self {
        RequestLog {
            ring: Ring::new(REQUESTS_KEPT),
        }
    }
}

impl RequestLog {
    /// The ring.
    pub fn ring(&self) -> &Ring<RequestEntry> {
        &self.ring
    }
}
