//! What a `read_committed` consumer sees of transactions: nothing past the last stable
//! offset while a transaction is open, the aborted transactions it must drop, ListOffsets
//! answering from the LSO, and a parked fetch that wakes when a marker moves the LSO.
//! Every transaction goes through the coordinator's APIs, as a client's would:
//! InitProducerId, AddPartitionsToTxn, the produce, EndTxn.

use replog::batch::{batch_headers, ATTR_TRANSACTIONAL};

use super::*;

/// A transactional producer as the coordinator knows it.
struct Producer {
    id: &'static str,
    producer_id: i64,
    epoch: i16,
    sequence: i32,
}

/// InitProducerId for `id`, with a 60 s transaction timeout.
fn init(apis: &KafkaApis, id: &'static str) -> Producer {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str(id))))
        .with_transaction_timeout_ms(60_000);
    let ResponseKind::InitProducerId(answer) = ask(apis, 4, RequestKind::InitProducerId(request))
    else {
        panic!("not an InitProducerId response");
    };
    assert_eq!(answer.error_code, 0);
    Producer {
        id,
        producer_id: answer.producer_id.0,
        epoch: answer.producer_epoch,
        sequence: 0,
    }
}

/// AddPartitionsToTxn for partition 0 of `topic`; its error code.
fn add(apis: &KafkaApis, p: &Producer, topic: &str) -> i16 {
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_static_str(p.id)))
        .with_v3_and_below_producer_id(ProducerId(p.producer_id))
        .with_v3_and_below_producer_epoch(p.epoch)
        .with_v3_and_below_topics(vec![
            add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![0]),
        ]);
    let ResponseKind::AddPartitionsToTxn(answer) =
        ask(apis, 3, RequestKind::AddPartitionsToTxn(request))
    else {
        panic!("not an AddPartitionsToTxn response");
    };
    answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

/// `count` records of `p`'s transaction, its sequence moved on.
fn transactional(p: &mut Producer, count: usize) -> Bytes {
    let batch = BatchBuilder::new(count)
        .producer(p.producer_id, p.epoch, p.sequence)
        .attributes(ATTR_TRANSACTIONAL)
        .bytes();
    p.sequence += count as i32;
    batch
}

/// EndTxn, answered at once (one replica: each marker is replicated as it lands).
fn end(apis: &KafkaApis, p: &Producer, commit: bool) -> i16 {
    let request = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(StrBytes::from_static_str(p.id)))
        .with_producer_id(ProducerId(p.producer_id))
        .with_producer_epoch(p.epoch)
        .with_committed(commit);
    let ResponseKind::EndTxn(answer) = ask(apis, 3, RequestKind::EndTxn(request)) else {
        panic!("not an EndTxn response");
    };
    answer.error_code
}

/// Creates `topic`, one partition, one replica: its HW follows each append.
fn topic(apis: &KafkaApis, topic: &str) {
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(1)
        .with_replication_factor(1)]);
    let ResponseKind::CreateTopics(created) = ask(apis, 7, RequestKind::CreateTopics(request))
    else {
        panic!("not a CreateTopics response");
    };
    assert_eq!(created.topics[0].error_code, 0);
}

fn fetch(topic: &str, isolation_level: i8, max_wait_ms: i32) -> RequestKind {
    RequestKind::Fetch(fetch_of(topic, -1, 0, max_wait_ms).with_isolation_level(isolation_level))
}

/// A fetch answered at once: its partition, as a client decodes it at v12.
fn fetched(apis: &KafkaApis, topic: &str, isolation_level: i8) -> fetch_response::PartitionData {
    partition_of(ask(apis, 12, fetch(topic, isolation_level, 0)))
}

fn partition_of(response: ResponseKind) -> fetch_response::PartitionData {
    decoded_partition(response, 12)
}

fn offsets(p: &fetch_response::PartitionData) -> Vec<i64> {
    batch_headers(p.records.as_deref().unwrap_or_default())
        .map(|h| h.base_offset)
        .collect()
}

fn aborted(p: &fetch_response::PartitionData) -> Option<Vec<(i64, i64)>> {
    p.aborted_transactions.as_ref().map(|list| {
        list.iter()
            .map(|a| (a.producer_id.0, a.first_offset))
            .collect()
    })
}

fn latest(apis: &KafkaApis, topic: &str, isolation_level: i8) -> i64 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation_level)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let ResponseKind::ListOffsets(answer) = ask(apis, 7, RequestKind::ListOffsets(request)) else {
        panic!("not a ListOffsets response");
    };
    answer.topics[0].partitions[0].offset
}

#[test]
fn an_open_transaction_hides_its_records_and_everything_after_from_read_committed() {
    let apis = KafkaApis::new(ReplicaManager::new(group_test_config()));
    topic(&apis, "txn");
    let mut p = init(&apis, "t1");
    assert_eq!(produce_to(&apis, "txn", one_record_batch()), 0); // 0
    let batch = transactional(&mut p, 2);
    assert_eq!(
        produce_to(&apis, "txn", batch.clone()),
        ResponseError::InvalidTxnState.code(),
        "a partition not added to the transaction refuses its batches"
    );
    assert_eq!(add(&apis, &p, "txn"), 0);
    assert_eq!(produce_to(&apis, "txn", batch), 0); // 1..=2
    assert_eq!(produce_to(&apis, "txn", one_record_batch()), 0); // 3
    let uncommitted = fetched(&apis, "txn", 0);
    assert_eq!(offsets(&uncommitted), vec![0, 1, 3]);
    assert_eq!(
        aborted(&uncommitted),
        None,
        "read_uncommitted gets no aborted list"
    );
    let committed = fetched(&apis, "txn", 1);
    assert_eq!(
        (committed.high_watermark, committed.last_stable_offset),
        (4, 1)
    );
    assert_eq!(offsets(&committed), vec![0]);
    assert_eq!(aborted(&committed), Some(vec![]));
    assert_eq!((latest(&apis, "txn", 0), latest(&apis, "txn", 1)), (4, 1));

    assert_eq!(end(&apis, &p, true), 0); // the COMMIT marker at 4
    let committed = fetched(&apis, "txn", 1);
    assert_eq!(committed.last_stable_offset, 5);
    assert_eq!(offsets(&committed), vec![0, 1, 3, 4]);
    assert_eq!(aborted(&committed), Some(vec![]));
    assert_eq!(latest(&apis, "txn", 1), 5);
}

#[test]
fn an_aborted_transaction_is_listed_so_the_consumer_drops_its_records() {
    let apis = KafkaApis::new(ReplicaManager::new(group_test_config()));
    topic(&apis, "aborts");
    let mut p = init(&apis, "t2");
    assert_eq!(add(&apis, &p, "aborts"), 0);
    let batch = transactional(&mut p, 3);
    assert_eq!(produce_to(&apis, "aborts", batch), 0); // 0..=2
    assert_eq!(end(&apis, &p, false), 0); // the ABORT marker at 3
    assert_eq!(produce_to(&apis, "aborts", one_record_batch()), 0); // 4
    let committed = fetched(&apis, "aborts", 1);
    assert_eq!(committed.last_stable_offset, 5);
    assert_eq!(offsets(&committed), vec![0, 3, 4]);
    assert_eq!(aborted(&committed), Some(vec![(p.producer_id, 0)]));
}

#[test]
fn a_parked_read_committed_fetch_wakes_when_the_marker_moves_the_lso() {
    let apis = KafkaApis::new(ReplicaManager::new(group_test_config()));
    topic(&apis, "waits");
    let mut p = init(&apis, "t3");
    assert_eq!(add(&apis, &p, "waits"), 0);
    let batch = transactional(&mut p, 1);
    assert_eq!(produce_to(&apis, "waits", batch), 0);
    // Data is there, but not below the LSO: a read_committed fetch waits for it.
    let Reply::Later(mut reply) = apis.handle(&context("rc", 7, 12), fetch("waits", 1, 5000))
    else {
        panic!("a read_committed fetch with nothing stable answered at once");
    };
    assert!(reply.try_recv().is_err(), "still waiting");
    assert_eq!(end(&apis, &p, true), 0);
    let answer = partition_of(reply.try_recv().expect("the marker completed the fetch"));
    assert_eq!(answer.last_stable_offset, 2);
    assert_eq!(offsets(&answer), vec![0, 1]);
}

/// OffsetFetch v8 of `group`'s partition 0 of `topic`, `require_stable` as given: its
/// (error code, offset).
fn fetch_offset(apis: &KafkaApis, group: &str, topic: &str, require_stable: bool) -> (i16, i64) {
    use kafka_protocol::messages::offset_fetch_request::{
        OffsetFetchRequestGroup, OffsetFetchRequestTopics,
    };
    let request = OffsetFetchRequest::default()
        .with_require_stable(require_stable)
        .with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(name(topic))
                .with_partition_indexes(vec![0])]))]);
    let ResponseKind::OffsetFetch(answer) = exchange(apis, 8, RequestKind::OffsetFetch(request))
    else {
        panic!("not an OffsetFetch response");
    };
    let p = &answer.groups[0].topics[0].partitions[0];
    (p.error_code, p.committed_offset)
}

/// TxnOffsetCommit at `version` of `offset` for partition 0 of `topic`, from `p` for
/// `group`, as a standalone producer sends it (no member, no generation): the
/// partition's error code.
fn txn_offset_commit(
    apis: &KafkaApis,
    version: i16,
    p: &Producer,
    group: &str,
    topic: &str,
    offset: i64,
) -> i16 {
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(StrBytes::from_static_str(p.id)))
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_producer_id(ProducerId(p.producer_id))
        .with_producer_epoch(p.epoch)
        .with_generation_id(-1)
        .with_topics(vec![
            txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset),
                ]),
        ]);
    let ResponseKind::TxnOffsetCommit(answer) =
        ask(apis, version, RequestKind::TxnOffsetCommit(request))
    else {
        panic!("not a TxnOffsetCommit response");
    };
    answer.topics[0].partitions[0].error_code
}

/// `send_offsets_to_transaction` as a producer sends it: AddOffsetsToTxn of `group`,
/// then TxnOffsetCommit of `offset` for partition 0 of `topic`, with no member and no
/// generation. Their error codes.
fn send_offsets(
    apis: &KafkaApis,
    p: &Producer,
    group: &str,
    topic: &str,
    offset: i64,
) -> (i16, i16) {
    let add_offsets = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(StrBytes::from_static_str(p.id)))
        .with_producer_id(ProducerId(p.producer_id))
        .with_producer_epoch(p.epoch)
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())));
    let ResponseKind::AddOffsetsToTxn(added) =
        ask(apis, 3, RequestKind::AddOffsetsToTxn(add_offsets))
    else {
        panic!("not an AddOffsetsToTxn response");
    };
    let held = txn_offset_commit(apis, 3, p, group, topic, offset);
    (added.error_code, held)
}

#[test]
fn offsets_sent_to_a_transaction_are_unstable_until_it_commits() {
    let apis = KafkaApis::new(ReplicaManager::new(group_test_config()));
    topic(&apis, "source");
    let p = init(&apis, "t4");
    assert_eq!(send_offsets(&apis, &p, "ctp", "source", 42), (0, 0));
    let unstable = ResponseError::UnstableOffsetCommit.code();
    assert_eq!(fetch_offset(&apis, "ctp", "source", true).0, unstable);
    assert_eq!(
        fetch_offset(&apis, "ctp", "source", false),
        (0, -1),
        "nothing committed yet"
    );
    assert_eq!(end(&apis, &p, true), 0);
    assert_eq!(fetch_offset(&apis, "ctp", "source", true), (0, 42));
}

#[test]
fn a_transactions_offsets_are_its_batch_in_consumer_offsets_decided_by_its_marker() {
    use kafka_protocol::records::RecordBatchDecoder;

    let apis = KafkaApis::new(ReplicaManager::new(group_test_config()));
    let rm = &apis.replica_manager;
    topic(&apis, "in");
    let p = init(&apis, "t8");
    // Committed with offset 42; then 99, aborted; then 7, left open.
    assert_eq!(send_offsets(&apis, &p, "ctp2", "in", 42), (0, 0));
    assert_eq!(end(&apis, &p, true), 0);
    assert_eq!(send_offsets(&apis, &p, "ctp2", "in", 99), (0, 0));
    assert_eq!(end(&apis, &p, false), 0);
    assert_eq!(
        fetch_offset(&apis, "ctp2", "in", true),
        (0, 42),
        "the abort dropped 99"
    );
    assert_eq!(send_offsets(&apis, &p, "ctp2", "in", 7), (0, 0));
    let unstable = ResponseError::UnstableOffsetCommit.code();
    assert_eq!(fetch_offset(&apis, "ctp2", "in", true).0, unstable);
    assert_eq!(fetch_offset(&apis, "ctp2", "in", false), (0, 42));

    // The group's partition of __consumer_offsets: each TxnOffsetCommit is a batch of
    // the transaction, and each EndTxn left its marker after it.
    let tp = apis.group_coordinator.manager.topic_partition_for("ctp2");
    let handle = rm
        .partition(&tp.topic, tp.partition)
        .expect("the group's partition");
    let read = handle
        .lock()
        .read(0, usize::MAX, replog::ReadBound::LogEnd)
        .expect("readable");
    let mut buf = read.records.clone();
    let mut seen = Vec::new();
    for set in RecordBatchDecoder::decode_all(&mut buf).expect("record batches") {
        for r in set.records {
            let what = match (r.control, r.transactional) {
                (true, _) => match crate::coordinator::records::read_control_type(r.key.as_ref()) {
                    Some(replog::ControlType::Commit) => "COMMIT",
                    Some(replog::ControlType::Abort) => "ABORT",
                    None => "?",
                },
                (false, true) => "txn offset",
                (false, false) => "offset",
            };
            assert!(!r.transactional || r.producer_id == p.producer_id);
            seen.push(what);
        }
    }
    assert_eq!(
        seen,
        vec!["txn offset", "COMMIT", "txn offset", "ABORT", "txn offset"]
    );

    // A coordinator that takes the partition over reads the same from the log: 42
    // committed, 7 still held by the open transaction, which its marker then commits.
    let fresh = crate::coordinator::GroupCoordinator::new(rm);
    assert_eq!(fresh.load_groups(&handle).unreadable, 0);
    let key = (Arc::from("in"), 0);
    let offset_of = |c: &crate::coordinator::GroupCoordinator| {
        c.handle_fetch_offsets("ctp2", Some(vec![key.clone()]))[0]
            .1
            .offset
    };
    assert_eq!(offset_of(&fresh), 42);
    assert!(fresh.holds_txn_offset("ctp2", &key));
    assert_eq!(
        fresh.on_transaction_completed(p.producer_id, tp.partition, true),
        1
    );
    assert_eq!(offset_of(&fresh), 7);
    assert!(!fresh.holds_txn_offset("ctp2", &key));
}

#[test]
fn a_txn_offset_commit_needs_add_offsets_to_txn_first() {
    let apis = KafkaApis::new(ReplicaManager::new(group_test_config()));
    topic(&apis, "src");
    let p = init(&apis, "t9");
    assert_eq!(add(&apis, &p, "src"), 0);
    assert_eq!(
        txn_offset_commit(&apis, 3, &p, "unadded", "src", 3),
        ResponseError::InvalidTxnState.code()
    );
    assert_eq!(apis.group_coordinator.txn_offsets_held(), 0);
    assert_eq!(end(&apis, &p, true), 0);
    assert_eq!(fetch_offset(&apis, "unadded", "src", false), (0, -1));
}

#[test]
fn every_change_of_a_transaction_is_a_record_in_its_transaction_state_partition() {
    use kafka_protocol::records::RecordBatchDecoder;
    let apis = KafkaApis::new(ReplicaManager::new(group_test_config()));
    topic(&apis, "logged");
    let mut p = init(&apis, "t5");
    assert_eq!(add(&apis, &p, "logged"), 0);
    let batch = transactional(&mut p, 1);
    assert_eq!(produce_to(&apis, "logged", batch), 0);
    assert_eq!(end(&apis, &p, true), 0);
    let rm = &apis.replica_manager;
    let log_topic = rm
        .topic("__transaction_state")
        .expect("created on first use");
    assert_eq!(log_topic.partitions.len(), 50);
    let tp = crate::txn::log::partition_for(rm, "t5");
    assert_eq!(
        tp.partition,
        crate::coordinator::records::partition_for("t5", 50)
    );
    let handle = rm
        .partition(&tp.topic, tp.partition)
        .expect("the id's partition");
    let read = handle
        .lock()
        .read(0, usize::MAX, replog::ReadBound::HighWatermark)
        .expect("readable");
    let mut buf = read.records.clone();
    let mut states = Vec::new();
    while !buf.is_empty() {
        let set = RecordBatchDecoder::decode(&mut buf).expect("a record batch");
        for r in set.records {
            assert_eq!(r.key.as_deref(), Some(&crate::txn::log::key("t5")[..]));
            // The value: version (2), producer id (8), epoch (2), timeout (4), then the state.
            let value = r.value.expect("a value");
            states.push(value[16]);
        }
    }
    // Empty (InitProducerId), Ongoing (AddPartitionsToTxn), PrepareCommit, CompleteCommit.
    assert_eq!(states, vec![0, 1, 2, 4]);
}

#[test]
fn a_coordinator_that_takes_over_finishes_a_decided_transaction_and_keeps_an_open_one() {
    use std::sync::Mutex;

    use crate::partition::TopicPartition;
    use crate::txn::{TransactionCoordinator, TxnState};

    let apis = KafkaApis::new(ReplicaManager::new(group_test_config()));
    let rm = &apis.replica_manager;
    topic(&apis, "decided");
    topic(&apis, "open");
    // t6 decided to commit: its PrepareCommit is in the log, but its coordinator wrote no
    // marker before it went away.
    let mut decided = init(&apis, "t6");
    assert_eq!(add(&apis, &decided, "decided"), 0);
    assert_eq!(
        produce_to(&apis, "decided", transactional(&mut decided, 2)),
        0
    );
    let mut prepared = apis.txn_coordinator.describe("t6").expect("known");
    prepared.state = TxnState::PrepareCommit;
    let written = Arc::new(Mutex::new(None));
    let into = written.clone();
    crate::txn::log::write(
        rm,
        &context("test", 1, 0),
        &prepared,
        Box::new(move |r| *into.lock().unwrap() = Some(r)),
    );
    assert_eq!(*written.lock().unwrap(), Some(Ok(())));
    // t7 is open, its record written.
    let mut open = init(&apis, "t7");
    assert_eq!(add(&apis, &open, "open"), 0);
    assert_eq!(produce_to(&apis, "open", transactional(&mut open, 1)), 0);
    assert_eq!(fetched(&apis, "decided", 1).last_stable_offset, 0);

    // A coordinator that knows nothing loads the ids' partitions from the log.
    let taking_over = TransactionCoordinator::new(rm, &apis.group_coordinator);
    // Told it leads t6's partition, it answers t6 COORDINATOR_LOAD_IN_PROGRESS until it
    // has read the partition: a new producer id from its empty memory would fence nothing.
    let t6_partition = crate::txn::log::partition_for(rm, "t6").partition;
    taking_over.start_loading(t6_partition);
    let init = Arc::new(Mutex::new(None));
    let into = init.clone();
    taking_over.init_producer_id(
        &context("test", 1, 4),
        "t6",
        60_000,
        || 999,
        Box::new(move |r| *into.lock().unwrap() = Some(r)),
    );
    assert_eq!(
        *init.lock().unwrap(),
        Some(Err(ResponseError::CoordinatorLoadInProgress))
    );
    for id in ["t6", "t7"] {
        let tp = crate::txn::log::partition_for(rm, id);
        let handle = rm.partition(&tp.topic, tp.partition).expect("partition");
        taking_over.load_transactions(&handle);
    }
    // t6's commit is finished: its marker is written and the LSO is past it.
    let committed = fetched(&apis, "decided", 1);
    assert_eq!(
        (committed.high_watermark, committed.last_stable_offset),
        (3, 3)
    );
    assert_eq!(offsets(&committed), vec![0, 2]);
    assert_eq!(
        taking_over.describe("t6").map(|m| m.state),
        Some(TxnState::CompleteCommit)
    );
    // t7 is still open, with its partition, and its producer commits it here.
    let loaded = taking_over.describe("t7").expect("loaded");
    assert_eq!(
        (loaded.state, loaded.producer_id, loaded.producer_epoch),
        (TxnState::Ongoing, open.producer_id, open.epoch)
    );
    assert!(loaded.partitions.contains(&TopicPartition::new("open", 0)));
    let ended = Arc::new(Mutex::new(None));
    let into = ended.clone();
    taking_over.end_txn(
        &context("test", 2, 3),
        "t7",
        open.producer_id,
        open.epoch,
        true,
        false,
        || 999,
        Box::new(move |r| *into.lock().unwrap() = Some(r)),
    );
    assert_eq!(
        *ended.lock().unwrap(),
        Some(Ok((open.producer_id, open.epoch)))
    );
    assert_eq!(fetched(&apis, "open", 1).last_stable_offset, 2);
}

#[test]
fn a_brokers_batched_add_partitions_to_txn_verifies_or_adds_each_transaction() {
    use add_partitions_to_txn_request::{AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction};

    use crate::partition::TopicPartition;

    let apis = KafkaApis::new(ReplicaManager::new(group_test_config()));
    topic(&apis, "held");
    topic(&apis, "not-held");
    let verified = init(&apis, "t10");
    assert_eq!(add(&apis, &verified, "held"), 0);
    let added = init(&apis, "t11");
    let transaction = |p: &Producer, verify_only: bool, topics: &[&str]| {
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(StrBytes::from_static_str(p.id)))
            .with_producer_id(ProducerId(p.producer_id))
            .with_producer_epoch(p.epoch)
            .with_verify_only(verify_only)
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        AddPartitionsToTxnTopic::default()
                            .with_name(name(t))
                            .with_partitions(vec![0])
                    })
                    .collect(),
            )
    };
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
        transaction(&verified, true, &["held", "not-held"]),
        transaction(&added, false, &["held"]),
    ]);
    let ResponseKind::AddPartitionsToTxn(answer) =
        ask(&apis, 4, RequestKind::AddPartitionsToTxn(request))
    else {
        panic!("not an AddPartitionsToTxn response");
    };
    let codes: Vec<(String, String, i16)> = answer
        .results_by_transaction
        .iter()
        .flat_map(|r| {
            r.topic_results.iter().flat_map(move |t| {
                t.results_by_partition.iter().map(move |p| {
                    (
                        r.transactional_id.to_string(),
                        t.name.to_string(),
                        p.partition_error_code,
                    )
                })
            })
        })
        .collect();
    let abortable = ResponseError::TransactionAbortable.code();
    assert_eq!(
        codes,
        vec![
            ("t10".into(), "held".into(), 0),
            ("t10".into(), "not-held".into(), abortable),
            ("t11".into(), "held".into(), 0),
        ]
    );
    // Verifying added nothing to t10; t11 now holds its partition.
    let t10 = apis.txn_coordinator.describe("t10").expect("known");
    assert!(!t10.partitions.contains(&TopicPartition::new("not-held", 0)));
    let t11 = apis.txn_coordinator.describe("t11").expect("known");
    assert!(t11.partitions.contains(&TopicPartition::new("held", 0)));
}

/// Produce v12 of `count` of `p`'s transactional records to partition 0 of `topic`: the
/// partition's error code.
fn produce_v12(apis: &KafkaApis, p: &mut Producer, topic: &str, count: usize) -> i16 {
    let batch = transactional(p, count);
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(1000)
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str(p.id))))
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch))])]);
    let ResponseKind::Produce(produced) = ask(apis, 12, RequestKind::Produce(request)) else {
        panic!("not a Produce response");
    };
    produced.responses[0].partition_responses[0].error_code
}

/// EndTxn v5 with `epoch`: (error code, producer id, epoch) of the answer.
fn end_v5(apis: &KafkaApis, p: &Producer, epoch: i16, commit: bool) -> (i16, i64, i16) {
    let request = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(StrBytes::from_static_str(p.id)))
        .with_producer_id(ProducerId(p.producer_id))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    let ResponseKind::EndTxn(answer) = ask(apis, 5, RequestKind::EndTxn(request)) else {
        panic!("not an EndTxn response");
    };
    (
        answer.error_code,
        answer.producer_id.0,
        answer.producer_epoch,
    )
}

#[test]
fn under_transaction_version_2_requests_add_their_partitions_and_every_end_bumps_the_epoch() {
    use kafka_protocol::records::RecordBatchDecoder;

    let apis = KafkaApis::new(ReplicaManager::new(group_test_config()));
    topic(&apis, "v2");
    let mut p = init(&apis, "t12");
    let first = p.epoch;
    // No AddPartitionsToTxn and no AddOffsetsToTxn: Produce v12 and TxnOffsetCommit v5
    // add the partition and the group themselves.
    assert_eq!(produce_v12(&apis, &mut p, "v2", 2), 0);
    assert_eq!(txn_offset_commit(&apis, 5, &p, "v2-group", "v2", 2), 0);
    assert_eq!(
        fetched(&apis, "v2", 1).last_stable_offset,
        0,
        "the transaction is open"
    );

    // EndTxn v5 commits with the next epoch, which the marker carries and the answer gives.
    assert_eq!(
        end_v5(&apis, &p, first, true),
        (0, p.producer_id, first + 1)
    );
    let committed = fetched(&apis, "v2", 1);
    assert_eq!(committed.last_stable_offset, 3);
    let mut records = committed.records.clone().expect("records");
    let marker = RecordBatchDecoder::decode_all(&mut records)
        .expect("batches")
        .into_iter()
        .flat_map(|set| set.records)
        .find(|r| r.control)
        .expect("a marker");
    assert_eq!(marker.producer_epoch, first + 1);
    assert_eq!(fetch_offset(&apis, "v2-group", "v2", true), (0, 2));

    // A retry still carries the old epoch: answered as done, with the new one.
    assert_eq!(
        end_v5(&apis, &p, first, true),
        (0, p.producer_id, first + 1)
    );
    let invalid_state = ResponseError::InvalidTxnState.code();
    assert_eq!(end_v5(&apis, &p, first, false).0, invalid_state);
    // The old epoch may write no more; the new one opens the next transaction.
    assert_eq!(
        produce_v12(&apis, &mut p, "v2", 1),
        ResponseError::InvalidProducerEpoch.code()
    );
    p.epoch = first + 1;
    p.sequence = 0;
    assert_eq!(produce_v12(&apis, &mut p, "v2", 1), 0);
    assert_eq!(
        end_v5(&apis, &p, first + 1, false),
        (0, p.producer_id, first + 2)
    );
    assert_eq!(fetched(&apis, "v2", 1).last_stable_offset, 5);
}
