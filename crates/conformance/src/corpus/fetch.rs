//! Fetch: when an answer comes at once and when it waits, what a consumer and a follower may
//! read (up to the high watermark, up to the log end), and offsets out of range.

use std::time::Instant;

use anyhow::Result;
use kafka_protocol::messages::FetchRequest;

use super::{
    fetch, fetch_request, produce, scenario, see_fetch, see_produce, values,
    with_followers_stopped, Ctx, Scenario, Then, FETCH_VERSION,
};
use crate::observe::Observation;
use crate::target::{Target, LEADER};

pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!("fetch/data there, min_bytes=1", true, data_there),
        scenario!("fetch/at the end, max_wait=0", true, at_end_no_wait),
        scenario!("fetch/at the end, min_bytes=0", true, at_end_min_bytes_zero),
        scenario!("fetch/at the end, waits max_wait", true, at_end_waits),
        scenario!(
            "fetch/less than min_bytes there, waits max_wait",
            true,
            below_min_bytes
        ),
        scenario!(
            "fetch/parked, then a produce arrives",
            true,
            parked_then_produce
        ),
        scenario!(
            "fetch/partition_max_bytes below one batch",
            true,
            small_partition_max_bytes
        ),
        scenario!("fetch/offset above the log end", true, above_log_end),
        scenario!("fetch/negative offset", true, negative_offset),
        scenario!("fetch/unknown topic", true, unknown_topic),
        scenario!(
            "fetch/consumer and follower above the high watermark",
            true,
            above_high_watermark
        ),
        scenario!(
            "fetch/from a replica id that is not a replica",
            true,
            not_a_replica
        ),
    ]
}

/// A topic with three records, replicated (high watermark 3).
async fn three_records(t: &mut Target, c: &Ctx) -> Result<String> {
    let topic = c.topic("f");
    t.create_topic(&topic, 1, &[]).await?;
    produce(t, &topic, 0, -1, 30_000, values("r", 3)).await?;
    Ok(topic)
}

/// Sends `req` and records the answer under `prefix`, judged against `wait_ms`.
async fn see(
    t: &mut Target,
    o: &mut Observation,
    prefix: &str,
    req: &FetchRequest,
    wait_ms: i32,
) -> Result<()> {
    let (p, took) = fetch(t, req).await?;
    see_fetch(o, prefix, &p, took, wait_ms);
    Ok(())
}

/// A scenario of one fetch, `req` of the topic of [`three_records`], judged against
/// `wait_ms`.
async fn one_fetch(
    t: &mut Target,
    c: &Ctx,
    req: fn(&str) -> FetchRequest,
    wait_ms: i32,
) -> Result<Observation> {
    let topic = three_records(t, c).await?;
    let mut o = Observation::new();
    see(t, &mut o, "", &req(&topic), wait_ms).await?;
    Ok(o)
}

async fn data_there(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = three_records(t, c).await?;
    let mut o = Observation::new();
    for (prefix, offset) in [("", 0), ("from_1.", 1)] {
        let req = fetch_request(-1, 3_000, 1, &topic, 0, offset);
        see(t, &mut o, prefix, &req, 3_000).await?;
    }
    Ok(o)
}

async fn at_end_no_wait(t: &mut Target, c: &Ctx) -> Result<Observation> {
    // max_wait 0: whatever the time, it must not have waited; call a long answer a wait.
    one_fetch(t, c, |topic| fetch_request(-1, 0, 1, topic, 0, 3), 2_000).await
}

async fn at_end_min_bytes_zero(t: &mut Target, c: &Ctx) -> Result<Observation> {
    one_fetch(
        t,
        c,
        |topic| fetch_request(-1, 3_000, 0, topic, 0, 3),
        3_000,
    )
    .await
}

async fn at_end_waits(t: &mut Target, c: &Ctx) -> Result<Observation> {
    one_fetch(
        t,
        c,
        |topic| fetch_request(-1, 1_500, 1, topic, 0, 3),
        1_500,
    )
    .await
}

async fn below_min_bytes(t: &mut Target, c: &Ctx) -> Result<Observation> {
    one_fetch(
        t,
        c,
        |topic| fetch_request(-1, 1_500, 1 << 20, topic, 0, 0),
        1_500,
    )
    .await
}

async fn parked_then_produce(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = three_records(t, c).await?;
    let mut o = Observation::new();
    let mut consumer = t.open(LEADER).await?;
    let start = Instant::now();
    let req = fetch_request(-1, 10_000, 1, &topic, 0, 3);
    consumer.write_request(&req, FETCH_VERSION).await?;
    let (p, _) = produce(t, &topic, 0, -1, 30_000, values("late", 1)).await?;
    see_produce(&mut o, "produce.", &p);
    let (_, resp) = consumer
        .read_response::<FetchRequest>(FETCH_VERSION)
        .await?;
    let took = start.elapsed();
    let part = resp
        .responses
        .into_iter()
        .flat_map(|t| t.partitions)
        .next()
        .unwrap_or_default();
    see_fetch(&mut o, "fetch.", &part, took, 10_000);
    Ok(o)
}

async fn small_partition_max_bytes(t: &mut Target, c: &Ctx) -> Result<Observation> {
    // The first batch is returned whole even when larger than the limit (KIP-74).
    let req = |topic: &str| {
        let mut req = fetch_request(-1, 0, 1, topic, 0, 0);
        req.topics[0].partitions[0].partition_max_bytes = 10;
        req
    };
    one_fetch(t, c, req, 2_000).await
}

async fn above_log_end(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = three_records(t, c).await?;
    let mut o = Observation::new();
    let consumer = fetch_request(-1, 3_000, 1, &topic, 0, 100);
    see(t, &mut o, "consumer.", &consumer, 3_000).await?;
    // Replica 2 is a follower on both: past the leader's log end it is out of range too.
    let follower = fetch_request(2, 3_000, 1, &topic, 0, 100);
    see(t, &mut o, "follower_2.", &follower, 3_000).await?;
    Ok(o)
}

async fn negative_offset(t: &mut Target, c: &Ctx) -> Result<Observation> {
    one_fetch(
        t,
        c,
        |topic| fetch_request(-1, 3_000, 1, topic, 0, -5),
        3_000,
    )
    .await
}

async fn unknown_topic(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let req = fetch_request(-1, 3_000, 1, &c.topic("never-created"), 0, 0);
    let mut o = Observation::new();
    see(t, &mut o, "", &req, 3_000).await?;
    Ok(o)
}

async fn above_high_watermark(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = three_records(t, c).await?;
    let mut o = Observation::new();
    with_followers_stopped(t, Then::InSync(&topic), async |t: &mut Target| {
        above_high_watermark_stopped(t, &topic, &mut o).await
    })
    .await?;
    Ok(o)
}

async fn above_high_watermark_stopped(
    t: &mut Target,
    topic: &str,
    o: &mut Observation,
) -> Result<()> {
    // acks=1: appended on the leader only; the log end is 4, the high watermark stays 3.
    let (p, _) = produce(t, topic, 0, 1, 30_000, values("unreplicated", 1)).await?;
    see_produce(o, "acks_1.", &p);
    for (prefix, offset) in [
        ("consumer_at_hw.", 3),
        ("consumer_at_log_end.", 4),
        ("consumer_past_log_end.", 5),
    ] {
        let req = fetch_request(-1, 0, 1, topic, 0, offset);
        see(t, o, prefix, &req, 2_000).await?;
    }
    // A follower reads up to the log end. (Its fetch offset also tells the leader replica
    // 2's log end: 3, so the high watermark cannot move.)
    let follower = fetch_request(2, 0, 1, topic, 0, 3);
    see(t, o, "follower_2_at_hw.", &follower, 2_000).await?;
    Ok(())
}

async fn not_a_replica(t: &mut Target, c: &Ctx) -> Result<Observation> {
    one_fetch(t, c, |topic| fetch_request(7, 0, 1, topic, 0, 0), 2_000).await
}
