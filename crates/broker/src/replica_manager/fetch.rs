//! `fetch_messages`: the fetch path below the handler (Kafka's
//! `ReplicaManager.fetchMessages`), for consumers and follower replicas alike.
//!
//! A fetch with `replica_id >= 0` comes from a follower. Its `fetch_offset` for a
//! partition *is* that follower's log end offset: it asks for the offset after the last one
//! it has. So before reading, the leader records it (Kafka's `updateFollowerFetchState`),
//! which may let the follower rejoin the ISR and may move the high watermark — completing
//! parked `acks=all` produces and consumer fetches. A follower reads up to the leader's log
//! end; a consumer only up to the high watermark (records above it are not yet safe, and
//! asking above it yields no records and no error).
//!
//! The fetch is answered at once when `max_wait_ms` is 0 or [`can_respond_now`] holds;
//! otherwise a [`DelayedFetch`] is parked until it does or `max_wait_ms` passes.

use bytes::Bytes;
use kafka_protocol::ResponseError;
use replog::{ReadBound, ReadError};

use super::{ReplicaManager, WakeWatch};
use crate::delayed::{
    DelayedFetch, FetchCallback, FetchCompletion, FetchParams, FetchPartitionData,
    FetchPartitionStatus, OpMeta,
};
use crate::partition::{PartitionHandle, TopicPartition};
use crate::request::{Cause, RequestContext};
use crate::telemetry::{Park, PartitionNote};

/// Longest a fetch may be parked, whatever `max_wait_ms` asks for: requests from clients
/// that vanish cannot pile up for days. Real clients ask for well under this.
pub const MAX_FETCH_WAIT_MS: u64 = 60_000;

/// One partition a fetch asks for.
#[derive(Debug, Clone)]
pub struct FetchPartitionRequest {
    /// The partition.
    pub tp: TopicPartition,
    /// Where to read from (a follower's log end offset).
    pub fetch_offset: i64,
    /// The most to return for this partition.
    pub partition_max_bytes: usize,
    /// The leader epoch the fetcher believes current (Fetch v9+; -1: not checked).
    pub current_leader_epoch: i32,
    /// The epoch of the last batch the fetcher holds (Fetch v12+; -1: no divergence check).
    pub last_fetched_epoch: i32,
    /// A follower's own log start offset (Fetch v5+; -1: not given). DeleteRecords waits
    /// for it.
    pub log_start_offset: i64,
}

impl FetchPartitionRequest {
    /// A fetch of `tp` from `fetch_offset` that names no epochs.
    pub fn new(tp: TopicPartition, fetch_offset: i64, partition_max_bytes: usize) -> Self {
        FetchPartitionRequest {
            tp,
            fetch_offset,
            partition_max_bytes,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
            log_start_offset: -1,
        }
    }
}

impl ReplicaManager {
    /// Reads `partitions` for a consumer or a follower and answers through `respond`, at
    /// once or when a parked [`DelayedFetch`] completes. Results come back in the order of
    /// `partitions`.
    pub fn fetch_messages(
        &self,
        ctx: &RequestContext,
        mut params: FetchParams,
        partitions: Vec<FetchPartitionRequest>,
        respond: FetchCallback,
    ) {
        params.max_wait_ms = params.max_wait_ms.min(MAX_FETCH_WAIT_MS);
        let now = self.now_ms();
        let statuses: Vec<FetchPartitionStatus> = partitions
            .into_iter()
            .map(|p| {
                let handle = self.partition(&p.tp.topic, p.tp.partition);
                // The epochs first: a fetcher with a stale view, or whose log has diverged
                // from ours, gets told so, and its fetch offset is not taken as its LEO.
                let (mut error, diverging_epoch) = match &handle {
                    None => (Some(ResponseError::UnknownTopicOrPartition), None),
                    Some(h) => check_epochs(h, &p),
                };
                if let (Some(h), None, None, true) =
                    (&handle, error, diverging_epoch, params.is_from_follower())
                {
                    error = self
                        .update_follower_fetch_state(ctx, h, params.replica_id, &p, now)
                        .err();
                }
                FetchPartitionStatus {
                    tp: p.tp,
                    handle,
                    fetch_offset: p.fetch_offset,
                    partition_max_bytes: p.partition_max_bytes,
                    error,
                    diverging_epoch,
                }
            })
            .collect();
        let wait = (params.min_bytes, params.max_wait_ms);
        // A follower fetch built before the follower heard of new partitions is not
        // parked (follower_wakeups.rs).
        let missed_wake =
            params.is_from_follower() && self.follower_wakeups.missed_by(params.replica_id);
        if params.max_wait_ms == 0 || missed_wake || can_respond_now(&params, &statuses) {
            let notes = statuses.iter().map(note_of);
            self.telemetry
                .note_fetch(ctx.trace, params.replica_id, wait, notes, None);
            respond(read_from_local_log(&params, &statuses));
            return;
        }
        let kind = if params.is_from_follower() {
            "follower-fetch"
        } else {
            "fetch"
        };
        let meta = OpMeta::new(ctx, kind, &self.timer, params.max_wait_ms);
        let park = Park {
            purgatory: "Fetch",
            created_ms: meta.created_ms,
            deadline_ms: meta.deadline_ms,
        };
        let notes = statuses.iter().map(note_of);
        self.telemetry
            .note_fetch(ctx.trace, params.replica_id, wait, notes, Some(park));
        // When it completes, telemetry learns what ended it, then the handler answers.
        let telemetry = self.telemetry.clone();
        let (trace, from_follower) = (ctx.trace, params.is_from_follower());
        let completion: FetchCompletion = Box::new(move |results, cause| {
            let errors = results.iter().map(|(_, d)| d.error);
            telemetry.fetch_completed(trace, cause, from_follower, errors);
            respond(results);
        });
        let mut op = DelayedFetch::new(meta, params, statuses, completion);
        if params.is_from_follower() {
            op = op.woken_by(WakeWatch::new(&self.follower_wakeups));
        }
        let keys = op.keys();
        op.log_created(&keys);
        self.fetch_purgatory
            .try_complete_else_watch(op, params.max_wait_ms, keys);
    }

    /// Records a follower's fetch offset as its log end offset, and its log start offset
    /// (Kafka's `updateFollowerFetchState`); the HW may move and the follower may rejoin
    /// the ISR. Operations this completes (produces waiting for the HW, consumer fetches,
    /// DeleteRecords waiting for the low watermark) name this fetch as their cause.
    fn update_follower_fetch_state(
        &self,
        ctx: &RequestContext,
        handle: &PartitionHandle,
        replica_id: i32,
        p: &FetchPartitionRequest,
        now_ms: u64,
    ) -> Result<(), ResponseError> {
        let fetch_offset = p.fetch_offset;
        let (update, log_start_moved) = self
            .update_partition(handle, |log| {
                let update = log.update_follower_fetch(replica_id, fetch_offset, now_ms)?;
                let moved = log
                    .update_follower_log_start_offset(replica_id, p.log_start_offset)
                    .unwrap_or(false);
                Ok::<_, replog::FollowerError>((update, moved))
            })
            .map_err(|e| e.error())?;
        self.telemetry
            .follower_fetched(&handle.tp, now_ms, ctx, replica_id, fetch_offset, &update);
        let cause = Cause::FollowerFetch {
            replica: replica_id,
            fetch_offset,
            high_watermark: update.change.after.high_watermark,
            request: ctx.trace.seq(),
            correlation_id: ctx.correlation_id,
        };
        if log_start_moved {
            self.follower_log_start_moved(&handle.tp, cause);
        }
        self.complete_waiting(&handle.tp, &update.change, cause);
        Ok(())
    }
}

/// A fetch's epochs against the partition's (Kafka's `Partition.fetchRecords`): the
/// current leader epoch must match ours ([`super::check_leader_epoch`]); and if the
/// fetcher names the epoch of its last batch, our log must know that epoch (else
/// OFFSET_OUT_OF_RANGE) and hold it up to its fetch offset. If it does not, the logs diverged (the fetcher kept records of an epoch whose
/// leader lost them): the answer is where that epoch ends here, with no records, and the
/// fetcher truncates to it (KIP-320).
fn check_epochs(
    handle: &PartitionHandle,
    p: &FetchPartitionRequest,
) -> (Option<ResponseError>, Option<(i32, i64)>) {
    let log = handle.lock();
    if !log.is_leader() {
        // Only the leader serves fetches (consumers' and followers' alike).
        return (Some(ResponseError::NotLeaderOrFollower), None);
    }
    if let Err(e) = super::check_leader_epoch(log.leader_epoch(), p.current_leader_epoch) {
        return (Some(e), None);
    }
    match log.diverging_epoch(p.last_fetched_epoch, p.fetch_offset) {
        Ok(diverging) => (None, diverging),
        Err(e) => (Some(e.error()), None),
    }
}

/// Kafka's rule for answering a fetch without (further) waiting: no partitions, an error
/// or a diverged log on any partition, `min_bytes == 0`, or at least `min_bytes` readable, counting each
/// partition up to its `partition_max_bytes` and the whole up to `max_bytes`.
pub fn can_respond_now(params: &FetchParams, partitions: &[FetchPartitionStatus]) -> bool {
    let mut accumulated = 0usize;
    for p in partitions {
        if p.error.is_some() || p.diverging_epoch.is_some() {
            return true;
        }
        let Some(handle) = p.handle.as_ref().filter(|h| !h.is_deleted()) else {
            return true;
        };
        let log = handle.lock();
        if !log.is_leader() {
            return true; // leadership moved away: the read answers NOT_LEADER_OR_FOLLOWER
        }
        if p.fetch_offset < log.log_start_offset() || p.fetch_offset > log.log_end_offset() {
            return true; // out of range: the read answers OFFSET_OUT_OF_RANGE
        }
        let available = log.bytes_available(p.fetch_offset, params.bound);
        accumulated = accumulated.saturating_add(available.min(p.partition_max_bytes));
    }
    partitions.is_empty() || accumulated.min(params.max_bytes) >= params.min_bytes
}

/// Reads every partition of a fetch (at once, or when a parked fetch completes).
/// `max_bytes` bounds the whole answer, except that the first batch found is always
/// returned whole (KIP-74), so a consumer can never get stuck behind a large batch.
pub fn read_from_local_log(
    params: &FetchParams,
    partitions: &[FetchPartitionStatus],
) -> Vec<(TopicPartition, FetchPartitionData)> {
    let mut remaining = params.max_bytes;
    let mut first = true;
    partitions
        .iter()
        .map(|p| {
            let data = match (&p.handle, p.error) {
                (_, Some(error)) => FetchPartitionData::error(error),
                (Some(handle), None) if p.diverging_epoch.is_some() => {
                    let log = handle.lock();
                    FetchPartitionData {
                        error: None,
                        high_watermark: log.high_watermark(),
                        last_stable_offset: log.last_stable_offset(),
                        log_start_offset: log.log_start_offset(),
                        records: Some(Bytes::new()),
                        diverging_epoch: p.diverging_epoch,
                        aborted_transactions: None,
                    }
                }
                (Some(handle), None) if !handle.is_deleted() && !handle.lock().is_leader() => {
                    FetchPartitionData::error(ResponseError::NotLeaderOrFollower)
                }
                (Some(handle), None) if !handle.is_deleted() => {
                    let log = handle.lock();
                    let budget = p.partition_max_bytes.min(remaining);
                    let read = if budget == 0 && !first {
                        Ok(Bytes::new())
                    } else {
                        log.read(p.fetch_offset, budget, params.bound)
                            .map(|read| read.records)
                    };
                    match read {
                        Ok(records) => {
                            if !records.is_empty() {
                                first = false;
                            }
                            remaining = remaining.saturating_sub(records.len());
                            let aborted_transactions = (params.bound == ReadBound::LastStable)
                                .then(|| aborted_in(&log, p.fetch_offset, &records));
                            FetchPartitionData {
                                error: None,
                                high_watermark: log.high_watermark(),
                                last_stable_offset: log.last_stable_offset(),
                                log_start_offset: log.log_start_offset(),
                                records: Some(records),
                                diverging_epoch: None,
                                aborted_transactions,
                            }
                        }
                        Err(e @ ReadError::OffsetOutOfRange { .. }) => FetchPartitionData {
                            error: Some(e.error()),
                            high_watermark: log.high_watermark(),
                            last_stable_offset: log.last_stable_offset(),
                            log_start_offset: log.log_start_offset(),
                            records: None,
                            diverging_epoch: None,
                            aborted_transactions: None,
                        },
                    }
                }
                _ => FetchPartitionData::error(ResponseError::UnknownTopicOrPartition),
            };
            (p.tp.clone(), data)
        })
        .collect()
}

/// The aborted transactions `records`, read from `fetch_offset`, overlap: up to the
/// offset after its last batch (none if it holds none).
fn aborted_in(
    log: &replog::Partition,
    fetch_offset: i64,
    records: &[u8],
) -> Vec<replog::AbortedTxn> {
    match replog::batch::batch_headers(records).last() {
        Some(last) => log.aborted_transactions(fetch_offset, last.next_offset()),
        None => Vec::new(),
    }
}

/// What the request log keeps of one partition of a fetch.
fn note_of(s: &FetchPartitionStatus) -> PartitionNote {
    PartitionNote {
        tp: s.tp.clone(),
        offset: s.fetch_offset,
        last_offset: s.fetch_offset,
        required: None,
        error: s.error.map(|e| e.code()),
    }
}
