//! Transactions over the raw protocol: a transactional id initialised at its coordinator,
//! a partition added, transactional and plain records, and what a read_committed fetch
//! and ListOffsets see before and after EndTxn; then the errors of the transaction APIs.
//!
//! Kafka answers EndTxn once it has *decided* (PrepareCommit / PrepareAbort is in
//! `__transaction_state`) and writes the markers after; this broker answers once the
//! markers are replicated. So the scenarios record the partition once it has settled (the
//! LSO at the log end), not the moment EndTxn answers.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, ProducerId, TransactionalId,
};

use super::{
    fetch, fetch_request, list_offset_with, list_offsets_request, produce, produce_request,
    scenario, see_fetch, see_produce, transactional, values, Ctx, Scenario, PRODUCE_VERSION,
};
use crate::observe::Observation;
use crate::target::{find_coordinator_request, name, topic_name, Target};

pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!(
            "transactions/abort and commit as read_committed sees them",
            true,
            abort_and_commit
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
    // CONCURRENT_TRANSACTIONS while the last transaction is still completing (Kafka
    // writes CompleteCommit/CompleteAbort after the markers): retried, as clients do.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let resp = t.send(node, &req, 3).await?;
        let error = resp
            .results_by_topic_v3_and_below
            .first()
            .and_then(|t| t.results_by_partition.first())
            .map_or(-1, |p| p.partition_error_code);
        if error != 51 || Instant::now() > deadline {
            return Ok(error);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let resp = t.send(node, &req, 3).await?;
        if resp.error_code != 51 || Instant::now() > deadline {
            return Ok(resp.error_code);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
    let req =
        produce_request(topic, 0, -1, 30_000, records).with_transactional_id(Some(txn_id(id)));
    let resp = t.leader(&req, PRODUCE_VERSION).await?;
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
    t.create_topic(&topic, 1, &[]).await?;
    let mut o = Observation::new();
    let node = coordinator(t, &id).await?;
    let (error, pid, epoch) = init(t, node, &id, 60_000).await?;
    let node = coordinator(t, &id).await?;
    o.error("init.error", error);
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
