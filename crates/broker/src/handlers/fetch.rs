//! Fetch: consumers read records, and followers replicate.
//!
//! A fetch with `replica_id >= 0` comes from a follower replica. Its `fetch_offset` for a
//! partition *is* that follower's log end offset: it asks for the offset after the last one
//! it has. So before reading, the leader records it (`update_follower_fetch`), which may let
//! the follower rejoin the ISR and may move the high watermark — completing parked
//! `acks=all` produces and consumer fetches. A follower reads up to the leader's log end.
//!
//! A consumer (`replica_id = -1`) reads only up to the high watermark: records above it are
//! not yet safe, and asking above it yields no records and no error.
//!
//! The broker answers at once when `max_wait_ms <= 0`, when at least `min_bytes` are
//! available, or on any error; otherwise it parks a [`DelayedFetch`] that the next append
//! (for followers) or HW move (for consumers) re-checks, or that expires after
//! `max_wait_ms` with whatever is there.

use std::sync::Arc;

use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ResponseKind, TopicName};
use replog::{FollowerError, ReadBound, ReadError};
use tokio::sync::oneshot;
use tracing::info;

use super::{sb, Reply, RequestContext};
use crate::delayed::{DelayedFetch, FetchParams, FetchPartitionSpec, OpMeta};
use crate::error_codes as ec;
use crate::replica_manager::ReplicaManager;

/// Longest a fetch may be parked, whatever `max_wait_ms` asks for.
pub const MAX_FETCH_WAIT_MS: u64 = 60_000;

/// The most a response to `req` may carry: its `max_bytes`, capped by the broker's
/// `fetch.max.bytes`. (The connection reserves this much before running the handler.)
pub fn response_max_bytes(rm: &ReplicaManager, req: &FetchRequest) -> usize {
    (req.max_bytes.max(0) as usize).min(rm.config.fetch_max_bytes)
}

/// Handles a Fetch request from a consumer or a follower.
pub fn handle(rm: &Arc<ReplicaManager>, ctx: &RequestContext, req: FetchRequest) -> Reply {
    // Fetch v15+ moves the replica id into `replica_state`; we advertise up to v12.
    let replica_id = req.replica_id.0;
    let is_follower = replica_id >= 0;
    let max_bytes = response_max_bytes(rm, &req);

    // This broker never creates fetch sessions (it answers session_id 0, which a client
    // takes as "send full requests"), so an incremental fetch names a session we don't know.
    if req.session_id != 0 || req.session_epoch > 0 {
        return Reply::now(ResponseKind::Fetch(
            FetchResponse::default().with_error_code(ec::FETCH_SESSION_ID_NOT_FOUND),
        ));
    }

    let now = rm.now_ms();
    let mut topics: Vec<(Arc<str>, Vec<FetchPartitionSpec>)> = Vec::with_capacity(req.topics.len());
    let mut hw_moved = Vec::new();
    for topic in req.topics {
        let name: Arc<str> = Arc::from(topic.topic.0.as_str());
        let mut specs = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let handle = rm.partition(&name, p.partition);
            let mut error_code = if handle.is_some() {
                ec::NONE
            } else {
                ec::UNKNOWN_TOPIC_OR_PARTITION
            };
            if let (Some(h), true) = (&handle, is_follower) {
                let (update, freed) = {
                    let mut log = h.lock();
                    let update = log.update_follower_fetch(replica_id, p.fetch_offset, now);
                    // Newly replicated data may now be past retention.bytes.
                    let moved = update.as_ref().is_ok_and(|u| u.high_watermark_advanced);
                    (update, if moved { log.enforce_retention() } else { 0 })
                };
                rm.account_log_bytes(0, freed);
                match update {
                    Ok(u) => {
                        if u.isr_changed {
                            info!(
                                target: "purgatory::isr",
                                tp = %h.tp, replica_id, isr = ?h.lock().isr(),
                                "ISR expand: follower caught up to the high watermark"
                            );
                        }
                        if u.high_watermark_advanced {
                            info!(
                                target: "purgatory::replication",
                                tp = %h.tp,
                                replica_id,
                                high_watermark = u.high_watermark,
                                "high watermark advanced: follower {replica_id} fetched from offset {}",
                                p.fetch_offset
                            );
                            hw_moved.push(h.tp.clone());
                        }
                    }
                    Err(FollowerError::OffsetOutOfRange { .. }) => {
                        error_code = ec::OFFSET_OUT_OF_RANGE
                    }
                    Err(_) => error_code = ec::NOT_LEADER_OR_FOLLOWER,
                }
            }
            specs.push(FetchPartitionSpec {
                partition: p.partition,
                handle,
                fetch_offset: p.fetch_offset,
                partition_max_bytes: p.partition_max_bytes.max(0) as usize,
                error_code,
            });
        }
        topics.push((name, specs));
    }
    for tp in &hw_moved {
        rm.on_high_watermark_advanced(tp);
    }

    let params = FetchParams {
        replica_id,
        min_bytes: req.min_bytes.max(0) as usize,
        max_bytes,
        bound: if is_follower {
            ReadBound::LogEnd
        } else {
            ReadBound::HighWatermark
        },
    };
    // A parked fetch lives until its data or its wait; cap the wait so that requests from
    // clients that vanish cannot pile up for days. Real clients ask for well under this.
    let max_wait_ms = (req.max_wait_ms.max(0) as u64).min(MAX_FETCH_WAIT_MS);
    let kind = if is_follower {
        "follower-fetch"
    } else {
        "fetch"
    };
    let (tx, rx) = oneshot::channel();
    let meta = OpMeta::new(ctx, kind, &rm.timer, max_wait_ms);
    let op = DelayedFetch::new(meta, params, topics, tx);
    if max_wait_ms == 0 || op.can_respond_now() {
        return Reply::now(ResponseKind::Fetch(op.read_response()));
    }
    let keys = op.keys();
    op.log_created(&keys);
    rm.fetch_purgatory
        .try_complete_else_watch(op, max_wait_ms, keys);
    Reply::Later(rx)
}

/// Reads every partition of a fetch and builds the response (used at once, or when a
/// parked fetch completes). `max_bytes` bounds the whole response, except that the first
/// batch found is always returned whole (KIP-74), so a consumer can never get stuck.
pub fn read_response(
    params: &FetchParams,
    topics: &[(Arc<str>, Vec<FetchPartitionSpec>)],
) -> FetchResponse {
    let mut remaining = params.max_bytes;
    let mut first = true;
    let responses = topics
        .iter()
        .map(|(name, specs)| {
            let partitions = specs
                .iter()
                .map(|spec| {
                    let data = PartitionData::default()
                        .with_partition_index(spec.partition)
                        .with_preferred_read_replica((-1).into());
                    let Some(handle) = spec
                        .handle
                        .as_ref()
                        .filter(|h| !h.is_deleted() && spec.error_code == ec::NONE)
                    else {
                        let code = if spec.error_code == ec::NONE {
                            ec::UNKNOWN_TOPIC_OR_PARTITION
                        } else {
                            spec.error_code
                        };
                        return data
                            .with_error_code(code)
                            .with_high_watermark(-1)
                            .with_last_stable_offset(-1)
                            .with_log_start_offset(-1);
                    };
                    let log = handle.lock();
                    let data = data
                        .with_high_watermark(log.high_watermark())
                        .with_last_stable_offset(log.high_watermark())
                        .with_log_start_offset(log.log_start_offset());
                    let budget = spec.partition_max_bytes.min(remaining);
                    if budget == 0 && !first {
                        return data.with_records(Some(bytes::Bytes::new()));
                    }
                    match log.read(spec.fetch_offset, budget, params.bound) {
                        Ok(read) => {
                            if !read.records.is_empty() {
                                first = false;
                            }
                            remaining = remaining.saturating_sub(read.records.len());
                            data.with_records(Some(read.records))
                        }
                        Err(ReadError::OffsetOutOfRange { .. }) => {
                            data.with_error_code(ec::OFFSET_OUT_OF_RANGE)
                        }
                    }
                })
                .collect();
            FetchableTopicResponse::default()
                .with_topic(TopicName(sb(name)))
                .with_partitions(partitions)
        })
        .collect();
    FetchResponse::default().with_responses(responses)
}
