//! End-to-end tests of the follower against a small fake leader written here.
//!
//! The fake leader speaks just enough Kafka (ApiVersions, Metadata, Fetch, ListOffsets) to
//! check the follower's side of replication over a real TCP connection: it records every
//! Fetch it receives (replica id, version, fetch offsets, when it arrived and when it was
//! answered), counts Metadata requests, and can misbehave on request (corrupt a batch, cut
//! a response mid-batch, move its log start, lose its data).
//!
//! Timing: tests wait for events the leader records, with a generous deadline that can
//! only make a test fail. Where time matters, they assert lower bounds only (a tokio sleep
//! never ends early), never "about N per second".

use anyhow::{bail, Result};
use bytes::{Bytes, BytesMut};
use followersim::test_util::wait_until;
use followersim::wire::{decode_request_header, KafkaConnection};
use followersim::{Follower, FollowerConfig, FollowerHandle, FollowerState, Scenario};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiVersionsResponse, BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest,
    ListOffsetsResponse, MetadataRequest, MetadataResponse, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use parking_lot::Mutex;
use replog::test_util::BatchBuilder;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::time::{sleep, Instant};

// ---------------------------------------------------------------------------------------
// Record batches

/// A valid v2 batch of `records` records at `base_offset`, as a leader stores it.
fn batch(base_offset: i64, records: i32) -> Vec<u8> {
    BatchBuilder::new(records as usize)
        .base_offset(base_offset, 0)
        .build()
}

// ---------------------------------------------------------------------------------------
// The fake leader

#[derive(Default)]
struct FakePartition {
    /// The leader Metadata names (0 means broker 1, the fake leader itself).
    leader: i32,
    /// Answer a Fetch whose `last_fetched_epoch` is this epoch, from above this end
    /// offset, with `diverging_epoch` (epoch, end offset) instead of records.
    diverged_at: Option<(i32, i64)>,
    replicas: Vec<i32>,
    isr: Vec<i32>,
    log_start: i64,
    /// (base offset, bytes)
    batches: Vec<(i64, Vec<u8>)>,
}

impl FakePartition {
    fn leo(&self) -> i64 {
        self.batches
            .last()
            .map(|(base, b)| base + i64::from(i32::from_be_bytes([b[23], b[24], b[25], b[26]])) + 1)
            .unwrap_or(self.log_start)
    }

    fn append(&mut self, records: i32) {
        let base = self.leo();
        self.batches.push((base, batch(base, records)));
    }
}

#[derive(Debug, Clone)]
struct SeenFetch {
    replica_id: i32,
    /// (topic, partition, last fetched epoch)
    last_fetched_epochs: Vec<(String, i32, i32)>,
    version: i16,
    max_bytes: i32,
    /// (topic, partition, fetch offset)
    offsets: Vec<(String, i32, i64)>,
    /// When the leader read the request.
    received: Instant,
    /// When the leader fixed the response's content (it is sent right after).
    answered: Option<Instant>,
}

#[derive(Default)]
struct LeaderState {
    topics: BTreeMap<String, BTreeMap<i32, FakePartition>>,
    fetches: Vec<SeenFetch>,
    /// Metadata requests served, from any connection.
    metadata_requests: usize,
    connections: usize,
    open_connections: usize,
    /// Corrupt the records of the next N non-empty partition responses.
    corrupt_next: usize,
    /// Cut each partition's records at this many bytes (mid-batch), ignoring KIP-74.
    cut_at: Option<usize>,
}

#[derive(Clone)]
struct FakeLeader {
    addr: String,
    state: Arc<Mutex<LeaderState>>,
}

impl FakeLeader {
    async fn start() -> FakeLeader {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        Self::serve(listener)
    }

    fn serve(listener: TcpListener) -> FakeLeader {
        let addr = listener.local_addr().expect("addr").to_string();
        let state = Arc::new(Mutex::new(LeaderState::default()));
        let leader = FakeLeader { addr, state };
        let l = leader.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let l = l.clone();
                tokio::spawn(async move {
                    {
                        let mut st = l.state.lock();
                        st.connections += 1;
                        st.open_connections += 1;
                    }
                    let _ = l.handle(stream).await;
                    l.state.lock().open_connections -= 1;
                });
            }
        });
        leader
    }

    fn topic(&self, name: &str, partitions: i32, replicas: &[i32]) {
        let mut st = self.state.lock();
        let t = st.topics.entry(name.to_owned()).or_default();
        for p in 0..partitions {
            t.insert(
                p,
                FakePartition {
                    replicas: replicas.to_vec(),
                    isr: replicas.to_vec(),
                    ..Default::default()
                },
            );
        }
    }

    fn append(&self, topic: &str, partition: i32, records: i32) {
        self.state
            .lock()
            .topics
            .get_mut(topic)
            .and_then(|t| t.get_mut(&partition))
            .expect("partition")
            .append(records);
    }

    fn with_partition<R>(
        &self,
        topic: &str,
        partition: i32,
        f: impl FnOnce(&mut FakePartition) -> R,
    ) -> R {
        let mut st = self.state.lock();
        f(st.topics
            .get_mut(topic)
            .and_then(|t| t.get_mut(&partition))
            .expect("partition"))
    }

    fn fetches(&self) -> Vec<SeenFetch> {
        self.state.lock().fetches.clone()
    }

    /// Fetches answered so far (a long-polled one counts once its answer is decided).
    fn answered_fetches(&self) -> usize {
        let st = self.state.lock();
        st.fetches.iter().filter(|x| x.answered.is_some()).count()
    }

    fn metadata_requests(&self) -> usize {
        self.state.lock().metadata_requests
    }

    async fn handle(&self, stream: tokio::net::TcpStream) -> Result<()> {
        let mut conn = KafkaConnection::from_stream(stream)?;
        while let Some(mut frame) = conn.recv_frame().await? {
            let header = decode_request_header(&mut frame)?;
            let v = header.request_api_version;
            let mut out = BytesMut::new();
            match header.request_api_key {
                18 => {
                    ResponseHeader::default()
                        .with_correlation_id(header.correlation_id)
                        .encode(&mut out, 0)?;
                    let keys = [(1, 4, 12), (2, 1, 7), (3, 0, 12), (18, 0, 3)]
                        .iter()
                        .map(|&(k, min, max)| {
                            ApiVersion::default()
                                .with_api_key(k)
                                .with_min_version(min)
                                .with_max_version(max)
                        })
                        .collect();
                    ApiVersionsResponse::default()
                        .with_api_keys(keys)
                        .encode(&mut out, v)?;
                }
                3 => {
                    let _req = MetadataRequest::decode(&mut frame, v)?;
                    let resp = self.metadata();
                    self.state.lock().metadata_requests += 1;
                    ResponseHeader::default()
                        .with_correlation_id(header.correlation_id)
                        .encode(&mut out, MetadataResponse::header_version(v))?;
                    resp.encode(&mut out, v)?;
                }
                1 => {
                    let req = FetchRequest::decode(&mut frame, v)?;
                    let resp = self.fetch(&req, v).await;
                    ResponseHeader::default()
                        .with_correlation_id(header.correlation_id)
                        .encode(&mut out, FetchResponse::header_version(v))?;
                    resp.encode(&mut out, v)?;
                }
                2 => {
                    let req = ListOffsetsRequest::decode(&mut frame, v)?;
                    let resp = self.list_offsets(&req);
                    ResponseHeader::default()
                        .with_correlation_id(header.correlation_id)
                        .encode(&mut out, ListOffsetsResponse::header_version(v))?;
                    resp.encode(&mut out, v)?;
                }
                k => bail!("fake leader: unexpected api key {k}"),
            }
            conn.send_raw(&out).await?;
        }
        Ok(())
    }

    fn metadata(&self) -> MetadataResponse {
        let st = self.state.lock();
        let topics = st
            .topics
            .iter()
            .map(|(name, parts)| {
                MetadataResponseTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_string(name.clone()))))
                    .with_partitions(
                        parts
                            .iter()
                            .map(|(&i, p)| {
                                MetadataResponsePartition::default()
                                    .with_partition_index(i)
                                    .with_leader_id(BrokerId(if p.leader == 0 {
                                        1
                                    } else {
                                        p.leader
                                    }))
                                    .with_leader_epoch(0)
                                    .with_replica_nodes(
                                        p.replicas.iter().map(|&r| BrokerId(r)).collect(),
                                    )
                                    .with_isr_nodes(p.isr.iter().map(|&r| BrokerId(r)).collect())
                            })
                            .collect(),
                    )
            })
            .collect();
        MetadataResponse::default()
            .with_brokers(vec![MetadataResponseBroker::default()
                .with_node_id(BrokerId(1))
                .with_host(StrBytes::from_static_str("127.0.0.1"))
                .with_port(9092)])
            .with_controller_id(BrokerId(1))
            .with_topics(topics)
    }

    /// Answers a Fetch, long-polling (up to max_wait) while there is no data.
    async fn fetch(&self, req: &FetchRequest, version: i16) -> FetchResponse {
        let received = Instant::now();
        let deadline = received + Duration::from_millis(req.max_wait_ms.max(0) as u64);
        let index = {
            let offsets = req
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(move |p| (t.topic.0.to_string(), p.partition, p.fetch_offset))
                })
                .collect();
            let last_fetched_epochs = req
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(move |p| (t.topic.0.to_string(), p.partition, p.last_fetched_epoch))
                })
                .collect();
            let mut st = self.state.lock();
            st.fetches.push(SeenFetch {
                replica_id: req.replica_id.0,
                last_fetched_epochs,
                version,
                max_bytes: req.max_bytes,
                offsets,
                received,
                answered: None,
            });
            st.fetches.len() - 1
        };
        loop {
            let (resp, has_data) = self.fetch_now(req);
            if has_data || Instant::now() >= deadline {
                self.state.lock().fetches[index].answered = Some(Instant::now());
                return resp;
            }
            sleep(Duration::from_millis(5)).await;
        }
    }

    fn fetch_now(&self, req: &FetchRequest) -> (FetchResponse, bool) {
        let mut st = self.state.lock();
        let mut has_data = false;
        let mut responses = Vec::new();
        let cut_at = st.cut_at;
        for t in &req.topics {
            let mut parts = Vec::new();
            for fp in &t.partitions {
                let mut pd = PartitionData::default().with_partition_index(fp.partition);
                let Some(p) = st
                    .topics
                    .get(t.topic.0.as_str())
                    .and_then(|m| m.get(&fp.partition))
                else {
                    parts.push(pd.with_error_code(3));
                    continue;
                };
                let (leo, start) = (p.leo(), p.log_start);
                pd = pd
                    .with_high_watermark(leo)
                    .with_log_start_offset(start)
                    .with_last_stable_offset(leo);
                if let Some((epoch, end_offset)) = p.diverged_at {
                    if fp.last_fetched_epoch == epoch && fp.fetch_offset > end_offset {
                        pd.diverging_epoch.epoch = epoch;
                        pd.diverging_epoch.end_offset = end_offset;
                        parts.push(pd);
                        has_data = true; // answered at once
                        continue;
                    }
                }
                if fp.fetch_offset < start || fp.fetch_offset > leo {
                    parts.push(pd.with_error_code(1));
                    has_data = true; // errors answer at once
                    continue;
                }
                let mut records = Vec::new();
                for (base, b) in &p.batches {
                    if *base >= fp.fetch_offset
                        && (records.is_empty()
                            || records.len() + b.len() <= fp.partition_max_bytes as usize)
                    {
                        records.extend_from_slice(b);
                    }
                }
                if let Some(cut) = cut_at {
                    records.truncate(cut);
                }
                if !records.is_empty() {
                    has_data = true;
                }
                parts.push(pd.with_records(Some(Bytes::from(records))));
            }
            responses.push(
                FetchableTopicResponse::default()
                    .with_topic(t.topic.clone())
                    .with_partitions(parts),
            );
        }
        if has_data && st.corrupt_next > 0 {
            'outer: for t in &mut responses {
                for p in &mut t.partitions {
                    if let Some(r) = p.records.as_mut().filter(|r| r.len() > 61) {
                        let mut v = r.to_vec();
                        let last = v.len() - 1;
                        v[last] ^= 0xff;
                        *r = Bytes::from(v);
                        st.corrupt_next -= 1;
                        break 'outer;
                    }
                }
            }
        }
        (FetchResponse::default().with_responses(responses), has_data)
    }

    fn list_offsets(&self, req: &ListOffsetsRequest) -> ListOffsetsResponse {
        let st = self.state.lock();
        let topics = req
            .topics
            .iter()
            .map(|t| {
                ListOffsetsTopicResponse::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|lp| {
                                let p = st
                                    .topics
                                    .get(t.name.0.as_str())
                                    .and_then(|m| m.get(&lp.partition_index));
                                let r = ListOffsetsPartitionResponse::default()
                                    .with_partition_index(lp.partition_index);
                                match p {
                                    Some(p) if lp.timestamp == -2 => r.with_offset(p.log_start),
                                    Some(p) => r.with_offset(p.leo()),
                                    None => r.with_error_code(3),
                                }
                            })
                            .collect(),
                    )
            })
            .collect();
        ListOffsetsResponse::default().with_topics(topics)
    }
}

// ---------------------------------------------------------------------------------------
// Helpers

fn config(leader: &FakeLeader, id: i32) -> FollowerConfig {
    FollowerConfig {
        fetch_max_wait_ms: 100,
        metadata_refresh_ms: 50,
        fetch_backoff_ms: 20,
        reconnect_backoff_ms: 10,
        reconnect_backoff_max_ms: 50,
        ..FollowerConfig::new(id, leader.addr.clone())
    }
}

fn leo(h: &FollowerHandle, topic: &str, p: i32) -> Option<i64> {
    h.status().log_end_offset(topic, p)
}

// ---------------------------------------------------------------------------------------
// Tests

#[tokio::test]
async fn replicates_from_its_log_end_offset_with_its_replica_id() {
    let leader = FakeLeader::start().await;
    leader.topic("demo", 2, &[1, 2, 3]);
    leader.topic("other", 1, &[1, 3]); // not ours
    leader.append("demo", 0, 3);
    leader.append("demo", 0, 2);
    leader.append("demo", 1, 4);

    let f = Follower::spawn(config(&leader, 2));
    wait_until("demo is replicated", || {
        leo(&f, "demo", 0) == Some(5) && leo(&f, "demo", 1) == Some(4)
    })
    .await;
    let s = f.status();
    assert_eq!(s.state, FollowerState::Running);
    assert_eq!(
        s.partitions.len(),
        2,
        "follows only partitions listing it: {s:?}"
    );
    assert!(s.partitions.iter().all(|p| p.in_isr_seen));

    leader.append("demo", 0, 1);
    wait_until("new data is replicated", || leo(&f, "demo", 0) == Some(6)).await;
    wait_until("the next fetch reports the new LEO", || {
        leader
            .fetches()
            .last()
            .is_some_and(|x| x.offsets.contains(&("demo".into(), 0, 6)))
    })
    .await;

    // Every fetch: replica id 2, v12, and per partition an offset that never goes back.
    let fetches = leader.fetches();
    assert!(fetches.iter().all(|x| x.replica_id == 2 && x.version == 12));
    let demo0: Vec<i64> = fetches
        .iter()
        .flat_map(|x| {
            x.offsets
                .iter()
                .filter(|o| o.0 == "demo" && o.1 == 0)
                .map(|o| o.2)
        })
        .collect();
    assert_eq!(demo0.first(), Some(&0));
    assert!(demo0.windows(2).all(|w| w[0] <= w[1]), "{demo0:?}");
    assert!(demo0.contains(&5));

    // The follower's copy is the leader's bytes.
    let log = f.partition_log("demo", 0).expect("followed");
    let ours: Vec<u8> = log.retained_batches().flat_map(|b| b.to_vec()).collect();
    let theirs: Vec<u8> = leader.with_partition("demo", 0, |p| {
        p.batches.iter().flat_map(|b| b.1.clone()).collect()
    });
    assert_eq!(ours, theirs);
    assert!(s.counters.bytes_fetched > 0 && s.counters.fetches_sent > 0);
    f.shutdown().await;
    assert_eq!(f.status().state, FollowerState::Stopped);
    wait_until("the connection is closed", || {
        leader.state.lock().open_connections == 0
    })
    .await;
}

#[tokio::test]
async fn pause_stops_fetching_but_keeps_the_connection() {
    let leader = FakeLeader::start().await;
    leader.topic("demo", 1, &[1, 2, 3]);
    let f = Follower::spawn(config(&leader, 3));
    wait_until("following demo", || {
        leo(&f, "demo", 0) == Some(0) && !leader.fetches().is_empty()
    })
    .await;

    f.pause();
    assert_eq!(f.status().state, FollowerState::Paused);
    // `#[tokio::test]` runs the test and the follower on one thread, so the follower has
    // not run since `pause()`: every Fetch it may send from here on is counted in `sent`.
    // One may be in flight; it is finished, so wait until the leader has answered it
    // before appending (otherwise it would rightly carry the new data).
    let sent = f.status().counters.fetches_sent as usize;
    wait_until(
        "the leader answered the Fetches sent before the pause",
        || leader.answered_fetches() >= sent,
    )
    .await;
    leader.append("demo", 0, 2);
    // A paused follower still re-reads Metadata (every 50 ms here). A running one sends a
    // Fetch between any two Metadata requests, so seeing three Metadata requests and no
    // Fetch shows it alive and not fetching, whatever the machine's speed.
    let metadata = leader.metadata_requests();
    wait_until("three Metadata refreshes while paused", || {
        leader.metadata_requests() >= metadata + 3
    })
    .await;
    assert_eq!(leader.fetches().len(), sent, "no fetch while paused");
    assert_eq!(leo(&f, "demo", 0), Some(0), "no data while paused");
    assert_eq!(leader.state.lock().open_connections, 1, "connection kept");
    assert_eq!(leader.state.lock().connections, 1);
    // While paused it still watches Metadata, so it notices being dropped from the ISR.
    leader.with_partition("demo", 0, |p| p.isr = vec![1, 2]);
    wait_until("ISR change seen while paused", || {
        !f.status().partitions[0].in_isr_seen
    })
    .await;
    assert_eq!(leader.fetches().len(), sent, "still no fetch");

    f.resume();
    wait_until("caught up after resume", || leo(&f, "demo", 0) == Some(2)).await;
    assert_eq!(leader.state.lock().connections, 1, "same connection");
    f.shutdown().await;
}

#[tokio::test]
async fn crash_loses_everything_and_restart_refetches_from_zero() {
    let leader = FakeLeader::start().await;
    leader.topic("demo", 1, &[1, 2, 3]);
    leader.append("demo", 0, 4);
    let f = Follower::spawn(config(&leader, 2));
    wait_until("replicated", || leo(&f, "demo", 0) == Some(4)).await;

    f.crash();
    let s = f.status();
    assert_eq!(s.state, FollowerState::Crashed);
    assert!(s.partitions.is_empty(), "state dropped");
    wait_until("connection dropped", || {
        leader.state.lock().open_connections == 0
    })
    .await;
    let n = leader.fetches().len();
    sleep(Duration::from_millis(200)).await;
    assert_eq!(
        leader.fetches().len(),
        n,
        "a crashed follower does not fetch"
    );
    f.resume(); // does not revive a crashed follower
    assert_eq!(f.status().state, FollowerState::Crashed);

    f.restart();
    wait_until("caught up again", || leo(&f, "demo", 0) == Some(4)).await;
    let after: Vec<i64> = leader.fetches()[n..]
        .iter()
        .flat_map(|x| x.offsets.iter().map(|o| o.2))
        .collect();
    assert_eq!(
        after.first(),
        Some(&0),
        "refetched from offset 0: {after:?}"
    );
    assert_eq!(leader.state.lock().connections, 2);
    assert_eq!(f.status().counters.connections, 2);
    f.shutdown().await;
}

#[tokio::test]
async fn restart_without_crash_keeps_the_log() {
    let leader = FakeLeader::start().await;
    leader.topic("demo", 1, &[1, 2, 3]);
    leader.append("demo", 0, 4);
    let f = Follower::spawn(config(&leader, 2));
    wait_until("replicated", || leo(&f, "demo", 0) == Some(4)).await;
    let n = leader.fetches().len();
    f.restart();
    wait_until("reconnected and fetching", || {
        leader.state.lock().connections == 2 && leader.fetches().len() > n
    })
    .await;
    let first = &leader.fetches()[n];
    assert_eq!(first.offsets, vec![("demo".to_owned(), 0, 4)]);
    f.shutdown().await;
}

#[tokio::test]
async fn out_of_range_truncates_and_restarts_from_the_leader_log_start() {
    let leader = FakeLeader::start().await;
    leader.topic("demo", 1, &[1, 2, 3]);
    // Retention already removed offsets 0..10.
    leader.with_partition("demo", 0, |p| p.log_start = 10);
    leader.append("demo", 0, 3);
    let f = Follower::spawn(config(&leader, 2));
    wait_until("replicated from the log start", || {
        leo(&f, "demo", 0) == Some(13)
    })
    .await;
    let s = f.status();
    assert_eq!(s.partitions[0].log_start_offset, 10);

    // The leader loses its data (an in-memory broker restarting): we are now ahead of it.
    leader.with_partition("demo", 0, |p| {
        p.batches.clear();
        p.log_start = 0;
    });
    leader.append("demo", 0, 2);
    wait_until("truncated and re-replicated", || {
        leo(&f, "demo", 0) == Some(2)
    })
    .await;
    assert_eq!(f.status().partitions[0].log_start_offset, 0);
    f.shutdown().await;
}

#[tokio::test]
async fn corrupt_data_is_rejected_and_fetched_again() {
    let leader = FakeLeader::start().await;
    leader.topic("demo", 1, &[1, 2, 3]);
    let f = Follower::spawn(config(&leader, 2));
    wait_until("following", || leo(&f, "demo", 0) == Some(0)).await;
    leader.state.lock().corrupt_next = 2;
    leader.append("demo", 0, 3);
    wait_until("replicated once the corruption stops", || {
        leo(&f, "demo", 0) == Some(3)
    })
    .await;
    let s = f.status();
    assert_eq!(s.counters.rejected_responses, 2);
    assert!(
        s.last_error.as_deref().is_some_and(|e| e.contains("CRC")),
        "{s:?}"
    );
    f.shutdown().await;
}

#[tokio::test]
async fn partial_batches_are_dropped_and_fetched_again() {
    let leader = FakeLeader::start().await;
    leader.topic("demo", 1, &[1, 2, 3]);
    for _ in 0..5 {
        leader.append("demo", 0, 2);
    }
    let one = batch(0, 2).len();
    // Every response ends with half a batch.
    leader.state.lock().cut_at = Some(one + one / 2);
    let f = Follower::spawn(config(&leader, 2));
    wait_until("replicated one batch per fetch", || {
        leo(&f, "demo", 0) == Some(10)
    })
    .await;
    assert_eq!(f.status().counters.rejected_responses, 0);
    f.shutdown().await;
}

#[tokio::test]
async fn picks_up_new_and_deleted_topics() {
    let leader = FakeLeader::start().await;
    let f = Follower::spawn(config(&leader, 2));
    wait_until("connected", || f.status().state == FollowerState::Running).await;
    assert!(f.status().partitions.is_empty());
    leader.topic("late", 1, &[1, 2, 3]);
    leader.append("late", 0, 1);
    wait_until("new topic replicated", || leo(&f, "late", 0) == Some(1)).await;
    leader.state.lock().topics.remove("late");
    wait_until("deleted topic dropped", || f.status().partitions.is_empty()).await;
    f.shutdown().await;
}

#[tokio::test]
async fn refresh_metadata_picks_up_a_new_topic_at_once() {
    let leader = FakeLeader::start().await;
    leader.topic("first", 1, &[1, 2, 3]);
    let f = Follower::spawn(FollowerConfig {
        metadata_refresh_ms: 60_000,
        ..config(&leader, 2)
    });
    wait_until("following the first topic", || {
        leo(&f, "first", 0) == Some(0)
    })
    .await;
    leader.topic("second", 1, &[1, 2, 3]);
    leader.append("second", 0, 1);
    f.refresh_metadata();
    wait_until("the new topic replicated without waiting a minute", || {
        leo(&f, "second", 0) == Some(1)
    })
    .await;
    f.shutdown().await;
}

#[tokio::test]
async fn knobs_change_what_it_sends() {
    let leader = FakeLeader::start().await;
    leader.topic("demo", 1, &[1, 2, 3]);
    let f = Follower::spawn(config(&leader, 2));
    wait_until("fetching", || !leader.fetches().is_empty()).await;

    f.set_max_bytes(4096);
    wait_until("max_bytes used", || {
        leader.fetches().last().is_some_and(|x| x.max_bytes == 4096)
    })
    .await;

    // Slow follower: each Fetch leaves at least 200 ms after the answer to the one before.
    // The follower has not run since the knob changed (one thread), so Fetch number `sent`
    // (0-based) is the first one sent under the new delay, and the one before it has been
    // or will be answered first. Only the lower bound is asserted: a sleep never ends
    // early, while a busy machine may make any gap longer.
    f.set_fetch_delay_ms(200);
    let sent = f.status().counters.fetches_sent as usize;
    wait_until("three Fetches under the delay", || {
        leader.fetches().len() >= sent + 3
    })
    .await;
    let fetches = leader.fetches();
    for pair in fetches[sent - 1..sent + 3].windows(2) {
        let answered = pair[0].answered.expect("answered before the next Fetch");
        let gap = pair[1].received - answered;
        assert!(
            gap >= Duration::from_millis(200),
            "a Fetch sent {gap:?} after the previous answer, with a 200 ms delay"
        );
    }
    f.set_fetch_delay_ms(0);

    // Lag mode: data shows up in the follower's log, and the leader hears of it, only
    // lag_ms after the response carrying it arrived (which is after `start`).
    f.set_lag_ms(400);
    let start = Instant::now();
    leader.append("demo", 0, 1);
    wait_until("lagging replica catches up", || {
        leo(&f, "demo", 0) == Some(1)
    })
    .await;
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(400),
        "appended after {took:?}"
    );
    let told = || {
        leader
            .fetches()
            .iter()
            .find(|x| x.offsets.contains(&("demo".into(), 0, 1)))
            .map(|x| x.received)
    };
    wait_until("the leader is told the new log end offset", || {
        told().is_some()
    })
    .await;
    let told = told().expect("told") - start;
    assert!(
        told >= Duration::from_millis(400),
        "the leader saw offset 1 after {told:?}"
    );
    let s = f.status();
    assert_eq!((s.fetch_delay_ms, s.lag_ms, s.max_bytes), (0, 400, 4096));
    f.shutdown().await;
}

#[tokio::test]
async fn waits_for_a_leader_that_is_not_up_yet() {
    // Reserve a port, free it, start the follower, then bring the leader up there.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = probe.local_addr().expect("addr");
    drop(probe);
    let f = Follower::spawn(FollowerConfig {
        reconnect_backoff_ms: 10,
        reconnect_backoff_max_ms: 50,
        metadata_refresh_ms: 50,
        fetch_max_wait_ms: 100,
        ..FollowerConfig::new(2, addr.to_string())
    });
    wait_until("a refused connection recorded", || {
        f.status().last_error.is_some()
    })
    .await;
    assert_eq!(
        f.status().state,
        FollowerState::Connecting,
        "and it keeps trying"
    );

    let leader = FakeLeader::serve(TcpListener::bind(addr).await.expect("rebind"));
    leader.topic("demo", 1, &[1, 2, 3]);
    leader.append("demo", 0, 2);
    wait_until("connected and replicated", || leo(&f, "demo", 0) == Some(2)).await;
    f.shutdown().await;
}

#[tokio::test]
async fn runs_a_scenario_against_followers_it_spawns() {
    let leader = FakeLeader::start().await;
    leader.topic("demo", 1, &[1, 2, 3]);
    leader.append("demo", 0, 2);
    let scenario = Scenario::parse(
        r#"
        name = "short"
        duration_ms = 800
        [[follower]]
        id = 2
        [[follower]]
        id = 3
        [[step]]
        at_ms = 400
        follower = 3
        action = "crash"
        "#,
    )
    .expect("parse");
    let base = config(&leader, 0);
    let statuses = followersim::scenario::run_scenario_with(&scenario, &base)
        .await
        .expect("run");
    assert_eq!(statuses.len(), 2);
    assert_eq!(statuses[0].replica_id, 2);
    assert_eq!(statuses[0].log_end_offset("demo", 0), Some(2));
    assert_eq!(statuses[1].state, FollowerState::Crashed);
    wait_until("followers stopped", || {
        leader.state.lock().open_connections == 0
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// Followers that keep their data elsewhere (a broker's log), and follow one leader each

/// A log kept outside the follower, as a broker keeps its replicas: it tracks the leader
/// epoch of each batch (the `partitionLeaderEpoch` field, bytes 12..16 of a v2 batch), so
/// the fetcher can send `last_fetched_epoch` and truncate on divergence.
#[derive(Debug, Default)]
struct EpochLog {
    /// (base offset, next offset, epoch) per batch held.
    batches: Vec<(i64, i64, i32)>,
    truncations: Vec<(i64, i64)>,
    leader_high_watermark: i64,
}

#[derive(Debug, Clone, Default)]
struct SharedLog(Arc<Mutex<EpochLog>>);

impl followersim::ReplicaLog for SharedLog {
    fn log_start_offset(&self) -> i64 {
        0
    }

    fn log_end_offset(&self) -> i64 {
        self.0.lock().batches.last().map_or(0, |b| b.1)
    }

    fn commit(
        &mut self,
        checked: followersim::batch::CheckedBatches,
        _shared: bool,
    ) -> Result<followersim::log::AppendOutcome, followersim::batch::BatchError> {
        let old = self.log_end_offset();
        let mut log = self.0.lock();
        let mut next = checked.first_offset;
        for b in &checked.batches {
            let epoch = i32::from_be_bytes([b[12], b[13], b[14], b[15]]);
            let delta = i64::from(i32::from_be_bytes([b[23], b[24], b[25], b[26]]));
            log.batches.push((next, next + delta + 1, epoch));
            next += delta + 1;
        }
        Ok(followersim::log::AppendOutcome {
            batches: checked.batches.len(),
            bytes: checked.batch_bytes,
            partial_tail_bytes: checked.partial_tail_bytes,
            old_log_end_offset: old,
            new_log_end_offset: checked.next_offset,
        })
    }

    fn reset_to(&mut self, offset: i64) {
        let mut log = self.0.lock();
        log.batches.retain(|b| b.1 <= offset);
    }

    fn retained_bytes(&self) -> usize {
        0
    }

    fn last_fetched_epoch(&self) -> i32 {
        self.0.lock().batches.last().map_or(-1, |b| b.2)
    }

    fn end_offset_for_epoch(&self, epoch: i32) -> Option<i64> {
        let log = self.0.lock();
        let next_epoch_start = log.batches.iter().find(|b| b.2 > epoch).map(|b| b.0);
        Some(next_epoch_start.unwrap_or_else(|| log.batches.last().map_or(0, |b| b.1)))
    }

    fn truncate_to(&mut self, offset: i64) -> i64 {
        let before = self.log_end_offset();
        self.0.lock().batches.retain(|b| b.1 <= offset);
        let after = self.log_end_offset();
        self.0.lock().truncations.push((after, before));
        after
    }

    fn leader_progress(&mut self, high_watermark: i64, _log_start_offset: i64) {
        self.0.lock().leader_high_watermark = high_watermark;
    }
}

/// Hands out the same [`SharedLog`] per partition, so the test can look inside.
#[derive(Default)]
struct SharedLogs(Mutex<BTreeMap<(String, i32), SharedLog>>);

impl SharedLogs {
    fn log(&self, topic: &str, partition: i32) -> SharedLog {
        self.0
            .lock()
            .entry((topic.to_owned(), partition))
            .or_default()
            .clone()
    }
}

impl followersim::ReplicaLogs for SharedLogs {
    fn open(&self, topic: &str, partition: i32) -> Option<Box<dyn followersim::ReplicaLog>> {
        Some(Box::new(self.log(topic, partition)))
    }
}

#[tokio::test]
async fn a_follower_of_one_leader_leaves_the_partitions_another_leads() {
    let leader = FakeLeader::start().await;
    leader.topic("demo", 3, &[1, 2, 3]);
    leader.with_partition("demo", 1, |p| p.leader = 3);
    let f = Follower::spawn(FollowerConfig {
        leader_id: Some(1),
        ..config(&leader, 2)
    });
    wait_until("following", || !f.status().partitions.is_empty()).await;
    wait_until("fetched", || leader.answered_fetches() >= 2).await;
    let followed: Vec<i32> = f.status().partitions.iter().map(|p| p.partition).collect();
    assert_eq!(followed, vec![0, 2], "partition 1 is led by broker 3");
    f.shutdown().await;
}

#[tokio::test]
async fn fetched_data_goes_into_the_logs_it_was_given() {
    let leader = FakeLeader::start().await;
    leader.topic("demo", 1, &[1, 2, 3]);
    leader.append("demo", 0, 3);
    leader.append("demo", 0, 2);
    let logs = Arc::new(SharedLogs::default());
    let f = Follower::spawn_with_logs(config(&leader, 2), logs.clone());
    let log = logs.log("demo", 0);
    wait_until("replicated into the given log", || {
        log.0.lock().batches.len() == 2
    })
    .await;
    assert_eq!(log.0.lock().batches, vec![(0, 3, 0), (3, 5, 0)]);
    assert_eq!(leo(&f, "demo", 0), Some(5));
    wait_until("the leader's HW passed on", || {
        log.0.lock().leader_high_watermark == 5
    })
    .await;
    // It keeps no copy of its own.
    assert!(f.partition_log("demo", 0).is_none());
    f.shutdown().await;
}

#[tokio::test]
async fn a_diverged_log_is_truncated_where_the_leader_says_and_fetched_again() {
    // Our log holds offsets 0..5 of epoch 0; the leader (elected in epoch 1) kept only
    // 0..3 of epoch 0, then wrote 3..7 in epoch 1.
    let leader = FakeLeader::start().await;
    leader.topic("demo", 1, &[1, 2, 3]);
    leader.with_partition("demo", 0, |p| {
        p.batches.push((0, batch(0, 3)));
        p.batches
            .push((3, BatchBuilder::new(4).base_offset(3, 1).build()));
        p.diverged_at = Some((0, 3));
    });
    let logs = Arc::new(SharedLogs::default());
    let log = logs.log("demo", 0);
    log.0.lock().batches = vec![(0, 3, 0), (3, 5, 0)];
    let f = Follower::spawn_with_logs(config(&leader, 2), logs.clone());
    wait_until("truncated and caught up", || {
        log.0.lock().batches == vec![(0, 3, 0), (3, 7, 1)]
    })
    .await;
    assert_eq!(log.0.lock().truncations, vec![(3, 5)]);
    let fetches = leader.fetches();
    let first = &fetches[0];
    assert_eq!(first.offsets, vec![("demo".to_owned(), 0, 5)]);
    assert_eq!(
        first.last_fetched_epochs,
        vec![("demo".to_owned(), 0, 0)],
        "the follower says which epoch its last batch has"
    );
    assert!(
        fetches
            .iter()
            .any(|x| x.offsets == vec![("demo".to_owned(), 0, 3)]),
        "it fetched again from the truncation point"
    );
    f.shutdown().await;
}
