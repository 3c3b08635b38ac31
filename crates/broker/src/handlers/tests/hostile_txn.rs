//! The transaction APIs (InitProducerId with a transactional id, AddPartitionsToTxn,
//! AddOffsetsToTxn, TxnOffsetCommit, EndTxn) and transactional produces, at every
//! advertised version, with hostile values mixed with real ids, epochs and partitions so
//! that requests meet live transactions: the broker neither panics nor holds more
//! transactional ids than its cap, and every answer encodes at its version.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use replog::batch::ATTR_TRANSACTIONAL;

use super::hostile::values;
use super::*;

/// The most transactional ids the fuzzed broker keeps.
const MAX_IDS: usize = 40;
/// The most groups one transaction names.
const MAX_GROUPS: usize = 5;

/// What the fuzz has learned from the broker's answers: real transactional ids with
/// their producer ids and epochs.
#[derive(Default)]
struct Seen {
    producers: Vec<(TransactionalId, i64, i16)>,
}

fn txn_id(rng: &mut StdRng) -> TransactionalId {
    let id = match rng.gen_range(0..8) {
        0 => String::new(),
        1 => "é".repeat(rng.gen_range(1..20_000)),
        2 => format!("many-{}", rng.gen::<u32>()),
        n => format!("tid-{}", n % 3),
    };
    TransactionalId(StrBytes::from_string(id))
}

/// A (transactional id, producer id, epoch) the broker handed out, often with the
/// epoch nudged, or a hostile one.
fn producer(rng: &mut StdRng, seen: &Seen) -> (TransactionalId, ProducerId, i16) {
    match seen.producers.choose(rng) {
        Some((txn, id, epoch)) if rng.gen_bool(0.8) => {
            let epoch = epoch.saturating_add(*[-1i16, 0, 0, 0, 1].choose(rng).unwrap_or(&0));
            (txn.clone(), ProducerId(*id), epoch)
        }
        _ => (
            txn_id(rng),
            ProducerId(*[-1i64, 0, i64::MAX, i64::MIN].choose(rng).unwrap_or(&-1)),
            *[-1i16, 0, i16::MAX, i16::MIN].choose(rng).unwrap_or(&0),
        ),
    }
}

fn topic(rng: &mut StdRng) -> TopicName {
    name(
        ["t", "nope", "", "__consumer_offsets"]
            .choose(rng)
            .copied()
            .unwrap_or("t"),
    )
}

fn hostile_txn_request(rng: &mut StdRng, api: ApiKey, seen: &Seen) -> Option<RequestKind> {
    let (txn, pid, epoch) = producer(rng, seen);
    Some(match api {
        ApiKey::InitProducerId => RequestKind::InitProducerId(
            InitProducerIdRequest::default()
                .with_transactional_id(rng.gen_bool(0.9).then(|| txn_id(rng)))
                .with_transaction_timeout_ms(if rng.gen_bool(0.5) {
                    60_000
                } else {
                    values::int(rng)
                })
                .with_producer_id(pid)
                .with_producer_epoch(epoch),
        ),
        ApiKey::AddPartitionsToTxn => {
            use add_partitions_to_txn_request::{
                AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
            };
            let topics = |rng: &mut StdRng| -> Vec<AddPartitionsToTxnTopic> {
                (0..rng.gen_range(0..4))
                    .map(|_| {
                        AddPartitionsToTxnTopic::default()
                            .with_name(topic(rng))
                            .with_partitions(
                                (0..*[0usize, 1, 2, 3_000].choose(rng).unwrap_or(&1))
                                    .map(|_| *values::PARTITIONS.choose(rng).unwrap_or(&0))
                                    .collect(),
                            )
                    })
                    .collect()
            };
            // The client form (v0-3) or the brokers' batched one (v4+): each reaches the
            // versions that carry it.
            let request = if rng.gen_bool(0.5) {
                AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(txn.clone())
                    .with_v3_and_below_producer_id(pid)
                    .with_v3_and_below_producer_epoch(epoch)
                    .with_v3_and_below_topics(topics(rng))
            } else {
                let transactions = (0..*[0usize, 1, 3, 40].choose(rng).unwrap_or(&1))
                    .map(|_| {
                        let (txn, pid, epoch) = producer(rng, seen);
                        AddPartitionsToTxnTransaction::default()
                            .with_transactional_id(txn)
                            .with_producer_id(pid)
                            .with_producer_epoch(epoch)
                            .with_verify_only(rng.gen_bool(0.5))
                            .with_topics(topics(rng))
                    })
                    .collect();
                AddPartitionsToTxnRequest::default().with_transactions(transactions)
            };
            RequestKind::AddPartitionsToTxn(request)
        }
        ApiKey::AddOffsetsToTxn => RequestKind::AddOffsetsToTxn(
            AddOffsetsToTxnRequest::default()
                .with_transactional_id(txn.clone())
                .with_producer_id(pid)
                .with_producer_epoch(epoch)
                .with_group_id(GroupId(StrBytes::from_string(values::group(rng)))),
        ),
        ApiKey::TxnOffsetCommit => {
            use txn_offset_commit_request::{
                TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
            };
            let topics = (0..rng.gen_range(0..3))
                .map(|_| {
                    TxnOffsetCommitRequestTopic::default()
                        .with_name(topic(rng))
                        .with_partitions(
                            (0..*[0usize, 1, 2_000].choose(rng).unwrap_or(&1))
                                .map(|_| {
                                    TxnOffsetCommitRequestPartition::default()
                                        .with_partition_index(
                                            *values::PARTITIONS.choose(rng).unwrap_or(&0),
                                        )
                                        .with_committed_offset(
                                            *values::OFFSETS.choose(rng).unwrap_or(&0),
                                        )
                                        .with_committed_metadata(Some(StrBytes::from_string(
                                            "m".repeat(
                                                *[0usize, 10, 10_000].choose(rng).unwrap_or(&0),
                                            ),
                                        )))
                                })
                                .collect(),
                        )
                })
                .collect();
            RequestKind::TxnOffsetCommit(
                TxnOffsetCommitRequest::default()
                    .with_transactional_id(txn.clone())
                    .with_group_id(GroupId(StrBytes::from_string(values::group(rng))))
                    .with_producer_id(pid)
                    .with_producer_epoch(epoch)
                    .with_generation_id(values::int(rng))
                    .with_topics(topics),
            )
        }
        ApiKey::EndTxn => RequestKind::EndTxn(
            EndTxnRequest::default()
                .with_transactional_id(txn.clone())
                .with_producer_id(pid)
                .with_producer_epoch(epoch)
                .with_committed(rng.gen()),
        ),
        ApiKey::Produce => {
            let sequence = *[0, 1, -1, i32::MAX].choose(rng).unwrap_or(&0);
            let batch = BatchBuilder::new(1)
                .producer(pid.0, epoch, sequence)
                .attributes(ATTR_TRANSACTIONAL)
                .bytes();
            RequestKind::Produce(
                ProduceRequest::default()
                    .with_transactional_id(rng.gen_bool(0.5).then(|| txn.clone()))
                    .with_acks(*[-1i16, 1].choose(rng).unwrap_or(&1))
                    .with_timeout_ms(1000)
                    .with_topic_data(vec![TopicProduceData::default()
                        .with_name(topic(rng))
                        .with_partition_data(vec![PartitionProduceData::default()
                            .with_index(*[0, 0, 1, -1].choose(rng).unwrap_or(&0))
                            .with_records(Some(batch))])]),
            )
        }
        _ => return None,
    })
}

#[test]
fn hostile_transaction_requests_at_every_version_neither_panic_nor_grow_without_bound() {
    let config = manual_config(|c| {
        c.offsets_topic_replication_factor = 1;
        c.transaction_state_log_replication_factor = 1;
        c.offsets_topic_num_partitions = 3;
        c.default_replication_factor = 1;
        c.transaction_coordinator_max_transactional_ids = MAX_IDS;
        c.group_coordinator_max_groups = MAX_GROUPS;
        c.transaction_abort_timed_out_transaction_cleanup_interval_ms = 5;
    });
    let apis = KafkaApis::new(ReplicaManager::new(config));
    auto_create(&apis, "t");
    let rm = apis.replica_manager.clone();
    let mut rng = StdRng::seed_from_u64(0x7a11);
    let mut seen = Seen::default();
    let (mut handled, mut initialised, mut ended) = (0, 0, 0);
    let apis_under_test = [
        ApiKey::InitProducerId,
        ApiKey::AddPartitionsToTxn,
        ApiKey::Produce,
        ApiKey::AddOffsetsToTxn,
        ApiKey::TxnOffsetCommit,
        ApiKey::EndTxn,
    ];
    for round in 0..80 {
        for &api in &apis_under_test {
            let (min, max) = crate::handlers::supported_range(api).expect("advertised");
            let min = if api == ApiKey::Produce {
                crate::handlers::PRODUCE_MIN_ACCEPTED
            } else {
                min
            };
            for version in min..=max {
                let Some(request) = hostile_txn_request(&mut rng, api, &seen) else {
                    continue;
                };
                let Some(request) = over_the_wire(api, version, &request) else {
                    continue; // a field this version cannot carry
                };
                let asked = match &request {
                    RequestKind::InitProducerId(r) => r.transactional_id.clone(),
                    _ => None,
                };
                let response = answered(&apis, &context("fuzz", round, version), api, request);
                match &response {
                    ResponseKind::InitProducerId(r) if r.error_code == 0 => {
                        if let Some(txn) = asked {
                            seen.producers
                                .push((txn, r.producer_id.0, r.producer_epoch));
                        }
                        initialised += 1;
                    }
                    ResponseKind::EndTxn(r) if r.error_code == 0 => ended += 1,
                    _ => {}
                }
                handled += 1;
                let held = apis.txn_coordinator.snapshot().len();
                assert!(
                    held <= MAX_IDS,
                    "{held} transactional ids held, the cap is {MAX_IDS}"
                );
                // A transaction's offsets only for partitions that exist (one topic of one
                // partition here), in at most group.coordinator.max.groups groups.
                let offsets = apis.group_coordinator.txn_offsets_held();
                assert!(
                    offsets <= MAX_IDS * MAX_GROUPS * 2,
                    "{offsets} transactional offsets held"
                );
            }
        }
        // Transactions left open time out as the clock moves.
        rm.timer.advance_by(7);
    }
    assert!(
        handled > 1000,
        "only {handled} hostile transaction requests handled"
    );
    assert!(
        initialised > 0 && ended > 0,
        "the fuzz met no live transaction: {initialised} initialised, {ended} ended"
    );
    eprintln!("hostile transaction requests: {handled} handled, {initialised} producers initialised, {ended} transactions ended");
}
