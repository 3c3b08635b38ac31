//! Produce: append record batches to partition logs, and answer according to `acks`.
//!
//! - `acks=0`: append and send nothing back.
//! - `acks=1`: answer as soon as the leader has appended.
//! - `acks=-1` (`all`): refuse with NOT_ENOUGH_REPLICAS if the ISR is already smaller than
//!   `min.insync.replicas` (nothing is appended). Otherwise append, then wait until the high
//!   watermark reaches `last_offset + 1` on every partition — the moment every in-sync
//!   replica holds the batch. The wait is a [`DelayedProduce`] in the produce purgatory,
//!   watching each partition; follower fetches that move the HW complete it, and if the
//!   request's `timeout_ms` passes first, still-waiting partitions answer REQUEST_TIMED_OUT.
//!
//! Any other `acks` value gets INVALID_REQUIRED_ACKS for every partition.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, ResponseKind, TopicName};
use tokio::sync::oneshot;
use tracing::debug;

use super::{sb, Reply, RequestContext};
use crate::delayed::{DelayedProduce, OpMeta};
use crate::error_codes as ec;
use crate::replica_manager::{PartitionHandle, ReplicaManager};

/// A partition that is waiting for its high watermark.
#[derive(Clone)]
pub struct AwaitingReplication {
    /// The partition.
    pub handle: Arc<PartitionHandle>,
    /// The HW this produce needs: the offset after its last record.
    pub required_offset: i64,
}

/// The outcome so far of one partition of a produce request.
#[derive(Clone)]
pub struct PartitionStatus {
    /// Partition index.
    pub index: i32,
    /// Error code (NONE while waiting or on success).
    pub error_code: i16,
    /// Offset of the first appended record (-1 on error).
    pub base_offset: i64,
    /// The partition's log start offset (v5+).
    pub log_start_offset: i64,
    /// Optional error message (v8+).
    pub error_message: Option<String>,
    /// Set while the partition waits for replication (acks=all).
    pub awaiting: Option<AwaitingReplication>,
}

impl PartitionStatus {
    fn error(index: i32, code: i16, message: Option<String>) -> Self {
        PartitionStatus {
            index,
            error_code: code,
            base_offset: -1,
            log_start_offset: -1,
            error_message: message,
            awaiting: None,
        }
    }
}

/// Statuses grouped by topic, in request order.
pub type ProduceStatuses = Vec<(String, Vec<PartitionStatus>)>;

/// Handles a Produce request.
pub fn handle(rm: &Arc<ReplicaManager>, ctx: &RequestContext, req: ProduceRequest) -> Reply {
    let acks = req.acks;
    let valid_acks = matches!(acks, -1..=1);
    let mut statuses: ProduceStatuses = Vec::with_capacity(req.topic_data.len());
    for topic in req.topic_data {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let status = if !valid_acks {
                PartitionStatus::error(
                    data.index,
                    ec::INVALID_REQUIRED_ACKS,
                    Some(format!("acks must be -1, 0 or 1, got {acks}")),
                )
            } else if req.transactional_id.is_some() {
                PartitionStatus::error(
                    data.index,
                    ec::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    Some("transactions are not supported by this broker".into()),
                )
            } else {
                append_partition(rm, &name, data.index, data.records, acks)
            };
            partitions.push(status);
        }
        statuses.push((name, partitions));
    }

    if acks == 0 {
        return Reply::Nothing;
    }
    let waiting: Vec<_> = statuses
        .iter()
        .flat_map(|(_, ps)| {
            ps.iter()
                .filter_map(|p| p.awaiting.as_ref().map(|a| a.handle.tp.clone()))
        })
        .collect();
    if waiting.is_empty() {
        return Reply::now(ResponseKind::Produce(build_response(&statuses)));
    }

    // acks=all with at least one appended partition: park it.
    let (tx, rx) = oneshot::channel();
    let timeout_ms = req.timeout_ms.max(0) as u64;
    let meta = OpMeta::new(ctx, "produce", &rm.timer, timeout_ms);
    let op = DelayedProduce::new(meta, statuses, tx);
    op.log_created(&waiting);
    rm.produce_purgatory
        .try_complete_else_watch(op, timeout_ms, waiting);
    Reply::Later(rx)
}

/// Appends one partition's records, returning its status (waiting, if `acks=-1`).
fn append_partition(
    rm: &Arc<ReplicaManager>,
    topic: &str,
    index: i32,
    records: Option<Bytes>,
    acks: i16,
) -> PartitionStatus {
    let topic_state = match rm.get_or_auto_create(topic, true) {
        Ok(t) => t,
        Err(e) => return PartitionStatus::error(index, e.code, Some(e.message)),
    };
    let Some(handle) = usize::try_from(index)
        .ok()
        .and_then(|i| topic_state.partitions.get(i).cloned())
    else {
        return PartitionStatus::error(index, ec::UNKNOWN_TOPIC_OR_PARTITION, None);
    };
    let records = match records {
        Some(r) if !r.is_empty() => r,
        _ => return PartitionStatus::error(index, ec::INVALID_RECORD, Some("no records".into())),
    };
    if !rm.reserve_memory(records.len()) {
        return PartitionStatus::error(
            index,
            ec::KAFKA_STORAGE_ERROR,
            Some(
                "log.memory.max.bytes reached and nothing below the high watermark can be evicted"
                    .into(),
            ),
        );
    }
    let now = rm.now_ms();
    let (result, hw_before, hw_after, freed) = {
        let mut log = handle.lock();
        if acks == -1 && log.isr_len() < log.min_insync_replicas() {
            let message = format!(
                "ISR {:?} is smaller than min.insync.replicas ({})",
                log.isr(),
                log.min_insync_replicas()
            );
            debug!(tp = %handle.tp, %message, "refusing acks=all produce");
            return PartitionStatus::error(index, ec::NOT_ENOUGH_REPLICAS, Some(message));
        }
        let before = log.high_watermark();
        let result = log.append(records, now);
        // The log grew: older batches below the HW may now be past retention.bytes.
        let freed = if result.is_ok() {
            log.enforce_retention()
        } else {
            0
        };
        (result, before, log.high_watermark(), freed)
    };
    let info = match result {
        Ok(info) => info,
        Err(e) => return PartitionStatus::error(index, e.kafka_error_code(), Some(e.to_string())),
    };
    rm.account_log_bytes(info.bytes, freed);
    if !info.duplicate {
        rm.on_log_appended(&handle.tp);
    }
    if hw_after > hw_before {
        rm.on_high_watermark_advanced(&handle.tp);
    }
    PartitionStatus {
        index,
        error_code: ec::NONE,
        base_offset: info.base_offset,
        log_start_offset: info.log_start_offset,
        error_message: None,
        awaiting: (acks == -1).then(|| AwaitingReplication {
            handle: handle.clone(),
            required_offset: info.last_offset + 1,
        }),
    }
}

/// Builds the wire response from per-partition statuses.
pub fn build_response(statuses: &ProduceStatuses) -> ProduceResponse {
    let responses = statuses
        .iter()
        .map(|(name, partitions)| {
            TopicProduceResponse::default()
                .with_name(TopicName(sb(name)))
                .with_partition_responses(
                    partitions
                        .iter()
                        .map(|p| {
                            PartitionProduceResponse::default()
                                .with_index(p.index)
                                .with_error_code(p.error_code)
                                .with_base_offset(p.base_offset)
                                .with_log_append_time_ms(-1)
                                .with_log_start_offset(p.log_start_offset)
                                .with_error_message(p.error_message.as_deref().map(sb))
                        })
                        .collect(),
                )
        })
        .collect();
    ProduceResponse::default().with_responses(responses)
}
