//! Produce: acks, the batch rules, unknown topics, size limits, idempotent sequences, and
//! what an acks=all write does while the followers are stopped.

use anyhow::Result;
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::{BrokerId, CreateTopicsRequest, InitProducerIdRequest};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use kafka_protocol::ResponseError;

use super::{
    batch, consumer_offsets_topic, high_watermark, idempotent, list_offsets_request, now_ms,
    produce, produce_request, scenario, see_produce, timing, values, wait_high_watermark,
    with_followers_stopped, Ctx, Rec, Scenario, Then, LIST_OFFSETS_VERSION, PRODUCE_VERSION,
};
use crate::observe::Observation;
use crate::target::{topic_configs, topic_name, Kind, Target, LEADER};

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
            "produce/idempotent higher epoch not at sequence 0, and the old epoch fenced",
            true,
            idempotent_new_epoch
        ),
        scenario!("produce/corrupt batch (bad CRC)", true, corrupt_batch),
        scenario!("produce/control batch from a client", true, control_batch),
        scenario!("produce/batch with magic 1", true, magic_one),
        scenario!("produce/to an internal topic", true, internal_topic),
        scenario!(
            "produce/acks=-1 to a topic with one replica",
            true,
            acks_all_one_replica
        ),
        scenario!(
            "produce/acks=-1 with min.insync.replicas above the replication factor",
            true,
            acks_all_min_isr_above_replicas
        ),
        scenario!(
            "produce/acks=-1 with the followers stopped",
            true,
            acks_all_followers_stopped
        ),
        scenario!(
            "produce/acks=-1 while the ISR is below min.insync.replicas",
            false,
            acks_all_isr_below_min
        ),
        scenario!(
            "init_producer_id/empty transactional id",
            true,
            empty_transactional_id
        ),
    ]
}

/// A scenario's one-partition topic and what the scenario has seen of it.
struct Topic {
    name: String,
    o: Observation,
}

impl Topic {
    /// Creates the scenario's topic `p`, its partition led by node 1, with `configs`.
    async fn create(t: &mut Target, c: &Ctx, configs: &[(&str, &str)]) -> Result<Topic> {
        let name = c.topic("p");
        t.create_topic(&name, 1, configs).await?;
        Ok(Topic {
            name,
            o: Observation::new(),
        })
    }

    /// Produces `records` to partition 0 with `acks` (30 s timeout) and records the
    /// answer under `prefix`.
    async fn produce(
        &mut self,
        t: &mut Target,
        prefix: &str,
        acks: i16,
        records: Bytes,
    ) -> Result<()> {
        let (p, _) = produce(t, &self.name, 0, acks, 30_000, records).await?;
        see_produce(&mut self.o, prefix, &p);
        Ok(())
    }

    /// Records the high watermark at the end (what was appended after all) and hands back
    /// what was seen.
    async fn high_watermark_after(mut self, t: &mut Target) -> Result<Observation> {
        self.o.set(
            "high_watermark.after",
            high_watermark(t, &self.name, 0).await?,
        );
        Ok(self.o)
    }
}

/// One acks=`acks` batch to a new topic: its answer, and the high watermark after it.
async fn one_batch(t: &mut Target, c: &Ctx, acks: i16, records: Bytes) -> Result<Observation> {
    let mut topic = Topic::create(t, c, &[]).await?;
    topic.produce(t, "", acks, records).await?;
    topic.high_watermark_after(t).await
}

async fn acks_one(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut topic = Topic::create(t, c, &[]).await?;
    topic.produce(t, "", 1, values("a", 3)).await?;
    topic.produce(t, "second.", 1, values("b", 2)).await?;
    topic.o.set(
        "high_watermark.replicated",
        wait_high_watermark(t, &topic.name, 0, 5).await?,
    );
    Ok(topic.o)
}

async fn acks_all(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut topic = Topic::create(t, c, &[]).await?;
    topic.produce(t, "", -1, values("a", 3)).await?;
    // An acks=all answer means the high watermark has passed the batch already.
    topic.o.set(
        "high_watermark.on_answer",
        high_watermark(t, &topic.name, 0).await?,
    );
    Ok(topic.o)
}

/// Writes an acks=0 produce of `n` records to `topic` on a new connection, then sends a
/// ListOffsets at `timestamp` on the same one; whether that got its own answer. (`send`
/// checks the correlation id: an answer to the produce, or a closed connection, is an
/// error there.)
async fn acks_zero_then_list_offsets(
    t: &mut Target,
    topic: &str,
    n: usize,
    timestamp: i64,
) -> Result<bool> {
    let mut conn = t.open(LEADER).await?;
    let produce = produce_request(topic, 0, 0, 30_000, values("a", n));
    conn.write_request(&produce, PRODUCE_VERSION).await?;
    let list = list_offsets_request(-1, 0, topic, 0, timestamp);
    Ok(conn.send(&list, LIST_OFFSETS_VERSION).await.is_ok())
}

async fn acks_zero(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let Topic { name: topic, mut o } = Topic::create(t, c, &[]).await?;
    // The next answer on this connection must be the ListOffsets' own.
    let next_answered = acks_zero_then_list_offsets(t, &topic, 3, -2).await?;
    o.set(
        "produce answered",
        if next_answered {
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
    let next_answered = acks_zero_then_list_offsets(t, &topic, 1, -1).await?;
    o.set(
        "connection after",
        if next_answered { "open" } else { "closed" },
    );
    Ok(o)
}

async fn bad_acks(t: &mut Target, c: &Ctx) -> Result<Observation> {
    one_batch(t, c, 2, values("a", 1)).await
}

async fn two_batches(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut topic = Topic::create(t, c, &[]).await?;
    let mut both = BytesMut::new();
    both.extend_from_slice(&values("a", 2));
    both.extend_from_slice(&values("b", 2));
    topic.produce(t, "", -1, both.freeze()).await?;
    // Nothing of that partition may be appended: a later write starts at offset 0.
    topic.produce(t, "next.", -1, values("c", 1)).await?;
    Ok(topic.o)
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
    let Topic { name: topic, mut o } = Topic::create(t, c, &[]).await?;
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
    // message.max.bytes is 1048588 on both.
    one_batch(t, c, -1, big(1_100_000)).await
}

async fn over_topic_limit(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut topic = Topic::create(t, c, &[("max.message.bytes", "1000")]).await?;
    topic.produce(t, "", -1, big(2000)).await?;
    topic.produce(t, "small.", -1, big(100)).await?;
    Ok(topic.o)
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

/// One acks=-1 batch of an idempotent producer: the prefix its answer is recorded under,
/// how far above the producer's epoch it is sent (0: at the producer's own), its base
/// sequence, and how many records it holds.
type Sequenced = (&'static str, i16, i32, usize);

/// A new idempotent producer sends `batches`, in order, to a new topic.
async fn idempotent_batches(t: &mut Target, c: &Ctx, batches: &[Sequenced]) -> Result<Topic> {
    let mut topic = Topic::create(t, c, &[]).await?;
    let (pid, epoch) = init_producer_id(t, &mut topic.o).await?;
    for &(prefix, above, base_sequence, n) in batches {
        let records = idempotent(pid, epoch + above, base_sequence, n);
        topic.produce(t, prefix, -1, records).await?;
    }
    Ok(topic)
}

async fn idempotent_duplicate(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let batches = [
        ("first.", 0, 0, 3),
        ("second.", 0, 3, 2),
        // The first batch again, as a producer retrying after a lost answer sends it.
        ("retry_of_first.", 0, 0, 3),
    ];
    let topic = idempotent_batches(t, c, &batches).await?;
    topic.high_watermark_after(t).await
}

async fn idempotent_gap(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let batches = [("first.", 0, 0, 3), ("gap.", 0, 5, 1)];
    let topic = idempotent_batches(t, c, &batches).await?;
    topic.high_watermark_after(t).await
}

async fn idempotent_first_gap(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = idempotent_batches(t, c, &[("", 0, 7, 1)]).await?;
    Ok(topic.o)
}

async fn idempotent_new_epoch(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let batches = [
        ("first.", 0, 0, 3),
        // An idempotent producer bumps its own epoch (KIP-360) and starts again at 0.
        ("new_epoch_at_3.", 1, 3, 1),
        ("new_epoch_at_0.", 1, 0, 1),
        ("old_epoch.", 0, 3, 1),
    ];
    let topic = idempotent_batches(t, c, &batches).await?;
    topic.high_watermark_after(t).await
}

async fn corrupt_batch(t: &mut Target, c: &Ctx) -> Result<Observation> {
    // The last byte is the record's value: covered by the CRC, not by the framing.
    let mut bytes = BytesMut::from(&values("a", 1)[..]);
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    one_batch(t, c, -1, bytes.freeze()).await
}

async fn magic_one(t: &mut Target, c: &Ctx) -> Result<Observation> {
    // The magic byte sits at offset 16 in every message format.
    let mut bytes = BytesMut::from(&values("a", 1)[..]);
    bytes[16] = 1;
    one_batch(t, c, -1, bytes.freeze()).await
}

/// One control record (an abort marker's shape) in a v2 batch, which only brokers may write.
fn control_records() -> Result<Bytes> {
    let record = Record {
        transactional: false,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: now_ms(),
        key: Some(Bytes::from_static(&[0, 0, 0, 0])),
        value: Some(Bytes::from_static(&[0, 0, 0, 0, 0, 0])),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &[record], &options)?;
    Ok(buf.freeze())
}

async fn control_batch(t: &mut Target, c: &Ctx) -> Result<Observation> {
    one_batch(t, c, -1, control_records()?).await
}

async fn internal_topic(t: &mut Target, c: &Ctx) -> Result<Observation> {
    consumer_offsets_topic(t, c).await?;
    let mut o = Observation::new();
    let (p, _) = produce(t, "__consumer_offsets", 0, 1, 30_000, values("a", 1)).await?;
    see_produce(&mut o, "", &p);
    Ok(o)
}

/// Creates `topic` with one partition on `replicas` replicas led by node 1 (on Kafka, by an
/// explicit assignment of nodes 1, 2, ...) and `configs`; returns CreateTopics' error.
async fn create_with_replicas(
    t: &mut Target,
    topic: &str,
    replicas: i16,
    configs: &[(&str, &str)],
) -> Result<i16> {
    let creatable = CreatableTopic::default()
        .with_name(topic_name(topic))
        .with_configs(topic_configs(configs));
    let creatable = match t.kind {
        Kind::Kafka => creatable
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(vec![CreatableReplicaAssignment::default()
                .with_partition_index(0)
                .with_broker_ids((1..=i32::from(replicas)).map(BrokerId).collect())]),
        Kind::Ours => creatable
            .with_num_partitions(1)
            .with_replication_factor(replicas),
    };
    let req = CreateTopicsRequest::default()
        .with_topics(vec![creatable])
        .with_timeout_ms(30_000);
    let resp = t.leader(&req, 7).await?;
    let code = resp.topics.first().map_or(-1, |r| r.error_code);
    if code == 0 {
        t.wait_in_sync(&[topic]).await?;
    }
    Ok(code)
}

/// The scenario's topic `what` of one partition on `replicas` replicas (as
/// [`create_with_replicas`] makes it), CreateTopics' error recorded as `create.error`.
async fn with_replicas(
    t: &mut Target,
    c: &Ctx,
    what: &str,
    replicas: i16,
    configs: &[(&str, &str)],
) -> Result<(Topic, i16)> {
    let name = c.topic(what);
    let created = create_with_replicas(t, &name, replicas, configs).await?;
    let mut o = Observation::new();
    o.error("create.error", created);
    Ok((Topic { name, o }, created))
}

async fn acks_all_one_replica(t: &mut Target, c: &Ctx) -> Result<Observation> {
    // The cluster's min.insync.replicas is 2 on both.
    let (mut topic, _) = with_replicas(t, c, "rf1", 1, &[]).await?;
    topic.produce(t, "", -1, values("a", 2)).await?;
    topic.high_watermark_after(t).await
}

async fn acks_all_min_isr_above_replicas(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let (mut topic, created) =
        with_replicas(t, c, "minisr4", 3, &[("min.insync.replicas", "4")]).await?;
    if created != 0 {
        return Ok(topic.o);
    }
    topic.produce(t, "", -1, values("a", 2)).await?;
    topic.produce(t, "acks_1.", 1, values("b", 1)).await?;
    topic.o.set(
        "high_watermark.after",
        wait_high_watermark(t, &topic.name, 0, 3).await?,
    );
    Ok(topic.o)
}

async fn acks_all_followers_stopped(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut topic = Topic::create(t, c, &[]).await?;
    topic.produce(t, "before.", -1, values("a", 2)).await?;
    with_followers_stopped(t, Then::InSync(&topic.name), async |t: &mut Target| {
        produce_stopped(t, &topic.name, &mut topic.o, "b").await
    })
    .await?;
    // Continued, the followers fetch the batch and the high watermark passes it.
    topic.o.set(
        "high_watermark.after_resume",
        wait_high_watermark(t, &topic.name, 0, 3).await?,
    );
    Ok(topic.o)
}

/// With the followers stopped until the leader has dropped them from the ISR (Kafka's
/// controller fences them after its session timeout; ours drops them after
/// replica.lag.time.max.ms), an acks=-1 produce is refused before it is appended.
async fn acks_all_isr_below_min(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut topic = Topic::create(t, c, &[]).await?;
    topic.produce(t, "before.", -1, values("a", 2)).await?;
    with_followers_stopped(t, Then::InSync(&topic.name), async |t: &mut Target| {
        isr_below_min_part(t, &topic.name, &mut topic.o).await
    })
    .await?;
    Ok(topic.o)
}

async fn isr_below_min_part(t: &mut Target, topic: &str, o: &mut Observation) -> Result<()> {
    // A follower whose log end is the leader's counts as caught up however long it has
    // not fetched: write past it, so that the leader's own ISR check can drop it too.
    let (p, _) = produce(t, topic, 0, 1, 30_000, values("b", 1)).await?;
    see_produce(o, "acks_1.", &p);
    // Kafka's Metadata shows the smaller ISR a moment before its partition applies it. An
    // acks=-1 control batch is a probe that appends nothing either way: the ISR check comes
    // first (NOT_ENOUGH_REPLICAS), the batch's validation after (INVALID_RECORD).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let (p, _) = produce(t, topic, 0, -1, 30_000, control_records()?).await?;
        if p.error_code == ResponseError::NotEnoughReplicas.code()
            || std::time::Instant::now() > deadline
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let meta = t.metadata(&[topic]).await?;
    let isr: Vec<String> = meta
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .map(|p| p.isr_nodes.iter().map(|n| n.0.to_string()).collect())
        .unwrap_or_default();
    o.set("stopped.isr", isr.join(","));
    produce_stopped(t, topic, o, "c").await
}

/// An acks=-1 produce of one record `"{tag}-0"` with the followers stopped, with a 2 s
/// timeout: its answer, whether it came at once or after the timeout, and the high
/// watermark then, all under `stopped.`.
async fn produce_stopped(
    t: &mut Target,
    topic: &str,
    o: &mut Observation,
    tag: &str,
) -> Result<()> {
    let (p, took) = produce(t, topic, 0, -1, 2_000, values(tag, 1)).await?;
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
