//! `DelayedFetch`: a fetch waiting for enough data.
//!
//! It completes when the bytes available across its partitions reach `min_bytes` — counted
//! up to the log end for a follower, up to the high watermark for a consumer — or when a
//! partition errors (deleted, offset out of range), or when `max_wait_ms` passes; then it
//! reads whatever is there and answers.

use std::sync::Arc;

use kafka_protocol::messages::{FetchResponse, ResponseKind};
use replog::ReadBound;
use timewheel::DelayedOperation;
use tokio::sync::oneshot;
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

use super::{OpMeta, Responder, TRACE_TARGET};
use crate::error_codes as ec;
use crate::handlers::fetch::read_response;
use crate::replica_manager::{PartitionHandle, TopicPartition};

/// What the fetcher asked for, overall.
#[derive(Debug, Clone, Copy)]
pub struct FetchParams {
    /// -1 for consumers; the follower's broker id otherwise.
    pub replica_id: i32,
    /// Answer once this many bytes are available.
    pub min_bytes: usize,
    /// Bound on the whole response (the first batch is always returned whole).
    pub max_bytes: usize,
    /// How far the fetcher may read: the log end (followers) or the HW (consumers).
    pub bound: ReadBound,
}

/// One partition of a fetch.
#[derive(Clone)]
pub struct FetchPartitionSpec {
    /// Partition index.
    pub partition: i32,
    /// The partition, if it exists.
    pub handle: Option<Arc<PartitionHandle>>,
    /// Where to read from.
    pub fetch_offset: i64,
    /// Bound for this partition.
    pub partition_max_bytes: usize,
    /// An error found while handling the request (answered as-is).
    pub error_code: i16,
}

/// A fetch parked in the fetch purgatory.
pub struct DelayedFetch {
    meta: OpMeta,
    params: FetchParams,
    topics: Vec<(Arc<str>, Vec<FetchPartitionSpec>)>,
    respond: Responder,
}

impl DelayedFetch {
    /// A fetch over `topics`.
    pub fn new(
        meta: OpMeta,
        params: FetchParams,
        topics: Vec<(Arc<str>, Vec<FetchPartitionSpec>)>,
        respond: oneshot::Sender<ResponseKind>,
    ) -> Self {
        DelayedFetch {
            meta,
            params,
            topics,
            respond: Responder::new(respond),
        }
    }

    /// Who asked and when it times out.
    pub fn meta(&self) -> &OpMeta {
        &self.meta
    }

    /// The partitions this fetch watches.
    pub fn keys(&self) -> Vec<TopicPartition> {
        self.topics
            .iter()
            .flat_map(|(_, specs)| {
                specs
                    .iter()
                    .filter_map(|s| s.handle.as_ref().map(|h| h.tp.clone()))
            })
            .collect()
    }

    /// Kafka's rule: answer now if there is an error, or `min_bytes` are available.
    pub fn can_respond_now(&self) -> bool {
        let mut available = 0usize;
        let mut any = false;
        for (_, specs) in &self.topics {
            for spec in specs {
                any = true;
                if spec.error_code != ec::NONE {
                    return true;
                }
                let Some(handle) = &spec.handle else {
                    return true;
                };
                if handle.is_deleted() {
                    return true;
                }
                let log = handle.lock();
                if spec.fetch_offset < log.log_start_offset()
                    || spec.fetch_offset > log.log_end_offset()
                {
                    return true;
                }
                available += log.bytes_available(spec.fetch_offset, self.params.bound);
            }
        }
        !any || available >= self.params.min_bytes.max(1)
    }

    /// Reads the partitions now and builds the response.
    pub fn read_response(&self) -> FetchResponse {
        read_response(&self.params, &self.topics)
    }

    /// Traces the operation's creation.
    pub fn log_created(&self, keys: &[TopicPartition]) {
        fetch_event!(
            self.params.replica_id >= 0,
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
}

impl DelayedOperation for DelayedFetch {
    fn try_complete(&self) -> bool {
        self.can_respond_now()
    }

    fn on_complete(&self) {
        let response = self.read_response();
        let waited_ms = self.meta.waited_ms();
        let why = if self.meta.created_ms + waited_ms >= self.meta.deadline_ms {
            "expired: max_wait_ms passed"
        } else {
            "min_bytes available"
        };
        fetch_event!(
            self.params.replica_id >= 0,
            target: TRACE_TARGET,
            kind = "DelayedFetch",
            fetcher = self.meta.kind,
            correlation_id = self.meta.correlation_id,
            client = %self.meta.client_id,
            why,
            waited_ms,
            "completed"
        );
        self.respond.send(ResponseKind::Fetch(response));
    }

    fn describe(&self) -> String {
        format!(
            "{} waits for {}",
            self.meta.who("DelayedFetch"),
            self.waits_for()
        )
    }
}

impl DelayedFetch {
    /// What the operation still needs, in words.
    fn waits_for(&self) -> String {
        let bound = match self.params.bound {
            ReadBound::LogEnd => "log end",
            ReadBound::HighWatermark => "high watermark",
        };
        let offsets: Vec<String> = self
            .topics
            .iter()
            .flat_map(|(topic, specs)| {
                specs
                    .iter()
                    .map(move |s| format!("{topic}-{}@{}", s.partition, s.fetch_offset))
            })
            .collect();
        format!(
            "{} bytes below the {bound} from {}",
            self.params.min_bytes.max(1),
            offsets.join(", ")
        )
    }
}
