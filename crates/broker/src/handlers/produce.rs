//! Produce: translate a Produce request into [`ReplicaManager::append_records`] and its
//! results back into a Produce response.
//!
//! What this handler checks itself is what Kafka's `KafkaApis` checks before the replica
//! manager sees a request:
//! - a transactional batch goes only to a partition its transaction holds (Kafka's
//!   KIP-890 verification, asked of the transaction coordinator): INVALID_TXN_STATE
//!   otherwise, INVALID_PRODUCER_EPOCH from an epoch a newer one replaced. From v12
//!   (transaction version 2, KIP-890 part 2) the produce adds the partition to the
//!   transaction itself, as AddPartitionsToTxn would, before the batch is appended;
//! - Produce v3+ carries exactly one record batch per partition (a retried idempotent
//!   batch is only recognisable alone), of magic 2: anything else is INVALID_RECORD for
//!   that partition, which is not appended;
//! - zstd-compressed batches need Produce v7+ (UNSUPPORTED_COMPRESSION_TYPE).
//!
//! Everything about `acks`, the ISR and the wait for the high watermark happens below, in
//! the replica manager and the `DelayedProduce`. With `acks=0` nothing is sent back; if
//! any partition failed, the connection is closed instead (Kafka's way of making the
//! producer refresh its metadata), after the responses it is owed.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, ResponseKind, TopicName};
use kafka_protocol::ResponseError;
use replog::batch::{RecordBatches, MAGIC_V2};
use tokio::sync::oneshot;

use super::{sb, Reply, RequestContext};
use crate::delayed::ProducePartitionResult;
use crate::partition::TopicPartition;
use crate::replica_manager::{AppendOrigin, ReplicaManager};
use crate::txn::TransactionCoordinator;

/// Kafka's compression codec id for zstd, allowed from Produce v7 on.
const ZSTD: i16 = 4;

/// The first Produce version that adds its partitions to the transaction itself.
const ADDS_PARTITIONS: i16 = 12;

/// The answer being built: per topic in request order, each partition's result — set by
/// this handler for partitions it refuses, by the replica manager for the others.
type Answer = Vec<(TopicName, Vec<(i32, Option<ProducePartitionResult>)>)>;

/// Handles a Produce request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    txn: &Arc<TransactionCoordinator>,
    ctx: &RequestContext,
    req: ProduceRequest,
) -> Reply {
    let acks = req.acks;
    let transactional_id = req.transactional_id.as_ref().map(|id| id.to_string());
    // The producer whose partitions this request adds to its transaction (v12+), once.
    let mut adding: Option<(i64, i16)> = None;
    let may_add = ctx.api_version >= ADDS_PARTITIONS && acks != 0 && transactional_id.is_some();
    let mut answer: Answer = Vec::with_capacity(req.topic_data.len());
    let mut staged: Vec<Staged> = Vec::new();
    for topic in req.topic_data {
        let name: Arc<str> = Arc::from(topic.name.0.as_str());
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let tp = TopicPartition {
                topic: name.clone(),
                partition: data.index,
            };
            let records = data.records.as_ref();
            let checked = check_records(records, ctx.api_version).and_then(|()| {
                let verified = check_transaction(txn, records, &tp).map(|()| false);
                verified.or_else(|refused| {
                    // Outside the transaction, from a producer that may add it (one per
                    // request): it joins before the append.
                    let outside = refused.error == Some(ResponseError::InvalidTxnState);
                    let producer = transactional_producer(records).filter(|_| may_add && outside);
                    match (producer, adding) {
                        (Some(p), None) => {
                            adding = Some(p);
                            Ok(true)
                        }
                        (Some(p), Some(first)) if p == first => Ok(true),
                        _ => Err(refused),
                    }
                })
            });
            let refused = match checked {
                Ok(needs_add) => {
                    staged.push(Staged {
                        tp,
                        records: data.records.unwrap_or_default(),
                        needs_add,
                    });
                    None
                }
                Err(refused) => Some(refused),
            };
            partitions.push((data.index, refused));
        }
        answer.push((topic.name, partitions));
    }

    let timeout_ms = req.timeout_ms.max(0) as u64;
    if acks == 0 {
        let entries = staged.into_iter().map(|s| (s.tp, s.records)).collect();
        return produce_without_acks(rm, ctx, timeout_ms, answer, entries);
    }
    let (tx, rx) = oneshot::channel();
    let append = {
        let (rm, ctx) = (rm.clone(), ctx.clone());
        move |answer: Answer, entries: Vec<(TopicPartition, Bytes)>| {
            rm.append_records(
                &ctx,
                timeout_ms,
                acks,
                AppendOrigin::Client,
                entries,
                Box::new(move |results| {
                    let response = build_response(answer, results.into_iter().map(|(_, r)| r));
                    let _ = tx.send(ResponseKind::Produce(response));
                }),
            );
        }
    };
    match (adding, transactional_id) {
        (Some((producer_id, epoch)), Some(id)) => {
            let partitions: Vec<TopicPartition> = staged
                .iter()
                .filter(|s| s.needs_add)
                .map(|s| s.tp.clone())
                .collect();
            let added: crate::txn::WriteCallback = Box::new(move |outcome| {
                let (answer, entries) = after_adding(answer, staged, outcome);
                append(answer, entries);
            });
            match txn.coordinator_of(&id) {
                Ok(coordinator) => {
                    coordinator.add_partitions(ctx, &id, producer_id, epoch, &partitions, added)
                }
                Err(e) => added(Err(e)),
            }
        }
        _ => {
            let entries = staged.into_iter().map(|s| (s.tp, s.records)).collect();
            append(answer, entries);
        }
    }
    Reply::from_callback(rx)
}

/// A partition that passed the handler's checks, on its way to the log; `needs_add`
/// when a v12+ produce first adds it to its transaction.
struct Staged {
    tp: TopicPartition,
    records: Bytes,
    needs_add: bool,
}

/// What goes to the log once the implicit AddPartitionsToTxn answered `outcome`:
/// everything staged, or, if it failed, all but the partitions it was to add, which
/// answer its error instead. (CONCURRENT_TRANSACTIONS, the last transaction still ending,
/// answers NOT_ENOUGH_REPLICAS, which the producer retries, as Kafka's does.)
fn after_adding(
    mut answer: Answer,
    staged: Vec<Staged>,
    outcome: Result<(), ResponseError>,
) -> (Answer, Vec<(TopicPartition, Bytes)>) {
    let Err(error) = outcome else {
        let entries = staged.into_iter().map(|s| (s.tp, s.records)).collect();
        return (answer, entries);
    };
    let error = match error {
        ResponseError::ConcurrentTransactions => ResponseError::NotEnoughReplicas,
        other => other,
    };
    let mut entries = Vec::with_capacity(staged.len());
    for s in staged {
        if !s.needs_add {
            entries.push((s.tp, s.records));
            continue;
        }
        let slot = answer
            .iter_mut()
            .filter(|(name, _)| *name.0 == *s.tp.topic)
            .flat_map(|(_, partitions)| partitions.iter_mut())
            .find(|(index, refused)| *index == s.tp.partition && refused.is_none());
        if let Some((_, refused)) = slot {
            *refused = Some(ProducePartitionResult::error(
                error,
                format!("{} could not join the transaction", s.tp),
            ));
        }
    }
    (answer, entries)
}

/// The (producer id, epoch) of a transactional batch, `None` for any other.
fn transactional_producer(records: Option<&Bytes>) -> Option<(i64, i16)> {
    let header = records.and_then(|r| replog::batch::batch_headers(r).next())?;
    header
        .is_transactional()
        .then_some((header.producer_id, header.producer_epoch))
}

/// Checks a partition's `records` field: present, exactly one whole record batch of
/// magic 2, and a compression codec this request version may use. (Kafka's `KafkaApis`
/// checks these before the log sees the batch, so, unlike the log's own refusals, the
/// answer carries no log start offset.)
fn check_records(records: Option<&Bytes>, api_version: i16) -> Result<(), ProducePartitionResult> {
    let invalid = |why: String| ProducePartitionResult::error(ResponseError::InvalidRecord, why);
    let records = records.ok_or_else(|| invalid("no records".into()))?;
    let mut batches = RecordBatches::new(records);
    let first = match batches.next() {
        Some(Ok(batch)) => batch,
        Some(Err(framing)) => return Err(invalid(framing.to_string())),
        None => return Err(invalid("no records".into())),
    };
    if first.header.magic != MAGIC_V2 {
        return Err(invalid(format!(
            "Produce v{api_version} may only carry record batches of magic 2, not {}",
            first.header.magic
        )));
    }
    if batches.next().is_some() {
        return Err(invalid(
            "Produce v3+ must carry exactly one record batch per partition".into(),
        ));
    }
    if first.header.compression_codec() == ZSTD && api_version < 7 {
        return Err(ProducePartitionResult::error(
            ResponseError::UnsupportedCompressionType,
            format!("zstd needs Produce v7 or later, this request is v{api_version}"),
        ));
    }
    Ok(())
}

/// A transactional batch must belong to an open transaction that holds `tp`.
fn check_transaction(
    txn: &Arc<TransactionCoordinator>,
    records: Option<&Bytes>,
    tp: &TopicPartition,
) -> Result<(), ProducePartitionResult> {
    let Some((producer_id, epoch)) = transactional_producer(records) else {
        return Ok(());
    };
    txn.verify(producer_id, epoch, tp).map_err(|error| {
        ProducePartitionResult::error(
            error,
            format!(
                "producer {producer_id} epoch {epoch} has no open transaction holding {tp}: add the partition to the transaction first"
            ),
        )
    })
}

/// `acks=0`: append, send nothing back, and close the connection if anything failed.
fn produce_without_acks(
    rm: &ReplicaManager,
    ctx: &RequestContext,
    timeout_ms: u64,
    answer: Answer,
    entries: Vec<(TopicPartition, Bytes)>,
) -> Reply {
    let (tx, mut rx) = oneshot::channel();
    rm.append_records(
        ctx,
        timeout_ms,
        0,
        AppendOrigin::Client,
        entries,
        Box::new(move |results| {
            let _ = tx.send(results);
        }),
    );
    // acks=0 is never parked, so the results are already there.
    let appended = rx.try_recv().unwrap_or_default();
    let refused = answer.iter().flat_map(|(topic, partitions)| {
        partitions.iter().filter_map(move |(index, refused)| {
            let result = refused.as_ref()?;
            Some((format!("{}-{index}", topic.0.as_str()), result.clone()))
        })
    });
    let failed = appended
        .into_iter()
        .map(|(tp, result)| (tp.to_string(), result))
        .chain(refused)
        .find(|(_, result)| result.error.is_some());
    match failed {
        Some((tp, result)) => Reply::Close(format!(
            "acks=0 produce to {tp} failed ({}{}); closing the connection so the producer \
             refreshes its metadata",
            result.error.map(|e| e.to_string()).unwrap_or_default(),
            result.message.map(|m| format!(": {m}")).unwrap_or_default()
        )),
        None => Reply::Nothing,
    }
}

/// Builds the wire response: each partition's result, from the handler's refusals and,
/// in order, the replica manager's results for the rest.
fn build_response(
    answer: Answer,
    mut appended: impl Iterator<Item = ProducePartitionResult>,
) -> ProduceResponse {
    let responses = answer
        .into_iter()
        .map(|(name, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|(index, refused)| {
                    let result = refused.or_else(|| appended.next()).unwrap_or_else(|| {
                        ProducePartitionResult::error(ResponseError::UnknownServerError, None)
                    });
                    PartitionProduceResponse::default()
                        .with_index(index)
                        .with_error_code(result.error.map_or(0, |e| e.code()))
                        .with_base_offset(result.base_offset)
                        .with_log_append_time_ms(-1)
                        .with_log_start_offset(result.log_start_offset)
                        .with_error_message(result.message.as_deref().map(sb))
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(name)
                .with_partition_responses(partitions)
        })
        .collect();
    ProduceResponse::default().with_responses(responses)
}
