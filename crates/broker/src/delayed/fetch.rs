//! `DelayedFetch`: a fetch waiting for enough data.
//!
//! Kafka's rule (`DelayedFetch.tryComplete`): add up, over the fetch's partitions, the
//! bytes readable from each fetch offset — up to the log end for a follower, up to the high
//! watermark for a consumer — counting each partition at most up to its
//! `partition_max_bytes`; the fetch can be answered once that sum (at most the request's
//! `max_bytes`) reaches `min_bytes`. It is answered at once, whatever the bytes, if a
//! partition has an error (deleted, offset out of range) or if `min_bytes` is 0. Otherwise
//! it waits, and is re-checked whenever a watched partition's log grows (followers) or its
//! high watermark moves (consumers), until `max_wait_ms` passes; then it reads whatever is
//! there and answers.
//!
//! The rule and the read live with the replica manager (`can_respond_now` and
//! `read_from_local_log` in `replica_manager/fetch.rs`), which also uses them when the
//! fetch arrives, to decide whether it needs to wait at all; the same read builds the
//! answer either way.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use replog::ReadBound;
use timewheel::{Completion, DelayedOperation};

use super::{ended_by, Once, OpMeta, TRACE_TARGET};
use crate::partition::{PartitionHandle, TopicPartition};
use crate::replica_manager::fetch::{can_respond_now, read_from_local_log};
use crate::replica_manager::WakeWatch;
use crate::request::Cause;

/// Consumer fetches are logged at info; followers long-poll all the time, so their parked
/// fetches are logged at debug and do not drown the story of a produce.
macro_rules! fetch_event {
    ($follower:expr, $($arg:tt)+) => {
        if $follower {
            tracing::debug!($($arg)+)
        } else {
            tracing::info!($($arg)+)
        }
    };
}

/// What the fetcher asked for, overall (Kafka's `FetchParams`).
#[derive(Debug, Clone, Copy)]
pub struct FetchParams {
    /// -1 for consumers; the follower's broker id otherwise.
    pub replica_id: i32,
    /// How long the fetch may wait for `min_bytes`.
    pub max_wait_ms: u64,
    /// Answer once this many bytes are available (0: answer at once).
    pub min_bytes: usize,
    /// Bound on the whole response (the first batch is always returned whole, KIP-74).
    pub max_bytes: usize,
    /// How far the fetcher may read: the log end (followers) or the HW (consumers).
    pub bound: ReadBound,
}

impl FetchParams {
    /// A follower replica's fetch (`replica_id >= 0`).
    pub fn is_from_follower(&self) -> bool {
        self.replica_id >= 0
    }
}

/// One partition of a fetch (Kafka's `FetchPartitionStatus`).
#[derive(Clone)]
pub struct FetchPartitionStatus {
    /// The partition.
    pub tp: TopicPartition,
    /// Its log, if it exists.
    pub handle: Option<Arc<PartitionHandle>>,
    /// Where to read from.
    pub fetch_offset: i64,
    /// Bound for this partition.
    pub partition_max_bytes: usize,
    /// An error found before reading (answered as-is).
    pub error: Option<ResponseError>,
    /// Set when the fetcher's log diverged from ours: (epoch, its end offset here),
    /// answered at once with no records.
    pub diverging_epoch: Option<(i32, i64)>,
}

/// What a fetch returns for one partition (Kafka's `FetchPartitionData`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartitionData {
    /// `None` on success.
    pub error: Option<ResponseError>,
    /// The partition's high watermark (-1 on error).
    pub high_watermark: i64,
    /// The last stable offset (-1 on error).
    pub last_stable_offset: i64,
    /// The log start offset (-1 on error).
    pub log_start_offset: i64,
    /// Whole stored batches (possibly empty); `None` on error.
    pub records: Option<Bytes>,
    /// Where the fetcher must truncate to, (epoch, end offset), if its log diverged.
    pub diverging_epoch: Option<(i32, i64)>,
    /// For a `read_committed` read, the aborted transactions the returned records
    /// overlap, so the consumer drops their records; `None` for any other read.
    pub aborted_transactions: Option<Vec<replog::AbortedTxn>>,
}

impl FetchPartitionData {
    /// The answer for a partition that failed: no offsets, no records.
    pub(crate) fn error(error: ResponseError) -> Self {
        FetchPartitionData {
            error: Some(error),
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            records: None,
            diverging_epoch: None,
            aborted_transactions: None,
        }
    }
}

/// Where a fetch's answer goes: one entry per partition, in the order they were given.
pub type FetchCallback = Box<dyn FnOnce(Vec<(TopicPartition, FetchPartitionData)>) + Send>;

/// Where a parked fetch ends: what it read, and what ended it (see
/// [`super::produce::ProduceCompletion`]).
pub type FetchCompletion = Box<dyn FnOnce(Vec<(TopicPartition, FetchPartitionData)>, Cause) + Send>;

/// A fetch parked in the fetch purgatory.
pub struct DelayedFetch {
    meta: OpMeta,
    params: FetchParams,
    partitions: Vec<FetchPartitionStatus>,
    respond: Once<FetchCompletion>,
    /// A follower's fetch also ends when topics change (`follower_wakeups.rs`).
    wake: Option<WakeWatch>,
}

impl DelayedFetch {
    /// A fetch over `partitions`.
    pub fn new(
        meta: OpMeta,
        params: FetchParams,
        partitions: Vec<FetchPartitionStatus>,
        respond: FetchCompletion,
    ) -> Self {
        DelayedFetch {
            meta,
            params,
            partitions,
            respond: Once::new(respond),
            wake: None,
        }
    }

    /// Also completes once `wake` says the followed partitions changed.
    pub fn woken_by(mut self, wake: WakeWatch) -> Self {
        self.wake = Some(wake);
        self
    }

    /// Who asked and when it times out.
    pub fn meta(&self) -> &OpMeta {
        &self.meta
    }

    /// The partitions this fetch watches (those that exist).
    pub fn keys(&self) -> Vec<TopicPartition> {
        self.partitions
            .iter()
            .filter(|p| p.handle.is_some())
            .map(|p| p.tp.clone())
            .collect()
    }

    /// Traces the operation's creation.
    pub fn log_created(&self, keys: &[TopicPartition]) {
        fetch_event!(
            self.params.is_from_follower(),
            target: TRACE_TARGET,
            kind = "DelayedFetch",
            fetcher = self.meta.kind,
            replica_id = self.params.replica_id,
            correlation_id = self.meta.correlation_id,
            client = %self.meta.client_id,
            keys = ?keys,
            deadline_ms = self.meta.deadline_ms,
            waits_for = %self.waits_for(),
            "created: fetch parked until min_bytes are available or max_wait_ms passes"
        );
    }

    /// What the operation still needs, in words.
    fn waits_for(&self) -> String {
        let bound = match self.params.bound {
            ReadBound::LogEnd => "log end",
            ReadBound::HighWatermark => "high watermark",
            ReadBound::LastStable => "last stable offset",
        };
        let offsets: Vec<String> = self
            .partitions
            .iter()
            .map(|p| format!("{}@{}", p.tp, p.fetch_offset))
            .collect();
        format!(
            "{} bytes below the {bound} from {}",
            self.params.min_bytes,
            offsets.join(", ")
        )
    }
}

impl DelayedOperation for DelayedFetch {
    /// The change that woke the purgatory: an append, a follower fetch, an ISR shrink.
    type Cause = Cause;

    fn try_complete(&self) -> bool {
        self.wake.as_ref().is_some_and(WakeWatch::woken)
            || can_respond_now(&self.params, &self.partitions)
    }

    fn on_complete(&self, how: Completion<Cause>) {
        let results = read_from_local_log(&self.params, &self.partitions);
        let why = match &how {
            Completion::Expired => "expired: max_wait_ms passed",
            Completion::Satisfied(Cause::PartitionsChanged) => {
                "the followed partitions changed: the next fetch names them"
            }
            _ => "min_bytes available",
        };
        fetch_event!(
            self.params.is_from_follower(),
            target: TRACE_TARGET,
            kind = "DelayedFetch",
            fetcher = self.meta.kind,
            correlation_id = self.meta.correlation_id,
            client = %self.meta.client_id,
            why,
            waited_ms = self.meta.waited_ms(),
            "completed"
        );
        let cause = ended_by(how, results.iter().find_map(|(_, d)| d.error));
        if let Some(respond) = self.respond.take() {
            respond(results, cause);
        }
    }

    fn describe(&self) -> String {
        format!(
            "{} waits for {}{}",
            self.meta.who("DelayedFetch"),
            self.waits_for(),
            self.meta.request_tag()
        )
    }
}
