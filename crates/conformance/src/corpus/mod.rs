//! The scenario corpus: what is sent to both brokers, and what is written down of the answers.
//!
//! One file per area, as the protocol splits them. A scenario is a plain async function from
//! a [`Target`] to an [`Observation`]; it never knows which broker it talks to (when it must
//! do something differently on one of them, [`Target`] does it). The corpus uses raw
//! requests where a client would hide the answer (error codes, high watermarks), and real
//! clients where the behaviour spans requests.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{BrokerId, FetchRequest, ListOffsetsRequest, ProduceRequest};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::observe::Observation;
use crate::target::{find_coordinator_request, topic_name, Target};

pub mod admin;
pub mod clients;
pub mod configs;
pub mod delete_records;
pub mod fetch;
pub mod group_requests;
pub mod groups;
pub mod leader_epochs;
pub mod list_offsets;
pub mod metadata;
pub mod offsets;
pub mod produce;
pub mod topics;
pub mod transactions;

/// A scenario's body.
pub type Run = for<'a> fn(&'a mut Target, &'a Ctx) -> BoxFuture<'a>;
pub type BoxFuture<'a> = Pin<Box<dyn Future<Output = Result<Observation>> + Send + 'a>>;

/// One scenario of the corpus.
pub struct Scenario {
    /// `area/what`, e.g. `produce/acks=-1`.
    pub name: &'static str,
    /// In the short run (the test command's): quick, and no follower stopped for long.
    pub short: bool,
    pub run: Run,
    /// Fields known to differ from Kafka, each with the reason (README, "Differences from
    /// Kafka"). Any other difference fails the run.
    pub differs: &'static [(&'static str, &'static str)],
}

/// Builds a [`Scenario`] from an `async fn(&mut Target, &Ctx) -> Result<Observation>`.
macro_rules! scenario {
    ($name:expr, $short:expr, $f:path) => {
        scenario!($name, $short, $f, &[])
    };
    ($name:expr, $short:expr, $f:path, $differs:expr) => {
        $crate::corpus::Scenario {
            name: $name,
            short: $short,
            run: |t, c| Box::pin($f(t, c)),
            differs: $differs,
        }
    };
}
pub(crate) use scenario;

/// Every scenario, in the order they run.
pub fn all() -> Vec<Scenario> {
    let mut all = Vec::new();
    all.extend(produce::scenarios());
    all.extend(fetch::scenarios());
    all.extend(list_offsets::scenarios());
    all.extend(leader_epochs::scenarios());
    all.extend(metadata::scenarios());
    all.extend(topics::scenarios());
    all.extend(delete_records::scenarios());
    all.extend(configs::scenarios());
    all.extend(admin::scenarios());
    all.extend(groups::scenarios());
    all.extend(offsets::scenarios());
    all.extend(clients::scenarios());
    all.extend(transactions::scenarios());
    // The long ones last: they stop Kafka's followers past its 9 s broker session, and its
    // controller fences them and moves leaders, which the others need not see.
    all.sort_by_key(|s| !s.short);
    all
}

/// What a scenario gets besides its target: names that are the same on both brokers and
/// new in every run.
pub struct Ctx {
    prefix: String,
    /// Kafka's leader of each `__consumer_offsets` partition, to name groups whose
    /// coordinator is node 1 there (ours coordinates every group on node 1).
    offsets_leaders: Arc<Vec<i32>>,
}

impl Ctx {
    pub fn new(run_id: &str, index: usize, offsets_leaders: Arc<Vec<i32>>) -> Ctx {
        Ctx {
            prefix: format!("conf-{run_id}-{index}"),
            offsets_leaders,
        }
    }

    /// A topic name for this scenario.
    pub fn topic(&self, what: &str) -> String {
        format!("{}-{what}", self.prefix)
    }

    /// A group id for this scenario whose coordinator on Kafka is node 1.
    pub fn group(&self, what: &str) -> String {
        let base = format!("{}-{what}", self.prefix);
        if self.offsets_leaders.is_empty() {
            return base;
        }
        (0..)
            .map(|i| {
                if i == 0 {
                    base.clone()
                } else {
                    format!("{base}-{i}")
                }
            })
            .find(|g| self.offsets_leaders[offsets_partition(g, self.offsets_leaders.len())] == 1)
            .expect("some name maps to a partition led by node 1")
    }
}

impl Ctx {
    /// Another group id for this scenario, in the same `__consumer_offsets` partition as
    /// `beside` (so their writes queue behind each other on both brokers: ours has 50
    /// partitions too).
    pub fn group_beside(&self, beside: &str, what: &str) -> String {
        let n = if self.offsets_leaders.is_empty() {
            50
        } else {
            self.offsets_leaders.len()
        };
        let target = offsets_partition(beside, n);
        (0..)
            .map(|i| format!("{}-{what}-{i}", self.prefix))
            .find(|g| offsets_partition(g, n) == target)
            .expect("some name maps to any partition")
    }
}

/// The `__consumer_offsets` partition of a group: `abs(groupId.hashCode()) % partitions`,
/// with Java's `String.hashCode` (over UTF-16 code units) and Kafka's `Utils.abs`.
pub fn offsets_partition(group: &str, partitions: usize) -> usize {
    let hash = group
        .encode_utf16()
        .fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(unit as i32));
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs as usize % partitions
}

/// Waits until the coordinator has appended a write of `group`'s that its followers have
/// not replicated: the group's `__consumer_offsets` partition has a log end offset (read
/// as the debugging replica, -2) above its high watermark (read as a consumer). Requests
/// sent after this are behind that write on both brokers, whatever the machine's load;
/// a fixed head start was not, on a busy machine. Gives up after 10 s.
pub async fn wait_group_write_pending(t: &mut Target, group: &str) -> Result<()> {
    let topic = "__consumer_offsets";
    let partition = offsets_partition(group, 50) as i32;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, log_end, _) =
            list_offset_with(t, &list_offsets_request(-2, 0, topic, partition, -1)).await?;
        let (_, high_watermark, _) = list_offset(t, topic, partition, -1).await?;
        if log_end > high_watermark {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("no unreplicated write of group {group} appeared in {topic}-{partition}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Makes sure `__consumer_offsets` exists and is fully replicated: both brokers create it
/// on the first FindCoordinator of a group, as a group consumer sends it.
pub async fn consumer_offsets_topic(t: &mut Target, c: &Ctx) -> Result<()> {
    t.leader(&find_coordinator_request(0, &c.group("g")), 4)
        .await?;
    t.wait_replicated(&["__consumer_offsets"]).await
}

/// What a scenario waits for once the followers run again, so that neither its next step
/// nor the next scenario finds them behind.
pub enum Then<'a> {
    /// Node 1 leads every partition of this topic again, with a full ISR.
    InSync(&'a str),
    /// This topic and `__consumer_offsets` are fully replicated again.
    Replicated(&'a str),
    /// Nothing (the steps deleted their topic).
    Resumed,
}

/// Runs `steps` with both followers stopped; lets them run again whatever the steps came
/// to, waits as `then` says, and only then hands back what the steps came to.
pub async fn with_followers_stopped<R>(
    t: &mut Target,
    then: Then<'_>,
    steps: impl AsyncFnOnce(&mut Target) -> Result<R>,
) -> Result<R> {
    t.stop_followers().await?;
    let seen = steps(t).await;
    t.resume_followers().await?;
    match then {
        Then::InSync(topic) => t.wait_in_sync(&[topic]).await?,
        Then::Replicated(topic) => t.wait_replicated(&["__consumer_offsets", topic]).await?,
        Then::Resumed => {}
    }
    seen
}

// ------------------------------------------------------------------ record batches

/// A record as the scenarios write it: a key, a value, a CreateTime timestamp.
pub struct Rec<'a> {
    pub key: &'a str,
    pub value: &'a str,
    pub timestamp: i64,
}

/// A v2 batch of plain (non-idempotent) records.
pub fn batch(records: &[Rec]) -> Bytes {
    encode_batch(records, -1, -1, -1, Compression::None, false)
}

/// A v2 batch of `n` records `"{tag}-{i}"`, timestamped now.
pub fn values(tag: &str, n: usize) -> Bytes {
    numbered(tag, 0, n, -1, -1, -1)
}

/// An idempotent producer's batch: `n` records from `base_sequence` on.
pub fn idempotent(producer_id: i64, epoch: i16, base_sequence: i32, n: usize) -> Bytes {
    numbered("seq", base_sequence, n, producer_id, epoch, base_sequence)
}

/// A v2 batch of `n` records keyed `k`, timestamped now, valued `"{tag}-{first + i}"`,
/// from the given producer (all -1: none).
fn numbered(
    tag: &str,
    first: i32,
    n: usize,
    producer_id: i64,
    epoch: i16,
    base_sequence: i32,
) -> Bytes {
    numbered_batch(tag, first, n, producer_id, epoch, base_sequence, false)
}

/// [`numbered`], transactional or not.
fn numbered_batch(
    tag: &str,
    first: i32,
    n: usize,
    producer_id: i64,
    epoch: i16,
    base_sequence: i32,
    transactional: bool,
) -> Bytes {
    let texts: Vec<String> = (0..n)
        .map(|i| format!("{tag}-{}", first + i as i32))
        .collect();
    let now = now_ms();
    let records: Vec<Rec> = texts
        .iter()
        .map(|v| Rec {
            key: "k",
            value: v,
            timestamp: now,
        })
        .collect();
    encode_batch(
        &records,
        producer_id,
        epoch,
        base_sequence,
        Compression::None,
        transactional,
    )
}

/// A transactional v2 batch of `n` records valued `"{tag}-{i}"`, from the given producer.
pub fn transactional(
    tag: &str,
    producer_id: i64,
    epoch: i16,
    base_sequence: i32,
    n: usize,
) -> Bytes {
    numbered_batch(tag, 0, n, producer_id, epoch, base_sequence, true)
}

fn encode_batch(
    records: &[Rec],
    producer_id: i64,
    epoch: i16,
    base_sequence: i32,
    compression: Compression,
    transactional: bool,
) -> Bytes {
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, r)| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder starts a new batch when `offset - sequence` changes; without a
            // sequence, a constant -1 difference gives one batch with base sequence -1.
            sequence: if base_sequence < 0 {
                i as i32 - 1
            } else {
                base_sequence + i as i32
            },
            timestamp: r.timestamp,
            key: Some(Bytes::copy_from_slice(r.key.as_bytes())),
            value: Some(Bytes::copy_from_slice(r.value.as_bytes())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options)
        .expect("a batch of small records encodes");
    buf.freeze()
}

/// The records of a fetch answer as `offset:value`, in order.
pub fn decode(records: &Option<Bytes>) -> Vec<String> {
    let Some(bytes) = records else {
        return Vec::new();
    };
    let mut buf = bytes.clone();
    let mut out = Vec::new();
    while buf.len() >= 12 {
        match RecordBatchDecoder::decode(&mut buf) {
            Ok(set) => {
                for r in set.records {
                    // A transaction marker shows what it says, not its bytes (its value
                    // holds the coordinator's epoch, which differs between brokers).
                    let value = if r.control {
                        match r.key.as_deref() {
                            Some([_, _, 0, 0, ..]) => "ABORT".to_owned(),
                            Some([_, _, 0, 1, ..]) => "COMMIT".to_owned(),
                            _ => "CONTROL".to_owned(),
                        }
                    } else {
                        r.value
                            .map(|v| String::from_utf8_lossy(&v).into_owned())
                            .unwrap_or_default()
                    };
                    out.push(format!("{}:{value}", r.offset));
                }
            }
            Err(_) => break,
        }
    }
    out
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

// ------------------------------------------------------------------ requests

/// Produce v9 (the first flexible version; both brokers take it) of `records` to one partition.
pub const PRODUCE_VERSION: i16 = 9;
pub const FETCH_VERSION: i16 = 12;
pub const LIST_OFFSETS_VERSION: i16 = 7;

pub fn produce_request(
    topic: &str,
    partition: i32,
    acks: i16,
    timeout_ms: i32,
    records: Bytes,
) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

/// Sends one produce to node 1 and returns its one partition's answer and how long it took.
pub async fn produce(
    t: &mut Target,
    topic: &str,
    partition: i32,
    acks: i16,
    timeout_ms: i32,
    records: Bytes,
) -> Result<(PartitionProduceResponse, Duration)> {
    let req = produce_request(topic, partition, acks, timeout_ms, records);
    let start = Instant::now();
    let resp = t.leader(&req, PRODUCE_VERSION).await?;
    let took = start.elapsed();
    let Some(p) = resp
        .responses
        .into_iter()
        .flat_map(|t| t.partition_responses)
        .next()
    else {
        bail!("the produce answer names no partition");
    };
    Ok((p, took))
}

/// Records a produce answer's fields under `prefix`.
pub fn see_produce(o: &mut Observation, prefix: &str, p: &PartitionProduceResponse) {
    o.error(format!("{prefix}error"), p.error_code);
    o.set(format!("{prefix}base_offset"), p.base_offset);
    o.set(format!("{prefix}log_start_offset"), p.log_start_offset);
    if !p.record_errors.is_empty() {
        let indexes: Vec<String> = p
            .record_errors
            .iter()
            .map(|e| e.batch_index.to_string())
            .collect();
        o.set(format!("{prefix}record_errors"), indexes.join(","));
    }
}

/// A fetch of one partition from `offset`.
pub fn fetch_request(
    replica_id: i32,
    max_wait_ms: i32,
    min_bytes: i32,
    topic: &str,
    partition: i32,
    offset: i64,
) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(replica_id))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(min_bytes)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])])
}

/// Sends a fetch to node 1; returns the first partition's answer and how long it took.
pub async fn fetch(t: &mut Target, req: &FetchRequest) -> Result<(PartitionData, Duration)> {
    let start = Instant::now();
    let resp = t.leader(req, FETCH_VERSION).await?;
    let took = start.elapsed();
    if resp.error_code != 0 {
        let mut p = PartitionData::default();
        p.error_code = resp.error_code;
        return Ok((p, took));
    }
    let Some(p) = resp.responses.into_iter().flat_map(|t| t.partitions).next() else {
        bail!("the fetch answer names no partition");
    };
    Ok((p, took))
}

/// Records a fetch answer under `prefix`: error, high watermark, last stable offset, log
/// start, the records, and whether it came at once or after (at least half of) the wait.
pub fn see_fetch(
    o: &mut Observation,
    prefix: &str,
    p: &PartitionData,
    took: Duration,
    max_wait_ms: i32,
) {
    o.error(format!("{prefix}error"), p.error_code);
    o.set(format!("{prefix}high_watermark"), p.high_watermark);
    o.set(format!("{prefix}last_stable_offset"), p.last_stable_offset);
    o.set(format!("{prefix}log_start_offset"), p.log_start_offset);
    // A null record set is not an empty one: librdkafka refuses a whole answer that holds
    // one.
    let records = decode(&p.records);
    o.set(
        format!("{prefix}records"),
        match &p.records {
            None => "null".to_owned(),
            Some(_) if records.is_empty() => "none".to_owned(),
            Some(_) => records.join(" "),
        },
    );
    o.set(format!("{prefix}answered"), timing(took, max_wait_ms));
}

/// "at once" or "after the wait": whether an answer took at least half of `wait_ms`.
pub fn timing(took: Duration, wait_ms: i32) -> &'static str {
    if wait_ms > 0 && took >= Duration::from_millis(wait_ms as u64 / 2) {
        "after the wait"
    } else {
        "at once"
    }
}

/// ListOffsets of one partition at `timestamp` (-1 latest, -2 earliest, -3 max timestamp).
pub fn list_offsets_request(
    replica_id: i32,
    isolation: i8,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(replica_id))
        .with_isolation_level(isolation)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_current_leader_epoch(-1)
                .with_timestamp(timestamp)])])
}

/// A consumer's ListOffsets answer: (error, offset, timestamp).
pub async fn list_offset(
    t: &mut Target,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> Result<(i16, i64, i64)> {
    let req = list_offsets_request(-1, 0, topic, partition, timestamp);
    list_offset_with(t, &req).await
}

pub async fn list_offset_with(t: &mut Target, req: &ListOffsetsRequest) -> Result<(i16, i64, i64)> {
    let resp = t.leader(req, LIST_OFFSETS_VERSION).await?;
    let Some(p) = resp.topics.into_iter().flat_map(|t| t.partitions).next() else {
        bail!("the ListOffsets answer names no partition");
    };
    Ok((p.error_code, p.offset, p.timestamp))
}

/// The consumer-visible end (high watermark) of a partition, via ListOffsets latest.
pub async fn high_watermark(t: &mut Target, topic: &str, partition: i32) -> Result<i64> {
    let (error, offset, _) = list_offset(t, topic, partition, -1).await?;
    if error != 0 {
        bail!("ListOffsets latest of {topic}-{partition}: error {error}");
    }
    Ok(offset)
}

/// Waits until the high watermark of `topic`-`partition` reaches `offset` (or 30 s pass);
/// returns where it got to. Used after the followers are let go, which is a wait for an
/// event, not a measurement.
pub async fn wait_high_watermark(
    t: &mut Target,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<i64> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let hw = high_watermark(t, topic, partition).await?;
        if hw >= offset || Instant::now() > deadline {
            return Ok(hw);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
