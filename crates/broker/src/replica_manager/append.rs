//! `append_records`: the produce path below the handler (Kafka's
//! `ReplicaManager.appendRecords`).
//!
//! Each partition's records are appended to its leader log (for `acks=all`, only if the
//! ISR is at least the minimum in force, else NOT_ENOUGH_REPLICAS and nothing is
//! appended). Then the answer depends on `acks`:
//!
//! - `acks=0` and `acks=1`: answered at once with where each batch landed (the caller
//!   sends nothing back for `acks=0`, but learns of errors).
//! - `acks=-1` (`all`): each appended partition needs its high watermark at
//!   `last_offset + 1`, the moment every in-sync replica holds the batch. A
//!   [`DelayedProduce`] watching those partitions is parked in the produce purgatory;
//!   follower fetches that move the HW complete it, and if the request's `timeout_ms`
//!   passes first, the partitions still waiting answer REQUEST_TIMED_OUT.

use bytes::Bytes;
use kafka_protocol::ResponseError;
use replog::AppendError;
use tracing::debug;

use super::ReplicaManager;
use crate::delayed::produce::ProducePartitionStatus;
use crate::delayed::{
    DelayedProduce, OpMeta, ProduceCallback, ProduceCompletion, ProducePartitionResult,
};
use crate::partition::TopicPartition;
use crate::request::RequestContext;
use crate::request::{Cause, TraceId};
use crate::telemetry::{Park, PartitionNote};

/// Who is appending (Kafka's `AppendOrigin`): only the broker itself may write to an
/// internal topic such as `__consumer_offsets`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A producer's Produce request.
    Client,
    /// The group coordinator, writing group metadata and offsets.
    Coordinator,
}

impl ReplicaManager {
    /// Appends each partition's records and answers through `respond`: at once for
    /// `acks` 0 and 1 and for any request where nothing waits, else when the high
    /// watermark passes every appended batch or `timeout_ms` passes. Results come back in
    /// the order of `entries`. An `acks` other than -1, 0 or 1 answers
    /// INVALID_REQUIRED_ACKS for every partition and appends nothing.
    pub fn append_records(
        &self,
        ctx: &RequestContext,
        timeout_ms: u64,
        required_acks: i16,
        origin: AppendOrigin,
        entries: Vec<(TopicPartition, Bytes)>,
        respond: ProduceCallback,
    ) {
        if !matches!(required_acks, -1..=1) {
            let message = format!("acks must be -1, 0 or 1, got {required_acks}");
            let results = entries
                .into_iter()
                .map(|(tp, _)| {
                    let result = ProducePartitionResult::error(
                        ResponseError::InvalidRequiredAcks,
                        message.clone(),
                    );
                    (tp, result)
                })
                .collect();
            respond(results);
            return;
        }
        let now = self.now_ms();
        let statuses: Vec<ProducePartitionStatus> = entries
            .into_iter()
            .map(|(tp, records)| {
                self.append_to_local_log(tp, records, required_acks, origin, now, ctx.trace)
            })
            .collect();
        if required_acks != -1 || statuses.iter().all(|s| s.awaiting.is_none()) {
            self.telemetry.note_produce(
                ctx.trace,
                required_acks,
                statuses.iter().map(note_of),
                None,
            );
            respond(statuses.into_iter().map(|s| (s.tp, s.result)).collect());
            return;
        }
        let meta = OpMeta::new(ctx, "produce", &self.timer, timeout_ms);
        let park = Park {
            purgatory: "Produce",
            created_ms: meta.created_ms,
            deadline_ms: meta.deadline_ms,
        };
        self.telemetry.note_produce(
            ctx.trace,
            required_acks,
            statuses.iter().map(note_of),
            Some(park),
        );
        // When it completes, telemetry learns what ended it, then the handler answers.
        let telemetry = self.telemetry.clone();
        let trace = ctx.trace;
        let completion: ProduceCompletion = Box::new(move |results, cause| {
            let errors = results.iter().map(|(tp, r)| (tp, r.error));
            telemetry.produce_completed(trace, cause, errors);
            respond(results);
        });
        let op = DelayedProduce::new(meta, statuses, completion);
        let keys = op.keys();
        op.log_created(&keys);
        self.produce_purgatory
            .try_complete_else_watch(op, timeout_ms, keys);
    }

    /// Appends one partition's records to its leader log.
    fn append_to_local_log(
        &self,
        tp: TopicPartition,
        records: Bytes,
        required_acks: i16,
        origin: AppendOrigin,
        now_ms: u64,
        trace: TraceId,
    ) -> ProducePartitionStatus {
        let failed =
            |tp: TopicPartition, error: ResponseError, message: String| ProducePartitionStatus {
                tp,
                awaiting: None,
                result: ProducePartitionResult::error(error, message),
            };
        let topic = self.topic(&tp.topic);
        let Some((topic, handle)) = topic
            .as_ref()
            .and_then(|t| t.partition(tp.partition).map(|p| (t, p.clone())))
        else {
            return failed(
                tp,
                ResponseError::UnknownTopicOrPartition,
                "this broker has no such topic-partition".into(),
            );
        };
        if topic.internal && origin == AppendOrigin::Client {
            return failed(
                tp,
                ResponseError::InvalidTopicException,
                "clients cannot write to an internal topic".into(),
            );
        }
        let partitions = || self.topics.partitions();
        if !self.log_memory.reserve(records.len(), partitions) {
            return failed(
                tp,
                ResponseError::KafkaStorageError,
                "log.memory.max.bytes reached and nothing below the high watermark can be evicted"
                    .into(),
            );
        }
        let appended = self.update_partition(&handle, |log| {
            let appended = match origin {
                AppendOrigin::Client => log.append_as_leader(records, required_acks, now_ms),
                AppendOrigin::Coordinator => {
                    log.append_as_coordinator(records, required_acks, now_ms)
                }
            };
            if let Ok(info) = &appended {
                self.log_memory.add(info.bytes);
            }
            appended.map_err(|e| (e, log.log_start_offset()))
        });
        if let Ok(info) = &appended {
            // Follower fetches this append completes (and, with the leader alone in the
            // ISR, produces) name it as their cause.
            let cause = Cause::Append {
                request: trace.seq(),
                log_end_offset: info.change.after.log_end_offset,
            };
            self.complete_waiting(&tp, &info.change, cause);
        }
        match appended {
            Ok(info) => ProducePartitionStatus {
                tp,
                awaiting: (required_acks == -1).then(|| (handle, info.last_offset + 1)),
                result: ProducePartitionResult {
                    error: None,
                    message: None,
                    base_offset: info.base_offset,
                    log_start_offset: info.log_start_offset,
                },
            },
            Err((e, log_start_offset)) => {
                debug!(%tp, error = %e, "append refused");
                let mut status = failed(tp, e.error(), e.to_string());
                if answers_log_start_offset(&e) {
                    status.result.log_start_offset = log_start_offset;
                }
                status
            }
        }
    }
}

/// Whether a refused append's answer carries the partition's log start offset. Kafka's
/// `appendToLocalLog` answers -1 for the errors it expects of a bad request or partition
/// (unknown partition, not the leader, record or batch too large, corrupt batch, storage
/// error: and so do the checks before it, such as `INVALID_REQUIRED_ACKS` or the
/// handler's `INVALID_RECORD`), and the partition's log start offset for every other
/// error of the append: out-of-order sequence, fenced producer epoch, too small an ISR,
/// a batch the log's validation refuses. Measured against Kafka 4.4 for each error here.
fn answers_log_start_offset(e: &AppendError) -> bool {
    match e {
        AppendError::CorruptMessage { .. }
        | AppendError::MessageTooLarge { .. }
        | AppendError::NotLeaderOrFollower(_) => false,
        AppendError::InvalidRecord { .. }
        | AppendError::OutOfOrderSequence { .. }
        | AppendError::InvalidProducerEpoch { .. }
        | AppendError::NotEnoughReplicas { .. } => true,
    }
}

/// What the request log keeps of one partition of a produce.
fn note_of(s: &ProducePartitionStatus) -> PartitionNote {
    let required = s.awaiting.as_ref().map(|(_, required)| *required);
    PartitionNote {
        tp: s.tp.clone(),
        offset: s.result.base_offset,
        last_offset: required.map_or(s.result.base_offset, |r| r - 1),
        required,
        error: s.result.error.map(|e| e.code()),
    }
}
