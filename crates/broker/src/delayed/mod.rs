//! Kafka's delayed operations, built on the `timewheel` purgatory.
//!
//! A delayed operation is a request that cannot be answered yet. It sits in a purgatory,
//! watching one or more topic-partitions, until either its condition holds — checked each
//! time something happens to a watched partition (`check_and_complete`) — or its timeout
//! fires in the timing wheel. Exactly one of the two completes it, once.
//!
//! - [`DelayedProduce`]: an `acks=all` produce waiting for the high watermark.
//! - [`DelayedFetch`]: a fetch waiting for `min_bytes` of data (up to the log end for a
//!   follower, up to the high watermark for a consumer) or for `max_wait_ms`.
//! - [`DelayedDeleteRecords`]: a DeleteRecords waiting for every replica's log start
//!   offset (the low watermark) to reach the leader's new one.
//!
//! The group coordinator's `DelayedJoin`, `InitialDelayedJoin`, `DelayedSync` and
//! `DelayedHeartbeat` live with it, in [`crate::coordinator::delayed`], as Kafka's do.
//!
//! An operation answers through a *callback* handed in by whoever parked it (Kafka's
//! `responseCallback`): it produces domain results — per-partition errors, offsets,
//! records — and knows nothing of the wire format or of the handler that will encode them.
//! The request handlers sit above this module and are never imported by it.
//!
//! Every operation's life is traced under the target `purgatory::purgatory`: created (what
//! it waits for, and until when), completed (why, and how long it waited). With
//! `RUST_LOG=purgatory=info` the story of each request can be read in the log.

pub mod delete_records;
pub mod fetch;
pub mod produce;

pub use delete_records::{
    DelayedDeleteRecords, DeleteRecordsCallback, DeleteRecordsCompletion,
    DeleteRecordsPartitionResult, DeleteRecordsPartitionStatus, LiveBrokers,
};
pub use fetch::{
    DelayedFetch, FetchCallback, FetchCompletion, FetchParams, FetchPartitionData,
    FetchPartitionStatus,
};
pub use produce::{DelayedProduce, ProduceCallback, ProduceCompletion, ProducePartitionResult};

use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use std::net::SocketAddr;
use std::sync::Arc;
use timewheel::{Completion, Timer};
use tracing::info;

use crate::partition::{PartitionHandle, TopicPartition};
use crate::request::{Cause, RequestContext, TraceId};

/// Tracing target for delayed-operation lifecycles.
pub const TRACE_TARGET: &str = "purgatory::purgatory";

/// Who asked, and the operation's timing: shown in logs and the state API.
#[derive(Clone)]
pub struct OpMeta {
    /// `produce`, `fetch`, `follower-fetch` or `delete-records`.
    pub kind: &'static str,
    /// The request's correlation id.
    pub correlation_id: i32,
    /// The client's `client.id`.
    pub client_id: String,
    /// The client's address.
    pub peer: SocketAddr,
    /// When it was parked (broker clock, ms).
    pub created_ms: u64,
    /// When its timeout fires (broker clock, ms).
    pub deadline_ms: u64,
    /// The request's record in the request log.
    pub trace: TraceId,
    timer: Timer,
}

impl OpMeta {
    /// Metadata for an operation created now.
    pub fn new(ctx: &RequestContext, kind: &'static str, timer: &Timer, delay_ms: u64) -> Self {
        let created_ms = timer.now_ms();
        OpMeta {
            timer: timer.clone(),
            deadline_ms: created_ms.saturating_add(delay_ms),
            kind,
            correlation_id: ctx.correlation_id,
            client_id: ctx.client_id.clone(),
            peer: ctx.peer,
            created_ms,
            trace: ctx.trace,
        }
    }

    /// Who is waiting, for snapshots: `DelayedProduce: produce #7 from "rdkafka" (127.0.0.1:50412)`.
    pub fn who(&self, operation: &str) -> String {
        format!(
            "{operation}: {} #{} from {:?} ({})",
            self.kind, self.correlation_id, self.client_id, self.peer
        )
    }

    /// ` [request N]`: where the live view finds this operation's request in the request
    /// log (empty if untraced). Ends a `describe()`.
    pub fn request_tag(&self) -> String {
        if self.trace == TraceId::NONE {
            String::new()
        } else {
            format!(" [request {}]", self.trace.seq())
        }
    }

    /// Traces an operation's creation: `kind` (its Kafka name), the `keys` it watches,
    /// its deadline, what it `waits_for` in words, and its `story`, what parks it.
    fn trace_created(&self, kind: &str, keys: &[TopicPartition], waits_for: &str, story: &str) {
        info!(
            target: TRACE_TARGET,
            kind,
            correlation_id = self.correlation_id,
            client = %self.client_id,
            keys = ?keys,
            deadline_ms = self.deadline_ms,
            waits_for,
            "created: {story}"
        );
    }

    /// Traces an operation's end: `kind`, `why` it ended, and how long it waited.
    fn trace_completed(&self, kind: &str, why: &str) {
        info!(
            target: TRACE_TARGET,
            kind,
            correlation_id = self.correlation_id,
            client = %self.client_id,
            why,
            waited_ms = self.waited_ms(),
            "completed"
        );
    }

    /// How long the operation has waited so far, on the broker clock.
    pub fn waited_ms(&self) -> u64 {
        self.timer.now_ms().saturating_sub(self.created_ms)
    }
}

/// One partition of a parked produce or DeleteRecords (Kafka's `ProducePartitionStatus`
/// and `DeleteRecordsPartitionStatus`): while it waits, its log and the offset it needs
/// there (the high watermark for a produce, the low watermark for a DeleteRecords); and
/// its result so far, `R`.
pub struct PartitionWait<R> {
    /// The partition.
    pub tp: TopicPartition,
    /// Set while the partition waits: its log and the offset it needs.
    pub awaiting: Option<(Arc<PartitionHandle>, i64)>,
    /// The result so far; the operation's end fills in what is left.
    pub result: R,
}

/// The partitions of `parts` still waiting: the keys the purgatory watches.
fn waiting_keys<R>(parts: &Mutex<Vec<PartitionWait<R>>>) -> Vec<TopicPartition> {
    parts
        .lock()
        .iter()
        .filter(|p| p.awaiting.is_some())
        .map(|p| p.tp.clone())
        .collect()
}

/// Ends every partition of `parts` still waiting with REQUEST_TIMED_OUT (through
/// `timed_out`), the answer Kafka gives a partition its condition did not reach, and
/// takes the results, in request order.
fn take_results<R>(
    parts: &Mutex<Vec<PartitionWait<R>>>,
    timed_out: impl Fn(&mut R),
) -> Vec<(TopicPartition, R)> {
    let mut parts = parts.lock();
    for p in parts.iter_mut() {
        if p.awaiting.take().is_some() {
            timed_out(&mut p.result);
        }
    }
    parts.drain(..).map(|p| (p.tp, p.result)).collect()
}

/// A completion callback that runs at most once, whichever path completes the operation
/// (its condition, its timeout, or the broker shutting down drops it unrun).
pub struct Once<F>(Mutex<Option<F>>);

impl<F> Once<F> {
    /// Wraps the callback.
    pub fn new(callback: F) -> Self {
        Once(Mutex::new(Some(callback)))
    }

    /// Takes the callback, the first time only.
    pub fn take(&self) -> Option<F> {
        self.0.lock().take()
    }
}

/// What ended a parked operation, for the request log: its timeout; else the error one of
/// its partitions answered; else the change that satisfied it (nothing is known of a
/// forced completion).
fn ended_by(how: Completion<Cause>, first_error: Option<ResponseError>) -> Cause {
    match (how, first_error) {
        (Completion::Expired, _) => Cause::Expired,
        (_, Some(error)) => Cause::Error(error.code()),
        (Completion::Satisfied(cause), None) => cause,
        (Completion::Forced, None) => Cause::Unknown,
    }
}
