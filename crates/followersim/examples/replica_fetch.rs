//! Play one follower fetch by hand with [`followersim::wire::KafkaConnection`].
//!
//! ```text
//! cargo run -p followersim --example replica_fetch -- 127.0.0.1:9092 demo 0 [REPLICA_ID] [OFFSET]
//! ```
//!
//! It does what a follower's fetcher does once, printing each step: ApiVersions, Metadata
//! (is this replica assigned to the partition? is it in the ISR?), ListOffsets (the
//! leader's log start and log end), then one Fetch with `replica_id` from `OFFSET`
//! (default: the log start), and lists the record batches that came back. Note that this
//! Fetch *reports* `OFFSET` to the leader as this replica's log end offset.

use anyhow::{bail, Context, Result};
use followersim::batch::check_batches;
use followersim::KafkaConnection;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiVersionsRequest, BrokerId, FetchRequest, ListOffsetsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

async fn list_offset(
    conn: &mut KafkaConnection,
    replica: i32,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> Result<i64> {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(replica))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(timestamp)])]);
    let resp = conn.send(&req, 7).await?;
    let p = resp
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .context("empty ListOffsets response")?;
    if p.error_code != 0 {
        bail!("ListOffsets error {}", p.error_code);
    }
    Ok(p.offset)
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [addr, topic, partition, rest @ ..] = args.as_slice() else {
        bail!("usage: replica_fetch HOST:PORT TOPIC PARTITION [REPLICA_ID] [OFFSET]");
    };
    let partition: i32 = partition.parse().context("PARTITION")?;
    let replica: i32 = rest.first().map(|s| s.parse()).transpose()?.unwrap_or(2);

    let mut conn = KafkaConnection::connect(addr)
        .await?
        .with_client_id(format!("replica-fetch-{replica}"));

    let versions = conn.send(&ApiVersionsRequest::default(), 3).await?;
    println!(
        "ApiVersions: error {}, {} APIs",
        versions.error_code,
        versions.api_keys.len()
    );

    let md = conn
        .send(
            &MetadataRequest::default()
                .with_topics(None)
                .with_allow_auto_topic_creation(false),
            12,
        )
        .await?;
    let part = md
        .topics
        .iter()
        .filter(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == partition)
        .with_context(|| format!("{topic}-{partition} is not in Metadata"))?;
    println!(
        "Metadata: leader {}, replicas {:?}, ISR {:?}",
        part.leader_id.0,
        part.replica_nodes.iter().map(|b| b.0).collect::<Vec<_>>(),
        part.isr_nodes.iter().map(|b| b.0).collect::<Vec<_>>()
    );

    let start = list_offset(&mut conn, replica, topic, partition, -2).await?;
    let end = list_offset(&mut conn, replica, topic, partition, -1).await?;
    println!("ListOffsets: log start {start}, log end {end}");

    let offset: i64 = rest.get(1).map(|s| s.parse()).transpose()?.unwrap_or(start);
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(replica))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.clone())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])]);
    let resp = conn.send(&req, 12).await?;
    let pd = resp
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .context("empty Fetch response")?;
    println!(
        "Fetch as replica {replica} from offset {offset}: error {}, high watermark {}, log start {}",
        pd.error_code, pd.high_watermark, pd.log_start_offset
    );
    if let Some(records) = &pd.records {
        let checked = check_batches(records, offset, true)?;
        for b in &checked.batches {
            if let Some(h) = replog::batch::BatchHeader::parse(b) {
                println!(
                    "  batch {}..={} ({} records, {} bytes, leader epoch {})",
                    h.base_offset,
                    h.last_offset(),
                    h.record_count,
                    b.len(),
                    h.partition_leader_epoch
                );
            }
        }
        println!(
            "  next fetch offset {} ({} bytes of a partial batch dropped)",
            checked.next_offset, checked.partial_tail_bytes
        );
    }
    conn.close().await;
    Ok(())
}
