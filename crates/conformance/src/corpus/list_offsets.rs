//! ListOffsets: earliest, latest and by timestamp; what "latest" means to a consumer, to a
//! replica and under read_committed; unknown topics.

use anyhow::Result;

use super::{
    batch, list_offsets_request, produce, scenario, Ctx, Rec, Scenario, LIST_OFFSETS_VERSION,
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

async fn by_timestamp(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("lo");
    t.create_topic(&topic, 1, &[]).await?;
    // Two batches: offsets 0-1 at 1000 and 3000, offsets 2-3 at 2000 and 5000.
    let first = [
        Rec {
            key: "k",
            value: "a",
            timestamp: 1_000,
        },
        Rec {
            key: "k",
            value: "b",
            timestamp: 3_000,
        },
    ];
    let second = [
        Rec {
            key: "k",
            value: "c",
            timestamp: 2_000,
        },
        Rec {
            key: "k",
            value: "d",
            timestamp: 5_000,
        },
    ];
    produce(t, &topic, 0, -1, 30_000, batch(&first)).await?;
    produce(t, &topic, 0, -1, 30_000, batch(&second)).await?;
    let mut o = Observation::new();
    for (key, ts) in [
        ("earliest", -2),
        ("latest", -1),
        ("max_timestamp", -3),
        ("ts_0", 0),
        ("ts_1000", 1_000),
        ("ts_1500", 1_500),
        ("ts_2500", 2_500),
        ("ts_4000", 4_000),
        ("ts_6000", 6_000),
    ] {
        let req = list_offsets_request(-1, 0, &topic, 0, ts);
        see_epoch(&mut o, key, t, &req).await?;
    }
    Ok(o)
}

async fn empty_partition(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("lo");
    t.create_topic(&topic, 1, &[]).await?;
    let mut o = Observation::new();
    for (key, ts) in [
        ("earliest", -2),
        ("latest", -1),
        ("max_timestamp", -3),
        ("ts_1000", 1_000),
    ] {
        let req = list_offsets_request(-1, 0, &topic, 0, ts);
        see_epoch(&mut o, key, t, &req).await?;
    }
    Ok(o)
}

async fn unknown_topic(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("never-created");
    let mut o = Observation::new();
    let req = list_offsets_request(-1, 0, &topic, 0, -1);
    see_epoch(&mut o, "latest", t, &req).await?;
    Ok(o)
}

async fn latest_above_high_watermark(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("lo");
    t.create_topic(&topic, 1, &[]).await?;
    let replicated = [
        Rec {
            key: "k",
            value: "a",
            timestamp: 1_000,
        },
        Rec {
            key: "k",
            value: "b",
            timestamp: 2_000,
        },
    ];
    produce(t, &topic, 0, -1, 30_000, batch(&replicated)).await?;
    let mut o = Observation::new();
    t.stop_followers().await?;
    let seen = latest_stopped(t, &topic, &mut o).await;
    t.resume_followers().await?;
    t.wait_in_sync(&[&topic]).await?;
    seen?;
    Ok(o)
}

async fn latest_stopped(t: &mut Target, topic: &str, o: &mut Observation) -> Result<()> {
    // The log end is 3, the high watermark 2; the unreplicated record has the largest
    // timestamp.
    let unreplicated = [Rec {
        key: "k",
        value: "unreplicated",
        timestamp: 9_000,
    }];
    produce(t, topic, 0, 1, 30_000, batch(&unreplicated)).await?;
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
