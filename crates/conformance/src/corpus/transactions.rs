//! Transactions over the raw protocol: a transactional id initialised at its coordinator,
//! a partition added, transactional and plain records, and what a read_committed fetch
//! and ListOffsets see before and after EndTxn; a group's offsets sent to a transaction
//! (AddOffsetsToTxn, TxnOffsetCommit) and what OffsetFetch answers while it is open, after
//! its commit and after an abort; then the errors of the transaction APIs.
//!
//! Kafka answers EndTxn once it has *decided* (PrepareCommit / PrepareAbort is in
//! `__transaction_state`) and writes the markers after; this broker answers once the
//! markers are replicated. So the scenarios record the partition once it has settled (the
//! LSO at the log end), not the moment EndTxn answers.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, EndTxnRequest,
    InitProducerIdRequest, ProducerId, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::Request;

use super::group_requests::{fetch_offsets, gid};
use super::{
    fetch, fetch_request, list_offset_with, list_offsets_request, produce, produce_request,
    scenario, see_fetch, see_produce, transactional, values, Ctx, Scenario, PRODUCE_VERSION,
};
use crate::observe::{error_name, Observation};
use crate::target::{find_coordinator_request, name, topic_name, Target, LEADER};

pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!(
            "transactions/abort and commit as read_committed sees them",
            true,
            abort_and_commit
        ),
        scenario!(
            "transactions/offsets sent to a transaction appear only on commit",
            true,
            offsets_in_a_transaction
        ),
        scenario!(
            "transactions/a new instance aborts what the zombie left open and fences it",
            true,
            zombie
        ),
        scenario!(
            "transactions/a transaction past its timeout is aborted and its producer fenced",
            true,
            timed_out
        ),
        scenario!(
            "transactions/a broker's batched AddPartitionsToTxn verifies or adds",
            true,
            batched_add
        ),
        scenario!(
            "transactions/version 2: implicit adds and an epoch bump per transaction",
            true,
            transaction_version_2
        ),
        scenario!("transactions/errors", true, errors),
    ]
}

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(name(id))
}

/// The node that coordinates `id`: Kafka creates `__transaction_state` on the first ask
/// and answers COORDINATOR_NOT_AVAILABLE meanwhile, so this asks until it knows.
async fn coordinator(t: &mut Target, id: &str) -> Result<i32> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let resp = t.leader(&find_coordinator_request(1, id), 4).await?;
        if let Some(c) = resp.coordinators.first() {
            if c.error_code == 0 {
                return Ok(c.node_id.0);
            }
        }
        if Instant::now() > deadline {
            bail!("no transaction coordinator for {id:?} in 60 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// InitProducerId for `id` at its coordinator: (error, producer id, epoch). A coordinator
/// that moved (NOT_COORDINATOR, as Kafka answers while it takes over a new
/// `__transaction_state` partition) is found again.
async fn init(t: &mut Target, node: i32, id: &str, timeout_ms: i32) -> Result<(i16, i64, i16)> {
    let mut node = node;
    let req = InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id(id)))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let resp = t.send(node, &req, 4).await?;
        if resp.error_code == 16 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
            node = coordinator(t, id).await?;
            continue;
        }
        // The coordinator may still be loading its partition (Kafka) or aborting an
        // older transaction: both are retried, as clients do.
        let retriable = [14, 15, 51]; // COORDINATOR_LOAD_IN_PROGRESS, NOT_AVAILABLE, CONCURRENT_TRANSACTIONS
        if !retriable.contains(&resp.error_code) || Instant::now() > deadline {
            return Ok((resp.error_code, resp.producer_id.0, resp.producer_epoch));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// AddPartitionsToTxn v3 of one partition of `topic`: the partition's error.
async fn add(
    t: &mut Target,
    node: i32,
    id: &str,
    pid: i64,
    epoch: i16,
    topic: &str,
    partition: i32,
) -> Result<i16> {
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id(id))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![partition])]);
    let error = |resp: &AddPartitionsToTxnResponse| {
        resp.results_by_topic_v3_and_below
            .first()
            .and_then(|t| t.results_by_partition.first())
            .map_or(-1, |p| p.partition_error_code)
    };
    let resp = settled(t, node, &req, 3, error).await?;
    Ok(error(&resp))
}

/// EndTxn v3: its error, retried while the coordinator answers CONCURRENT_TRANSACTIONS.
async fn end(
    t: &mut Target,
    node: i32,
    id: &str,
    pid: i64,
    epoch: i16,
    commit: bool,
) -> Result<i16> {
    let req = EndTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    let resp = settled(t, node, &req, 3, |r| r.error_code).await?;
    Ok(resp.error_code)
}

/// `req` at `version` to `node`, sent again every 100 ms (for 30 s at most) while its
/// error (as `error` reads it) is CONCURRENT_TRANSACTIONS: the last transaction is still
/// completing (Kafka writes CompleteCommit/CompleteAbort after the markers), which
/// clients retry.
async fn settled<R: Request>(
    t: &mut Target,
    node: i32,
    req: &R,
    version: i16,
    error: impl Fn(&R::Response) -> i16,
) -> Result<R::Response> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let resp = t.send(node, req, version).await?;
        if error(&resp) != 51 || Instant::now() > deadline {
            return Ok(resp);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The start of most scenarios: `topic` created (one partition) and `id` initialised at
/// its coordinator with `timeout_ms`: the observation so far (`init.error`), the
/// coordinator's node, the producer id and the epoch.
async fn initialised(
    t: &mut Target,
    topic: &str,
    id: &str,
    timeout_ms: i32,
) -> Result<(Observation, i32, i64, i16)> {
    t.create_topic(topic, 1, &[]).await?;
    let mut o = Observation::new();
    let node = coordinator(t, id).await?;
    let (error, pid, epoch) = init(t, node, id, timeout_ms).await?;
    // Kafka may have moved the coordinator while it created `__transaction_state`.
    let node = coordinator(t, id).await?;
    o.error("init.error", error);
    Ok((o, node, pid, epoch))
}

/// Partition 0 of `topic` added to the transaction of (`id` at `node`, producer id,
/// epoch), then `count` of its records tagged `tag` written from sequence 0 and left
/// open: `add.error` and the produce under `open.`.
async fn write_open(
    t: &mut Target,
    o: &mut Observation,
    (id, node, pid, epoch): (&str, i32, i64, i16),
    topic: &str,
    tag: &str,
    count: usize,
) -> Result<()> {
    o.error("add.error", add(t, node, id, pid, epoch, topic, 0).await?);
    let records = transactional(tag, pid, epoch, 0, count);
    produce_txn(t, o, "open.", id, topic, records).await
}

/// A transactional produce with the transactional id set, acks=-1.
async fn produce_txn(
    t: &mut Target,
    o: &mut Observation,
    prefix: &str,
    id: &str,
    topic: &str,
    records: bytes::Bytes,
) -> Result<()> {
    produce_txn_at(t, o, prefix, id, topic, records, PRODUCE_VERSION).await
}

/// [`produce_txn`] at Produce `version` (v12+ adds the partition to the transaction
/// itself, KIP-890 part 2).
async fn produce_txn_at(
    t: &mut Target,
    o: &mut Observation,
    prefix: &str,
    id: &str,
    topic: &str,
    records: bytes::Bytes,
    version: i16,
) -> Result<()> {
    let req =
        produce_request(topic, 0, -1, 30_000, records).with_transactional_id(Some(txn_id(id)));
    let resp = t.leader(&req, version).await?;
    match resp
        .responses
        .iter()
        .flat_map(|t| &t.partition_responses)
        .next()
    {
        Some(p) => see_produce(o, prefix, p),
        None => bail!("the produce answer names no partition"),
    }
    Ok(())
}

/// The read_committed (isolation 1) latest offset of partition 0: the LSO.
async fn stable_end(t: &mut Target, topic: &str) -> Result<i64> {
    let req = list_offsets_request(-1, 1, topic, 0, -1);
    Ok(list_offset_with(t, &req).await?.1)
}

/// Waits until the partition's LSO reaches `offset` (markers written and replicated).
async fn wait_stable(t: &mut Target, topic: &str, offset: i64) -> Result<i64> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let lso = stable_end(t, topic).await?;
        if lso >= offset || Instant::now() > deadline {
            return Ok(lso);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A read_committed and a read_uncommitted fetch from 0, at once, under `prefix`.
async fn see_both(t: &mut Target, o: &mut Observation, prefix: &str, topic: &str) -> Result<()> {
    for (isolation, key) in [(1i8, "committed"), (0, "uncommitted")] {
        let req = fetch_request(-1, 0, 1, topic, 0, 0).with_isolation_level(isolation);
        let (p, took) = fetch(t, &req).await?;
        see_fetch(o, &format!("{prefix}{key}."), &p, took, 0);
        let aborted: Vec<String> = p
            .aborted_transactions
            .iter()
            .flatten()
            .map(|a| format!("from {}", a.first_offset))
            .collect();
        o.set(
            format!("{prefix}{key}.aborted"),
            match &p.aborted_transactions {
                None => "null".to_owned(),
                Some(_) => format!("[{}]", aborted.join(", ")),
            },
        );
    }
    Ok(())
}

async fn abort_and_commit(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("txn");
    let id = c.topic("txn-id");
    let (mut o, node, pid, epoch) = initialised(t, &topic, &id, 60_000).await?;
    o.set("init.epoch", epoch);
    o.error("add.error", add(t, node, &id, pid, epoch, &topic, 0).await?);
    produce_txn(
        t,
        &mut o,
        "txn_first.",
        &id,
        &topic,
        transactional("a", pid, epoch, 0, 3),
    )
    .await?;
    let (plain, _) = produce(t, &topic, 0, -1, 30_000, values("plain", 1)).await?;
    see_produce(&mut o, "plain.", &plain);
    o.set("open.lso", stable_end(t, &topic).await?);
    see_both(t, &mut o, "open.", &topic).await?;
    o.error("abort.error", end(t, node, &id, pid, epoch, false).await?);
    o.set("aborted.lso", wait_stable(t, &topic, 5).await?);
    see_both(t, &mut o, "aborted.", &topic).await?;
    // The next transaction of the same producer, committed.
    o.error(
        "add_again.error",
        add(t, node, &id, pid, epoch, &topic, 0).await?,
    );
    produce_txn(
        t,
        &mut o,
        "txn_second.",
        &id,
        &topic,
        transactional("b", pid, epoch, 3, 2),
    )
    .await?;
    o.error("commit.error", end(t, node, &id, pid, epoch, true).await?);
    o.set("committed.lso", wait_stable(t, &topic, 8).await?);
    see_both(t, &mut o, "committed.", &topic).await?;
    Ok(o)
}

async fn errors(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("txn-errors");
    let id = c.topic("txn-errors-id");
    t.create_topic(&topic, 1, &[]).await?;
    let mut o = Observation::new();
    let mut node = coordinator(t, &id).await?;
    // Settle the coordinator first (a valid init), then the refused timeouts.
    init(t, node, &id, 60_000).await?;
    node = coordinator(t, &id).await?;
    o.error("init_timeout_0.error", init(t, node, &id, 0).await?.0);
    o.error(
        "init_timeout_too_long.error",
        init(t, node, &id, 900_001).await?.0,
    );
    let (error, pid, epoch) = init(t, node, &id, 60_000).await?;
    o.error("init.error", error);
    o.error(
        "end_with_nothing_open.error",
        end(t, node, &id, pid, epoch, true).await?,
    );
    o.error(
        "add_unknown_partition.error",
        add(t, node, &id, pid, epoch, &topic, 7).await?,
    );
    o.error(
        "add_wrong_producer_id.error",
        add(t, node, &id, pid + 1000, epoch, &topic, 0).await?,
    );
    // Asked at the unknown id's own coordinator (another id may hash elsewhere).
    let unknown = c.topic("never-initialised");
    let unknown_node = coordinator(t, &unknown).await?;
    o.error(
        "add_unknown_id.error",
        add(t, unknown_node, &unknown, pid, epoch, &topic, 0).await?,
    );
    // A transactional batch to a partition the transaction does not hold.
    produce_txn(
        t,
        &mut o,
        "unadded.",
        &id,
        &topic,
        transactional("x", pid, epoch, 0, 1),
    )
    .await?;
    // A second InitProducerId fences the first epoch.
    let (error, _, new_epoch) = init(t, node, &id, 60_000).await?;
    o.error("reinit.error", error);
    o.set("reinit.epoch_bumped", new_epoch == epoch + 1);
    o.error(
        "add_old_epoch.error",
        add(t, node, &id, pid, epoch, &topic, 0).await?,
    );
    o.error(
        "end_old_epoch.error",
        end(t, node, &id, pid, epoch, false).await?,
    );
    Ok(o)
}

/// AddOffsetsToTxn v3 of `group` at the transaction's coordinator: its error, retried
/// while the last transaction is completing (CONCURRENT_TRANSACTIONS).
async fn add_offsets(
    t: &mut Target,
    node: i32,
    id: &str,
    pid: i64,
    epoch: i16,
    group: &str,
) -> Result<i16> {
    let req = AddOffsetsToTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_group_id(gid(group));
    let resp = settled(t, node, &req, 3, |r| r.error_code).await?;
    Ok(resp.error_code)
}

/// TxnOffsetCommit v3 of `offset` for partition 0 of `topic`, at the group's coordinator
/// (node 1: [`Ctx::group`](super::Ctx::group) picks such a group), as a standalone
/// producer sends it (generation -1, no member): the partition's error.
async fn txn_commit(
    t: &mut Target,
    id: &str,
    pid: i64,
    epoch: i16,
    group: &str,
    topic: &str,
    offset: i64,
) -> Result<String> {
    txn_commit_at(t, (id, pid, epoch), group, topic, offset, 3).await
}

/// [`txn_commit`] at TxnOffsetCommit `version` (v5+ adds the group to the transaction
/// itself, KIP-890 part 2), for the producer (transactional id, producer id, epoch).
async fn txn_commit_at(
    t: &mut Target,
    (id, pid, epoch): (&str, i64, i16),
    group: &str,
    topic: &str,
    offset: i64,
    version: i16,
) -> Result<String> {
    let req = TxnOffsetCommitRequest::default()
        .with_transactional_id(txn_id(id))
        .with_group_id(gid(group))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_member_id(name(""))
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(-1)
                .with_committed_metadata(Some(name("in-txn")))])]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let resp = t.send(LEADER, &req, version).await?;
        let error = resp
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .map_or(-1, |p| p.error_code);
        // Loading, or not yet told of the transaction: retried, as the client retries.
        if ![14, 15, 51].contains(&error) || Instant::now() > deadline {
            return Ok(error_name(error));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// OffsetFetch with `require_stable` once it no longer answers UNSTABLE_OFFSET_COMMIT
/// (Kafka answers EndTxn before its markers land; this broker after).
async fn stable_offsets(t: &mut Target, group: &str, topic: &str) -> Result<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen = fetch_offsets(t, group, topic, Some(&[0]), true).await?;
        if !seen.contains("UNSTABLE_OFFSET_COMMIT") || Instant::now() > deadline {
            return Ok(seen);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn offsets_in_a_transaction(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("txn-offsets");
    let group = c.group("txn-offsets-group");
    let id = c.topic("txn-offsets-id");
    let (mut o, node, pid, epoch) = initialised(t, &topic, &id, 60_000).await?;
    // A transaction that commits offset 5.
    o.error(
        "add_offsets.error",
        add_offsets(t, node, &id, pid, epoch, &group).await?,
    );
    o.set(
        "txn_commit.error",
        txn_commit(t, &id, pid, epoch, &group, &topic, 5).await?,
    );
    o.set(
        "open.require_stable",
        fetch_offsets(t, &group, &topic, Some(&[0]), true).await?,
    );
    o.set(
        "open.plain",
        fetch_offsets(t, &group, &topic, Some(&[0]), false).await?,
    );
    o.error("commit.error", end(t, node, &id, pid, epoch, true).await?);
    o.set("committed", stable_offsets(t, &group, &topic).await?);
    // The next one sends offset 9 and aborts: offset 5 stays.
    o.error(
        "add_offsets_again.error",
        add_offsets(t, node, &id, pid, epoch, &group).await?,
    );
    o.set(
        "txn_commit_again.error",
        txn_commit(t, &id, pid, epoch, &group, &topic, 9).await?,
    );
    o.error("abort.error", end(t, node, &id, pid, epoch, false).await?);
    o.set("aborted", stable_offsets(t, &group, &topic).await?);
    // TxnOffsetCommit without AddOffsetsToTxn first, in no open transaction.
    o.set(
        "unadded.error",
        txn_commit(t, &id, pid, epoch, &group, &topic, 11).await?,
    );
    Ok(o)
}

async fn zombie(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("txn-zombie");
    let id = c.topic("txn-zombie-id");
    let (mut o, node, pid, epoch) = initialised(t, &topic, &id, 60_000).await?;
    write_open(t, &mut o, (&id, node, pid, epoch), &topic, "z", 2).await?;
    // A second instance: the open transaction is aborted first (the answer is
    // CONCURRENT_TRANSACTIONS until it is, and `init` retries), then the id gets a
    // new epoch.
    let (error, new_pid, new_epoch) = init(t, node, &id, 60_000).await?;
    o.error("reinit.error", error);
    o.set("reinit.same_producer_id", new_pid == pid);
    o.set("reinit.epochs_bumped", new_epoch - epoch);
    o.set("after_reinit.lso", wait_stable(t, &topic, 3).await?);
    see_both(t, &mut o, "after_reinit.", &topic).await?;
    // The zombie writes on with its old epoch.
    produce_txn(
        t,
        &mut o,
        "zombie_produce.",
        &id,
        &topic,
        transactional("late", pid, epoch, 2, 1),
    )
    .await?;
    o.error(
        "zombie_end.error",
        end(t, node, &id, pid, epoch, true).await?,
    );
    Ok(o)
}

/// A transaction left open past its `transaction.timeout.ms` (2 s): the coordinator's
/// next check (Kafka's default interval, 10 s, on both sides) aborts it with the epoch
/// bumped, the LSO moves past the ABORT marker, and the producer that left it is fenced.
async fn timed_out(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("txn-timeout");
    let id = c.topic("txn-timeout-id");
    let (mut o, node, pid, epoch) = initialised(t, &topic, &id, 2_000).await?;
    write_open(t, &mut o, (&id, node, pid, epoch), &topic, "left", 2).await?;
    let (plain, _) = produce(t, &topic, 0, -1, 30_000, values("plain", 1)).await?;
    see_produce(&mut o, "plain.", &plain);
    o.set("open.lso", stable_end(t, &topic).await?);
    // Two records, one plain, then the ABORT marker at offset 3.
    o.set("timed_out.lso", wait_stable(t, &topic, 4).await?);
    see_both(t, &mut o, "timed_out.", &topic).await?;
    o.error(
        "stale_add.error",
        add(t, node, &id, pid, epoch, &topic, 0).await?,
    );
    o.error(
        "stale_end.error",
        end(t, node, &id, pid, epoch, true).await?,
    );
    let (error, new_pid, new_epoch) = init(t, node, &id, 60_000).await?;
    o.error("reinit.error", error);
    o.set("reinit.same_producer_id", new_pid == pid);
    o.set("reinit.epochs_bumped", new_epoch - epoch);
    Ok(o)
}

/// AddPartitionsToTxn v4 and v5, the form a partition leader sends the coordinator
/// (KIP-890): two transactions in one request, one only verified, one added to.
async fn batched_add(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let held = c.topic("txn-batched-held");
    let other = c.topic("txn-batched-other");
    let verified = c.topic("txn-batched-verified");
    t.create_topic(&held, 1, &[]).await?;
    t.create_topic(&other, 1, &[]).await?;
    let mut o = Observation::new();
    let node = coordinator(t, &verified).await?;
    let (error, pid, epoch) = init(t, node, &verified, 60_000).await?;
    let node = coordinator(t, &verified).await?;
    o.error("init.error", error);
    o.error(
        "add.error",
        add(t, node, &verified, pid, epoch, &held, 0).await?,
    );
    let transaction = |id: &str, pid: i64, epoch: i16, verify_only: bool, topics: &[&str]| {
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(txn_id(id))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_verify_only(verify_only)
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        AddPartitionsToTxnTopic::default()
                            .with_name(topic_name(t))
                            .with_partitions(vec![0])
                    })
                    .collect(),
            )
    };
    let verify = |topics: &[&str]| {
        AddPartitionsToTxnRequest::default()
            .with_transactions(vec![transaction(&verified, pid, epoch, true, topics)])
    };
    let see = |o: &mut Observation, prefix: &str, resp: &AddPartitionsToTxnResponse| {
        o.error(format!("{prefix}.error"), resp.error_code);
        for r in &resp.results_by_transaction {
            for topic in &r.topic_results {
                let which = if *topic.name == *held {
                    "held"
                } else {
                    "other"
                };
                for p in &topic.results_by_partition {
                    o.error(format!("{prefix}.{which}"), p.partition_error_code);
                }
            }
        }
    };
    for version in [4, 5] {
        let resp = t.send(node, &verify(&[&held, &other]), version).await?;
        see(&mut o, &format!("verify_v{version}"), &resp);
    }
    let add_other = AddPartitionsToTxnRequest::default().with_transactions(vec![transaction(
        &verified,
        pid,
        epoch,
        false,
        &[&other],
    )]);
    let resp = t.send(node, &add_other, 4).await?;
    see(&mut o, "add_v4", &resp);
    let resp = t.send(node, &verify(&[&held, &other]), 4).await?;
    see(&mut o, "verify_after_add_v4", &resp);
    Ok(o)
}

/// EndTxn v5 (KIP-890 part 2): (error, producer id, epoch) of the answer, retried while
/// the coordinator answers CONCURRENT_TRANSACTIONS.
async fn end_v5(
    t: &mut Target,
    node: i32,
    (id, pid, epoch): (&str, i64, i16),
    commit: bool,
) -> Result<(i16, i64, i16)> {
    let req = EndTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    let resp = settled(t, node, &req, 5, |r| r.error_code).await?;
    Ok((resp.error_code, resp.producer_id.0, resp.producer_epoch))
}

/// Transaction version 2 (KIP-890 part 2) over the raw protocol: Produce v12 and
/// TxnOffsetCommit v5 add their partitions to the transaction themselves, EndTxn v5 bumps
/// the epoch of every transaction and answers the new one, and what an old epoch gets.
async fn transaction_version_2(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("txn-v2");
    let group = c.group("txn-v2-group");
    let id = c.topic("txn-v2-id");
    let (mut o, node, pid, epoch) = initialised(t, &topic, &id, 60_000).await?;
    // No AddPartitionsToTxn, no AddOffsetsToTxn.
    produce_txn_at(
        t,
        &mut o,
        "implicit.",
        &id,
        &topic,
        transactional("a", pid, epoch, 0, 2),
        12,
    )
    .await?;
    o.set(
        "implicit_offsets.error",
        txn_commit_at(t, (&id, pid, epoch), &group, &topic, 2, 5).await?,
    );
    o.set("open.lso", stable_end(t, &topic).await?);
    let (error, end_pid, bumped) = end_v5(t, node, (&id, pid, epoch), true).await?;
    o.error("commit.error", error);
    o.set("commit.same_producer_id", end_pid == pid);
    o.set("commit.epoch_bumped", bumped - epoch);
    o.set("committed.lso", wait_stable(t, &topic, 3).await?);
    see_both(t, &mut o, "committed.", &topic).await?;
    o.set(
        "committed.offsets",
        stable_offsets(t, &group, &topic).await?,
    );
    // The same EndTxn again, with the epoch it was sent with: a retry.
    let (error, _, epoch_now) = end_v5(t, node, (&id, pid, epoch), true).await?;
    o.error("retried_commit.error", error);
    o.set("retried_commit.epoch_bumped", epoch_now - epoch);
    let (error, _, _) = end_v5(t, node, (&id, pid, epoch), false).await?;
    o.error("abort_with_old_epoch.error", error);
    let (error, _, _) = end_v5(t, node, (&id, pid, bumped), true).await?;
    o.error("commit_nothing_open.error", error);
    // The old epoch may not write; the bumped one opens the next transaction.
    produce_txn_at(
        t,
        &mut o,
        "old_epoch.",
        &id,
        &topic,
        transactional("z", pid, epoch, 2, 1),
        12,
    )
    .await?;
    produce_txn_at(
        t,
        &mut o,
        "next.",
        &id,
        &topic,
        transactional("b", pid, bumped, 0, 1),
        12,
    )
    .await?;
    let (error, _, bumped_again) = end_v5(t, node, (&id, pid, bumped), false).await?;
    o.error("abort.error", error);
    o.set("abort.epoch_bumped", bumped_again - bumped);
    o.set("aborted.lso", wait_stable(t, &topic, 5).await?);
    see_both(t, &mut o, "aborted.", &topic).await?;
    Ok(o)
}
