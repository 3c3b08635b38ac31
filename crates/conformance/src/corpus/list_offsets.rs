//! ListOffsets: earliest, latest and by timestamp; what "latest" means to a consumer, to a
//! replica and under read_committed; unknown topics.

use anyhow::Result;
use bytes::Bytes;

use super::{
    batch, list_offsets_request, produce, scenario, with_followers_stopped, Ctx, Rec, Scenario,
    Then, LIST_OFFSETS_VERSION,
};
use crate::observe::Observation;
use crate::target::Target;

pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!(
            "list_offsets/earliest, latest, by timestamp",
            true,
            by_timestamp
        ),
        scenario!("list_offsets/empty partition", true, empty_partition),
        scenario!("list_offsets/unknown topic", true, unknown_topic),
        scenario!(
            "list_offsets/latest above the high watermark",
            true,
            latest_above_high_watermark
        ),
    ]
}

/// Records `(error, offset, timestamp)` under `key`.
fn see(o: &mut Observation, key: &str, (error, offset, timestamp): (i16, i64, i64)) {
    o.error(format!("{key}.error"), error);
    o.set(format!("{key}.offset"), offset);
    o.set(format!("{key}.timestamp"), timestamp);
}

/// A batch of records keyed `k`, each `(value, timestamp)`.
fn timed(records: &[(&str, i64)]) -> Bytes {
    let records: Vec<Rec> = records
        .iter()
        .map(|&(value, timestamp)| Rec {
            key: "k",
            value,
            timestamp,
        })
        .collect();
    batch(&records)
}

/// The scenario's topic `lo`, with `records` produced to it acks=-1.
async fn topic_with(t: &mut Target, c: &Ctx, records: &[Bytes]) -> Result<String> {
    let topic = c.topic("lo");
    t.create_topic(&topic, 1, &[]).await?;
    for r in records {
        produce(t, &topic, 0, -1, 30_000, r.clone()).await?;
    }
    Ok(topic)
}

/// A consumer's ListOffsets of `topic` at each `(key, timestamp)`, recorded under the key.
async fn offsets_at(
    t: &mut Target,
    topic: &str,
    timestamps: &[(&str, i64)],
) -> Result<Observation> {
    let mut o = Observation::new();
    for &(key, ts) in timestamps {
        let req = list_offsets_request(-1, 0, topic, 0, ts);
        see_epoch(&mut o, key, t, &req).await?;
    }
    Ok(o)
}

async fn by_timestamp(t: &mut Target, c: &Ctx) -> Result<Observation> {
    // Two batches: offsets 0-1 at 1000 and 3000, offsets 2-3 at 2000 and 5000.
    let first = timed(&[("a", 1_000), ("b", 3_000)]);
    let second = timed(&[("c", 2_000), ("d", 5_000)]);
    let topic = topic_with(t, c, &[first, second]).await?;
    let timestamps = [
        ("earliest", -2),
        ("latest", -1),
        ("max_timestamp", -3),
        ("ts_0", 0),
        ("ts_1000", 1_000),
        ("ts_1500", 1_500),
        ("ts_2500", 2_500),
        ("ts_4000", 4_000),
        ("ts_6000", 6_000),
    ];
    offsets_at(t, &topic, &timestamps).await
}

async fn empty_partition(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = topic_with(t, c, &[]).await?;
    let timestamps = [
        ("earliest", -2),
        ("latest", -1),
        ("max_timestamp", -3),
        ("ts_1000", 1_000),
    ];
    offsets_at(t, &topic, &timestamps).await
}

async fn unknown_topic(t: &mut Target, c: &Ctx) -> Result<Observation> {
    offsets_at(t, &c.topic("never-created"), &[("latest", -1)]).await
}

async fn latest_above_high_watermark(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = topic_with(t, c, &[timed(&[("a", 1_000), ("b", 2_000)])]).await?;
    let mut o = Observation::new();
    with_followers_stopped(t, Then::InSync(&topic), async |t: &mut Target| {
        latest_stopped(t, &topic, &mut o).await
    })
    .await?;
    Ok(o)
}

async fn latest_stopped(t: &mut Target, topic: &str, o: &mut Observation) -> Result<()> {
    // The log end is 3, the high watermark 2; the unreplicated record has the largest
    // timestamp.
    produce(t, topic, 0, 1, 30_000, timed(&[("unreplicated", 9_000)])).await?;
    // Replica id -2 is Kafka's "debugging" consumer; 2 is a follower's id.
    for (who, replica_id, isolation) in [
        ("consumer", -1, 0),
        ("read_committed", -1, 1),
        ("debug_replica", -2, 0),
        ("follower_2", 2, 0),
    ] {
        for (what, timestamp) in [("latest", -1), ("max_timestamp", -3), ("ts_5000", 5_000)] {
            let req = list_offsets_request(replica_id, isolation, topic, 0, timestamp);
            see_epoch(o, &format!("{who}_{what}"), t, &req).await?;
        }
    }
    Ok(())
}

/// Records the answer to `req` under `key`, with its leader epoch.
async fn see_epoch(
    o: &mut Observation,
    key: &str,
    t: &mut Target,
    req: &kafka_protocol::messages::ListOffsetsRequest,
) -> Result<()> {
    let resp = t.leader(req, LIST_OFFSETS_VERSION).await?;
    let Some(p) = resp.topics.into_iter().flat_map(|t| t.partitions).next() else {
        anyhow::bail!("the ListOffsets answer names no partition");
    };
    see(o, key, (p.error_code, p.offset, p.timestamp));
    o.set(format!("{key}.leader_epoch"), p.leader_epoch);
    Ok(())
}
