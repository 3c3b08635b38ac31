//! Fetch: consumers read records, and followers replicate.
//!
//! This handler translates a Fetch request into [`ReplicaManager::fetch_messages`] and the
//! per-partition results back into a Fetch response. What a fetch means — a follower's
//! fetch offset is its log end offset and may move the high watermark; a consumer reads
//! only below the high watermark; when a fetch is answered at once and when it is parked
//! as a `DelayedFetch` — is the replica manager's business (see
//! [`crate::replica_manager`]'s `fetch` module and [`crate::delayed::fetch`]).
//!
//! Three things are decided here, all about the wire. A partition answered with an error
//! carries -1 for its offsets, as Kafka's, and an empty (never a null) record set. And this broker never creates fetch sessions
//! (KIP-227). It answers `session_id` 0, which a client takes as "send full requests", so
//! an incremental fetch names a session we don't know: FETCH_SESSION_ID_NOT_FOUND.

use std::sync::Arc;

use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ProducerId, ResponseKind, TopicName};
use kafka_protocol::ResponseError;
use replog::ReadBound;
use tokio::sync::oneshot;

use super::{Reply, RequestContext};
use crate::delayed::{FetchParams, FetchPartitionData};
use crate::partition::TopicPartition;
use crate::replica_manager::{FetchPartitionRequest, ReplicaManager};

/// The most a response to `req` may carry: its `max_bytes`, capped by the broker's
/// `fetch.max.bytes`. (The connection reserves this much before running the handler.)
pub fn response_max_bytes(rm: &ReplicaManager, req: &FetchRequest) -> usize {
    (req.max_bytes.max(0) as usize).min(rm.config.fetch_max_bytes)
}

/// Handles a Fetch request from a consumer or a follower.
pub fn handle(rm: &Arc<ReplicaManager>, ctx: &RequestContext, req: FetchRequest) -> Reply {
    if req.session_id != 0 || req.session_epoch > 0 {
        return Reply::now(ResponseKind::Fetch(
            FetchResponse::default().with_error_code(ResponseError::FetchSessionIdNotFound.code()),
        ));
    }
    // Fetch v15+ moves the replica id into `replica_state`; we advertise up to v12.
    let replica_id = req.replica_id.0;
    let params = FetchParams {
        replica_id,
        max_wait_ms: req.max_wait_ms.max(0) as u64,
        min_bytes: req.min_bytes.max(0) as usize,
        max_bytes: response_max_bytes(rm, &req),
        // A follower reads to the log end; a consumer to the high watermark, or with
        // `read_committed` (isolation level 1) to the last stable offset.
        bound: if replica_id >= 0 {
            ReadBound::LogEnd
        } else if req.isolation_level == 1 {
            ReadBound::LastStable
        } else {
            ReadBound::HighWatermark
        },
    };
    let mut layout: Vec<(TopicName, usize)> = Vec::with_capacity(req.topics.len());
    let mut partitions = Vec::new();
    for topic in req.topics {
        let name: Arc<str> = Arc::from(topic.topic.0.as_str());
        layout.push((topic.topic, topic.partitions.len()));
        // Both epochs decode as -1 (not checked) below the versions that carry them
        // (v9 and v12).
        partitions.extend(topic.partitions.into_iter().map(|p| FetchPartitionRequest {
            tp: TopicPartition {
                topic: name.clone(),
                partition: p.partition,
            },
            fetch_offset: p.fetch_offset,
            partition_max_bytes: p.partition_max_bytes.max(0) as usize,
            current_leader_epoch: p.current_leader_epoch,
            last_fetched_epoch: p.last_fetched_epoch,
            log_start_offset: p.log_start_offset,
        }));
    }
    let (tx, rx) = oneshot::channel();
    rm.fetch_messages(
        ctx,
        params,
        partitions,
        Box::new(move |results| {
            let _ = tx.send(ResponseKind::Fetch(build_response(layout, results)));
        }),
    );
    Reply::from_callback(rx)
}

/// Builds the wire response: the results, in request order, regrouped by topic.
fn build_response(
    layout: Vec<(TopicName, usize)>,
    results: Vec<(TopicPartition, FetchPartitionData)>,
) -> FetchResponse {
    let mut results = results.into_iter();
    let responses = layout
        .into_iter()
        .map(|(name, count)| {
            let partitions = results
                .by_ref()
                .take(count)
                .map(|(tp, data)| {
                    // Kafka's `readFromLog` answers a partition that failed, whatever the
                    // error (OFFSET_OUT_OF_RANGE too), with unknown offsets: -1 for the
                    // high watermark, the last stable offset and the log start.
                    let offset = |known: i64| if data.error.is_some() { -1 } else { known };
                    let mut answer = PartitionData::default();
                    if let Some((epoch, end_offset)) = data.diverging_epoch {
                        answer.diverging_epoch.epoch = epoch;
                        answer.diverging_epoch.end_offset = end_offset;
                    }
                    answer
                        .with_partition_index(tp.partition)
                        .with_error_code(data.error.map_or(0, |e| e.code()))
                        .with_high_watermark(offset(data.high_watermark))
                        .with_last_stable_offset(offset(data.last_stable_offset))
                        .with_log_start_offset(offset(data.log_start_offset))
                        .with_aborted_transactions(data.aborted_transactions.map(|aborted| {
                            aborted
                                .iter()
                                .map(|a| {
                                    AbortedTransaction::default()
                                        .with_producer_id(ProducerId(a.producer_id))
                                        .with_first_offset(a.first_offset)
                                })
                                .collect()
                        }))
                        .with_preferred_read_replica((-1).into())
                        // Never a null record set: Kafka sends an empty one with an error,
                        // and librdkafka takes null (size -1) in a flexible Fetch for a
                        // broken response, drops it and fetches again at once: a consumer
                        // out of range then spins instead of resetting its offset.
                        .with_records(Some(data.records.unwrap_or_default()))
                })
                .collect();
            FetchableTopicResponse::default()
                .with_topic(name)
                .with_partitions(partitions)
        })
        .collect();
    FetchResponse::default().with_responses(responses)
}
