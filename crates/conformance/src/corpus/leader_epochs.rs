//! Leader epochs in requests: a fetcher's `current_leader_epoch` (Fetch v9+, ListOffsets
//! v4+, OffsetForLeaderEpoch v2+) checked against the partition's, and Fetch v12's
//! `last_fetched_epoch`, which lets the leader tell a fetcher that its log has diverged
//! (KIP-320). A new partition is in leader epoch 0 on both brokers, so the scenarios ask
//! about epoch 0 (current), and epochs above it (not known yet).

use anyhow::{bail, Result};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{BrokerId, OffsetForLeaderEpochRequest};

use super::{
    fetch, fetch_request, list_offsets_request, produce, scenario, see_fetch, values, Ctx,
    Scenario, LIST_OFFSETS_VERSION,
};
use crate::observe::Observation;
use crate::target::{topic_name, Target};

/// OffsetForLeaderEpoch v4: the last version Kafka 4.4 and this broker both answer.
const OFFSET_FOR_LEADER_EPOCH_VERSION: i16 = 4;

pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!(
            "leader_epochs/fetch: current and last fetched epochs",
            true,
            fetch_epochs
        ),
        scenario!(
            "leader_epochs/list_offsets and offset_for_leader_epoch",
            true,
            other_apis
        ),
    ]
}

/// A topic with three records, replicated, in leader epoch 0.
async fn three_records(t: &mut Target, c: &Ctx) -> Result<String> {
    let topic = c.topic("le");
    t.create_topic(&topic, 1, &[]).await?;
    produce(t, &topic, 0, -1, 30_000, values("r", 3)).await?;
    Ok(topic)
}

async fn fetch_epochs(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = three_records(t, c).await?;
    let mut o = Observation::new();
    // (key, current_leader_epoch, last_fetched_epoch, fetch offset)
    for (key, current, last_fetched, offset) in [
        ("current_0.", 0, -1, 0),
        ("current_5.", 5, -1, 0),
        ("last_fetched_0_at_2.", -1, 0, 2),
        ("last_fetched_0_at_end.", -1, 0, 3),
        ("last_fetched_0_past_end.", -1, 0, 5),
        ("last_fetched_4_at_end.", -1, 4, 3),
        ("current_5_last_fetched_4.", 5, 4, 3),
    ] {
        let mut req = fetch_request(-1, 0, 1, &topic, 0, offset);
        let p = &mut req.topics[0].partitions[0];
        p.current_leader_epoch = current;
        p.last_fetched_epoch = last_fetched;
        let (answer, took) = fetch(t, &req).await?;
        see_fetch(&mut o, key, &answer, took, 0);
        o.set(
            format!("{key}diverging_epoch"),
            format!(
                "{}@{}",
                answer.diverging_epoch.epoch, answer.diverging_epoch.end_offset
            ),
        );
    }
    Ok(o)
}

async fn other_apis(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = three_records(t, c).await?;
    let mut o = Observation::new();
    for (key, current) in [("list_offsets_current_0", 0), ("list_offsets_current_5", 5)] {
        let mut req = list_offsets_request(-1, 0, &topic, 0, -1);
        req.topics[0].partitions[0].current_leader_epoch = current;
        let resp = t.leader(&req, LIST_OFFSETS_VERSION).await?;
        let Some(p) = resp.topics.into_iter().flat_map(|t| t.partitions).next() else {
            bail!("the ListOffsets answer names no partition");
        };
        o.error(format!("{key}.error"), p.error_code);
        o.set(format!("{key}.offset"), p.offset);
    }
    // (key, current_leader_epoch, the epoch asked about)
    for (key, current, epoch) in [
        ("epoch_0", -1, 0),
        ("epoch_0_current_0", 0, 0),
        ("epoch_0_current_5", 5, 0),
        ("epoch_4", -1, 4),
    ] {
        let req = OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![OffsetForLeaderTopic::default()
                .with_topic(topic_name(&topic))
                .with_partitions(vec![OffsetForLeaderPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(current)
                    .with_leader_epoch(epoch)])]);
        let resp = t.leader(&req, OFFSET_FOR_LEADER_EPOCH_VERSION).await?;
        let Some(p) = resp.topics.into_iter().flat_map(|t| t.partitions).next() else {
            bail!("the OffsetForLeaderEpoch answer names no partition");
        };
        o.error(format!("{key}.error"), p.error_code);
        o.set(format!("{key}.leader_epoch"), p.leader_epoch);
        o.set(format!("{key}.end_offset"), p.end_offset);
    }
    Ok(o)
}
