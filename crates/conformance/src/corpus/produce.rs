//! Produce: acks, the batch rules, unknown topics, size limits, idempotent sequences, and
//! what an acks=all write does while the followers are stopped.

use anyhow::Result;
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::InitProducerIdRequest;
use kafka_protocol::ResponseError;

use super::{
    batch, high_watermark, idempotent, list_offsets_request, now_ms, produce, produce_request,
    scenario, see_produce, timing, values, wait_high_watermark, Ctx, Rec, Scenario,
    LIST_OFFSETS_VERSION, PRODUCE_VERSION,
};
use crate::observe::Observation;
use crate::target::{Target, LEADER};

pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!("produce/acks=1", true, acks_one),
        scenario!("produce/acks=-1", true, acks_all),
        scenario!("produce/acks=0", true, acks_zero),
        scenario!(
            "produce/acks=0 that fails closes the connection",
            true,
            acks_zero_failing
        ),
        scenario!("produce/acks=2", true, bad_acks),
        scenario!("produce/two batches for one partition", true, two_batches),
        scenario!("produce/unknown topic", true, unknown_topic),
        scenario!("produce/unknown partition", true, unknown_partition),
        scenario!(
            "produce/batch over message.max.bytes",
            true,
            over_broker_limit
        ),
        scenario!(
            "produce/batch over the topic's max.message.bytes",
            true,
            over_topic_limit
        ),
        scenario!("produce/idempotent duplicate", true, idempotent_duplicate),
        scenario!("produce/idempotent sequence gap", true, idempotent_gap),
        scenario!(
            "produce/idempotent new producer not at sequence 0",
            true,
            idempotent_first_gap
        ),
        scenario!(
            "produce/acks=-1 with the followers stopped",
            true,
            acks_all_followers_stopped
        ),
        scenario!(
            "init_producer_id/empty transactional id",
            true,
            empty_transactional_id
        ),
    ]
}

async fn acks_one(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("p");
    t.create_topic(&topic, 1, &[]).await?;
    let mut o = Observation::new();
    let (p, _) = produce(t, &topic, 0, 1, 30_000, values("a", 3)).await?;
    see_produce(&mut o, "", &p);
    let (p, _) = produce(t, &topic, 0, 1, 30_000, values("b", 2)).await?;
    see_produce(&mut o, "second.", &p);
    o.set(
        "high_watermark.replicated",
        wait_high_watermark(t, &topic, 0, 5).await?,
    );
    Ok(o)
}

async fn acks_all(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("p");
    t.create_topic(&topic, 1, &[]).await?;
    let mut o = Observation::new();
    let (p, _) = produce(t, &topic, 0, -1, 30_000, values("a", 3)).await?;
    see_produce(&mut o, "", &p);
    // An acks=all answer means the high watermark has passed the batch already.
    o.set(
        "high_watermark.on_answer",
        high_watermark(t, &topic, 0).await?,
    );
    Ok(o)
}

async fn acks_zero(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("p");
    t.create_topic(&topic, 1, &[]).await?;
    let mut o = Observation::new();
    let mut conn = t.open(LEADER).await?;
    conn.write_request(
        &produce_request(&topic, 0, 0, 30_000, values("a", 3)),
        PRODUCE_VERSION,
    )
    .await?;
    // The next answer on this connection must be the ListOffsets' own: `send` checks the
    // correlation id, so an answer to the produce would show up here as an error.
    let next = conn
        .send(
            &list_offsets_request(-1, 0, &topic, 0, -2),
            LIST_OFFSETS_VERSION,
        )
        .await;
    o.set(
        "produce answered",
        if next.is_ok() {
            "no (next answer is the next request's)"
        } else {
            "yes"
        },
    );
    o.set(
        "high_watermark.replicated",
        wait_high_watermark(t, &topic, 0, 3).await?,
    );
    Ok(o)
}

async fn acks_zero_failing(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("never-created");
    let mut o = Observation::new();
    let mut conn = t.open(LEADER).await?;
    conn.write_request(
        &produce_request(&topic, 0, 0, 30_000, values("a", 1)),
        PRODUCE_VERSION,
    )
    .await?;
    let next = conn
        .send(
            &list_offsets_request(-1, 0, &topic, 0, -1),
            LIST_OFFSETS_VERSION,
        )
        .await;
    o.set(
        "connection after",
        if next.is_ok() { "open" } else { "closed" },
    );
    Ok(o)
}

async fn bad_acks(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("p");
    t.create_topic(&topic, 1, &[]).await?;
    let mut o = Observation::new();
    let (p, _) = produce(t, &topic, 0, 2, 30_000, values("a", 1)).await?;
    see_produce(&mut o, "", &p);
    o.set("high_watermark.after", high_watermark(t, &topic, 0).await?);
    Ok(o)
}

async fn two_batches(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("p");
    t.create_topic(&topic, 1, &[]).await?;
    let mut o = Observation::new();
    let mut both = BytesMut::new();
    both.extend_from_slice(&values("a", 2));
    both.extend_from_slice(&values("b", 2));
    let (p, _) = produce(t, &topic, 0, -1, 30_000, both.freeze()).await?;
    see_produce(&mut o, "", &p);
    // Nothing of that partition may be appended: a later write starts at offset 0.
    let (p, _) = produce(t, &topic, 0, -1, 30_000, values("c", 1)).await?;
    see_produce(&mut o, "next.", &p);
    Ok(o)
}

async fn unknown_topic(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("never-created");
    let mut o = Observation::new();
    let (p, _) = produce(t, &topic, 0, -1, 30_000, values("a", 1)).await?;
    see_produce(&mut o, "", &p);
    // Produce does not create topics; only Metadata may.
    let meta = t.metadata(&[&topic]).await?;
    o.error(
        "metadata.error",
        meta.topics.first().map_or(-1, |m| m.error_code),
    );
    Ok(o)
}

async fn unknown_partition(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("p");
    t.create_topic(&topic, 1, &[]).await?;
    let mut o = Observation::new();
    let (p, _) = produce(t, &topic, 7, -1, 30_000, values("a", 1)).await?;
    see_produce(&mut o, "", &p);
    Ok(o)
}

/// One record whose value is `bytes` long.
fn big(bytes: usize) -> Bytes {
    let value = "x".repeat(bytes);
    batch(&[Rec {
        key: "k",
        value: &value,
        timestamp: now_ms(),
    }])
}

async fn over_broker_limit(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("p");
    t.create_topic(&topic, 1, &[]).await?;
    let mut o = Observation::new();
    // message.max.bytes is 1048588 on both.
    let (p, _) = produce(t, &topic, 0, -1, 30_000, big(1_100_000)).await?;
    see_produce(&mut o, "", &p);
    o.set("high_watermark.after", high_watermark(t, &topic, 0).await?);
    Ok(o)
}

async fn over_topic_limit(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("p");
    t.create_topic(&topic, 1, &[("max.message.bytes", "1000")])
        .await?;
    let mut o = Observation::new();
    let (p, _) = produce(t, &topic, 0, -1, 30_000, big(2000)).await?;
    see_produce(&mut o, "", &p);
    let (p, _) = produce(t, &topic, 0, -1, 30_000, big(100)).await?;
    see_produce(&mut o, "small.", &p);
    Ok(o)
}

/// A producer id and epoch from InitProducerId (no transactional id: an idempotent producer).
async fn init_producer_id(t: &mut Target, o: &mut Observation) -> Result<(i64, i16)> {
    let req = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000)
        .with_producer_id((-1).into())
        .with_producer_epoch(-1);
    // Kafka's first InitProducerId may find its producer-id machinery still loading
    // (COORDINATOR_LOAD_IN_PROGRESS, retriable): ask again, as every producer does.
    let mut resp = t.leader(&req, 4).await?;
    for _ in 0..100 {
        if resp.error_code != ResponseError::CoordinatorLoadInProgress.code()
            && resp.error_code != ResponseError::CoordinatorNotAvailable.code()
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        resp = t.leader(&req, 4).await?;
    }
    o.error("init_producer_id.error", resp.error_code);
    o.set("init_producer_id.epoch", resp.producer_epoch);
    Ok((resp.producer_id.0, resp.producer_epoch))
}

async fn idempotent_duplicate(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("p");
    t.create_topic(&topic, 1, &[]).await?;
    let mut o = Observation::new();
    let (pid, epoch) = init_producer_id(t, &mut o).await?;
    let (p, _) = produce(t, &topic, 0, -1, 30_000, idempotent(pid, epoch, 0, 3)).await?;
    see_produce(&mut o, "first.", &p);
    let (p, _) = produce(t, &topic, 0, -1, 30_000, idempotent(pid, epoch, 3, 2)).await?;
    see_produce(&mut o, "second.", &p);
    // The first batch again, as a producer retrying after a lost answer sends it.
    let (p, _) = produce(t, &topic, 0, -1, 30_000, idempotent(pid, epoch, 0, 3)).await?;
    see_produce(&mut o, "retry_of_first.", &p);
    o.set("high_watermark.after", high_watermark(t, &topic, 0).await?);
    Ok(o)
}

async fn idempotent_gap(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("p");
    t.create_topic(&topic, 1, &[]).await?;
    let mut o = Observation::new();
    let (pid, epoch) = init_producer_id(t, &mut o).await?;
    let (p, _) = produce(t, &topic, 0, -1, 30_000, idempotent(pid, epoch, 0, 3)).await?;
    see_produce(&mut o, "first.", &p);
    let (p, _) = produce(t, &topic, 0, -1, 30_000, idempotent(pid, epoch, 5, 1)).await?;
    see_produce(&mut o, "gap.", &p);
    o.set("high_watermark.after", high_watermark(t, &topic, 0).await?);
    Ok(o)
}

async fn idempotent_first_gap(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("p");
    t.create_topic(&topic, 1, &[]).await?;
    let mut o = Observation::new();
    let (pid, epoch) = init_producer_id(t, &mut o).await?;
    let (p, _) = produce(t, &topic, 0, -1, 30_000, idempotent(pid, epoch, 7, 1)).await?;
    see_produce(&mut o, "", &p);
    Ok(o)
}

async fn acks_all_followers_stopped(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("p");
    t.create_topic(&topic, 1, &[]).await?;
    let mut o = Observation::new();
    let (p, _) = produce(t, &topic, 0, -1, 30_000, values("a", 2)).await?;
    see_produce(&mut o, "before.", &p);
    t.stop_followers().await?;
    let stopped = stopped_part(t, &topic, &mut o).await;
    t.resume_followers().await?;
    t.wait_in_sync(&[&topic]).await?;
    stopped?;
    // Continued, the followers fetch the batch and the high watermark passes it.
    o.set(
        "high_watermark.after_resume",
        wait_high_watermark(t, &topic, 0, 3).await?,
    );
    Ok(o)
}

async fn stopped_part(t: &mut Target, topic: &str, o: &mut Observation) -> Result<()> {
    let (p, took) = produce(t, topic, 0, -1, 2_000, values("b", 1)).await?;
    see_produce(o, "stopped.", &p);
    o.set("stopped.answered", timing(took, 2_000));
    o.set("stopped.high_watermark", high_watermark(t, topic, 0).await?);
    Ok(())
}

async fn empty_transactional_id(t: &mut Target, _: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let req = InitProducerIdRequest::default()
        .with_transactional_id(Some(crate::target::name("").into()))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id((-1).into())
        .with_producer_epoch(-1);
    let resp = t.leader(&req, 4).await?;
    o.error("error", resp.error_code);
    o.set("producer_id", resp.producer_id.0);
    Ok(o)
}
