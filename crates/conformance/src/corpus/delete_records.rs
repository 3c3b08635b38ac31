//! DeleteRecords: where the log start may move, what a fetch below it then answers, and a
//! deletion the stopped followers hold until its timeout.

use std::time::Instant;

use anyhow::Result;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::DeleteRecordsRequest;

use super::{
    fetch, fetch_request, list_offset, produce, scenario, see_fetch, timing, values,
    with_followers_stopped, Ctx, Scenario, Then,
};
use crate::observe::Observation;
use crate::target::{topic_name, Target};

pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!(
            "delete_records/below the HW, -1, above the HW, unknown partition",
            true,
            offsets
        ),
        scenario!(
            "delete_records/with the followers stopped",
            true,
            followers_stopped
        ),
    ]
}

const DELETE_RECORDS_VERSION: i16 = 2;

/// A topic of one partition holding six replicated records.
async fn six_records(t: &mut Target, c: &Ctx) -> Result<String> {
    let topic = c.topic("dr");
    t.create_topic(&topic, 1, &[]).await?;
    produce(t, &topic, 0, -1, 30_000, values("a", 3)).await?;
    produce(t, &topic, 0, -1, 30_000, values("b", 3)).await?;
    Ok(topic)
}

fn delete_request(topic: &str, partitions: &[(i32, i64)], timeout_ms: i32) -> DeleteRecordsRequest {
    DeleteRecordsRequest::default()
        .with_timeout_ms(timeout_ms)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(
                partitions
                    .iter()
                    .map(|&(index, offset)| {
                        DeleteRecordsPartition::default()
                            .with_partition_index(index)
                            .with_offset(offset)
                    })
                    .collect(),
            )])
}

/// Sends one DeleteRecords and records each partition's answer under `prefix`.
async fn see_delete(
    t: &mut Target,
    o: &mut Observation,
    prefix: &str,
    req: &DeleteRecordsRequest,
) -> Result<()> {
    let start = Instant::now();
    let resp = t.leader(req, DELETE_RECORDS_VERSION).await?;
    let took = start.elapsed();
    for (i, p) in resp.topics.iter().flat_map(|t| &t.partitions).enumerate() {
        o.set(format!("{prefix}{i}.partition"), p.partition_index);
        o.error(format!("{prefix}{i}.error"), p.error_code);
        o.set(format!("{prefix}{i}.low_watermark"), p.low_watermark);
    }
    o.set(format!("{prefix}answered"), timing(took, req.timeout_ms));
    Ok(())
}

async fn offsets(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = six_records(t, c).await?;
    let mut o = Observation::new();
    // Offset 4 falls inside the second batch (3-5).
    see_delete(
        t,
        &mut o,
        "first.",
        &delete_request(&topic, &[(0, 4)], 10_000),
    )
    .await?;
    o.set("earliest", list_offset(t, &topic, 0, -2).await?.1);
    for offset in [0, 4] {
        let (p, took) = fetch(t, &fetch_request(-1, 1_000, 1, &topic, 0, offset)).await?;
        see_fetch(&mut o, &format!("fetch_{offset}."), &p, took, 1_000);
    }
    // Below the log start again, -1 (the high watermark), above it, an unknown partition.
    for (key, partition, offset) in [
        ("below_start.", 0, 1),
        ("minus_one.", 0, -1),
        ("above_hw.", 0, 7),
        ("minus_two.", 0, -2),
        ("unknown_partition.", 5, 0),
    ] {
        let req = delete_request(&topic, &[(partition, offset)], 10_000);
        see_delete(t, &mut o, key, &req).await?;
    }
    // One partition twice: Kafka's handler keeps the last offset (a map by partition).
    let twice = delete_request(&topic, &[(0, 7), (0, 6)], 10_000);
    see_delete(t, &mut o, "twice.", &twice).await?;
    let unknown = delete_request(&c.topic("never-created"), &[(0, 0)], 10_000);
    see_delete(t, &mut o, "unknown_topic.", &unknown).await?;
    Ok(o)
}

async fn followers_stopped(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = six_records(t, c).await?;
    let mut o = Observation::new();
    with_followers_stopped(t, Then::InSync(&topic), async |t: &mut Target| {
        see_delete(
            t,
            &mut o,
            "held.",
            &delete_request(&topic, &[(0, 2)], 2_000),
        )
        .await?;
        // The leader's deletion stands.
        o.set("earliest", list_offset(t, &topic, 0, -2).await?.1);
        Ok(())
    })
    .await?;
    // Running again, the followers take the new start and a deletion completes.
    see_delete(
        t,
        &mut o,
        "after.",
        &delete_request(&topic, &[(0, 2)], 10_000),
    )
    .await?;
    Ok(o)
}
