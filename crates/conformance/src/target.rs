//! A broker under test: Apache Kafka's reference cluster, or ours.
//!
//! Both are driven the same way — Kafka requests over TCP, one connection per node — and
//! differ only where they must:
//! - **Stopping the followers.** Ours pauses its two embedded followers through the admin
//!   API (`POST /api/followers/{2,3}/pause`); for Kafka, brokers 2 and 3 are stopped with
//!   SIGSTOP and continued with SIGCONT, as a hung follower would be.
//! - **Placing a new topic.** Every partition a scenario creates is led by node 1 with
//!   replicas `[1, 2, 3]`, so that both brokers answer from node 1. Kafka is asked for that
//!   assignment explicitly; ours leads everything anyway.

use std::collections::{BTreeMap, HashMap};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use followersim::wire::KafkaConnection;
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, FindCoordinatorRequest, ListOffsetsRequest, MetadataRequest,
    MetadataResponse, TopicName,
};
use kafka_protocol::protocol::{Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Which broker this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Kafka,
    Ours,
}

/// How a target's followers are stopped and continued.
enum Control {
    /// Our broker's admin listener (`host:port`).
    Ours { admin: String },
    /// Kafka's broker processes: broker id -> pid.
    Kafka { pids: BTreeMap<i32, u32> },
}

/// One broker (or cluster) under test, with a connection per node.
pub struct Target {
    pub kind: Kind,
    nodes: BTreeMap<i32, String>,
    conns: HashMap<i32, KafkaConnection>,
    control: Control,
    followers_stopped: bool,
}

/// What [`Target::wait_in_sync`] and [`Target::wait_replicated`] wait for.
#[derive(Debug, Clone, Copy)]
enum Ready {
    /// Node 1 leads every partition, and answers for it, with every replica in the ISR.
    InSync,
    /// Every partition has a leader, wherever it is, with every replica in the ISR.
    Replicated,
}

/// The node that leads every partition the scenarios create.
pub const LEADER: i32 = 1;
/// The two other replicas of every partition the scenarios create.
pub const FOLLOWERS: [i32; 2] = [2, 3];

pub fn name(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

pub fn topic_name(s: &str) -> TopicName {
    TopicName(name(s))
}

/// A new topic's configs, as CreateTopics carries them.
pub fn topic_configs(configs: &[(&str, &str)]) -> Vec<CreatableTopicConfig> {
    configs
        .iter()
        .map(|(k, v)| {
            CreatableTopicConfig::default()
                .with_name(name(k))
                .with_value(Some(name(v)))
        })
        .collect()
}

/// FindCoordinator (v4 and up: a list of keys) of one key of `key_type` (0 a group, 1 a
/// transactional id).
pub fn find_coordinator_request(key_type: i8, key: &str) -> FindCoordinatorRequest {
    FindCoordinatorRequest::default()
        .with_key_type(key_type)
        .with_coordinator_keys(vec![name(key)])
}

impl Target {
    /// Kafka's reference cluster: `bootstrap` is any broker; `pid_dir` holds
    /// `broker-N.pid` as `scripts/kafka-reference.sh` writes them.
    pub async fn kafka(bootstrap: &str, pid_dir: &std::path::Path) -> Result<Target> {
        let mut pids = BTreeMap::new();
        for id in FOLLOWERS {
            let file = pid_dir.join(format!("broker-{id}.pid"));
            let pid = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            pids.insert(id, pid.trim().parse().context("a pid file holds a number")?);
        }
        let mut target = Self::connect(Kind::Kafka, bootstrap, Control::Kafka { pids }).await?;
        // A harness stopped in the middle of a scenario (Ctrl-C, a kill) leaves Kafka's
        // followers stopped; continue them first, or every scenario would wait for an ISR
        // that never fills.
        target.resume_followers().await?;
        Ok(target)
    }

    /// Our broker, listening on `bootstrap`, its admin API on `admin`.
    pub async fn ours(bootstrap: &str, admin: &str) -> Result<Target> {
        let control = Control::Ours {
            admin: admin.to_owned(),
        };
        Self::connect(Kind::Ours, bootstrap, control).await
    }

    async fn connect(kind: Kind, bootstrap: &str, control: Control) -> Result<Target> {
        let mut first = KafkaConnection::connect(bootstrap)
            .await?
            .with_client_id("conformance");
        let meta = first.send(&MetadataRequest::default(), 12).await?;
        let nodes: BTreeMap<i32, String> = meta
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
            .collect();
        if !nodes.contains_key(&LEADER) {
            bail!("{bootstrap} lists no node {LEADER} in Metadata: {nodes:?}");
        }
        let mut target = Target {
            kind,
            nodes,
            conns: HashMap::new(),
            control,
            followers_stopped: false,
        };
        // Keep the bootstrap connection if it is node 1's.
        if target.nodes.get(&LEADER).map(String::as_str) == Some(bootstrap) {
            target.conns.insert(LEADER, first);
        }
        Ok(target)
    }

    pub fn label(&self) -> &'static str {
        match self.kind {
            Kind::Kafka => "Kafka 4.4",
            Kind::Ours => "ours",
        }
    }

    /// `host:port` of node 1.
    pub fn bootstrap(&self) -> &str {
        &self.nodes[&LEADER]
    }

    /// A new connection to `node`, owned by the caller.
    pub async fn open(&self, node: i32) -> Result<KafkaConnection> {
        let addr = self
            .nodes
            .get(&node)
            .ok_or_else(|| anyhow!("{} has no node {node}", self.label()))?;
        Ok(KafkaConnection::connect(addr)
            .await?
            .with_client_id("conformance"))
    }

    /// The shared connection to `node` (opened on first use, and again after a failure).
    pub async fn conn(&mut self, node: i32) -> Result<&mut KafkaConnection> {
        if !self.conns.contains_key(&node) {
            let conn = self.open(node).await?;
            self.conns.insert(node, conn);
        }
        Ok(self.conns.get_mut(&node).expect("inserted above"))
    }

    /// Sends `req` to `node` at `version` on the shared connection and waits for the answer.
    /// A connection that fails is dropped, so the next request opens a new one.
    pub async fn send<R: Request>(
        &mut self,
        node: i32,
        req: &R,
        version: i16,
    ) -> Result<R::Response> {
        let result = self.conn(node).await?.send(req, version).await;
        if result.is_err() {
            self.conns.remove(&node);
        }
        result
    }

    /// Sends to node 1, which leads every partition the scenarios create.
    pub async fn leader<R: Request>(&mut self, req: &R, version: i16) -> Result<R::Response> {
        self.send(LEADER, req, version).await
    }

    /// Metadata for `topics` from node 1, without creating them.
    pub async fn metadata(&mut self, topics: &[&str]) -> Result<MetadataResponse> {
        let req = MetadataRequest::default()
            .with_allow_auto_topic_creation(false)
            .with_topics(Some(
                topics
                    .iter()
                    .map(|t| MetadataRequestTopic::default().with_name(Some(topic_name(t))))
                    .collect(),
            ));
        self.leader(&req, 12).await
    }

    /// Creates `topic` with `partitions` partitions, each led by node 1 with replicas
    /// [1, 2, 3], and `configs`; returns once node 1 leads all of them with a full ISR.
    pub async fn create_topic(
        &mut self,
        topic: &str,
        partitions: i32,
        configs: &[(&str, &str)],
    ) -> Result<()> {
        let mut creatable = CreatableTopic::default()
            .with_name(topic_name(topic))
            .with_configs(topic_configs(configs));
        creatable = match self.kind {
            Kind::Kafka => creatable
                .with_num_partitions(-1)
                .with_replication_factor(-1)
                .with_assignments(
                    (0..partitions)
                        .map(|p| {
                            CreatableReplicaAssignment::default()
                                .with_partition_index(p)
                                .with_broker_ids(vec![BrokerId(1), BrokerId(2), BrokerId(3)])
                        })
                        .collect(),
                ),
            Kind::Ours => creatable
                .with_num_partitions(partitions)
                .with_replication_factor(3),
        };
        let req = CreateTopicsRequest::default()
            .with_topics(vec![creatable])
            .with_timeout_ms(30_000);
        let resp = self.leader(&req, 7).await?;
        let code = resp.topics.first().map(|t| t.error_code).unwrap_or(-1);
        if code != 0 {
            bail!("{}: creating {topic}: error {code}", self.label());
        }
        self.wait_in_sync(&[topic]).await
    }

    /// Waits until node 1 leads every partition of `topics` and every replica is in the ISR.
    pub async fn wait_in_sync(&mut self, topics: &[&str]) -> Result<()> {
        self.wait_for(topics, Ready::InSync).await
    }

    /// Waits until every partition of `topics` has a leader and a full ISR, wherever the
    /// leader is (for `__consumer_offsets`, whose leaders Kafka spreads).
    pub async fn wait_replicated(&mut self, topics: &[&str]) -> Result<()> {
        self.wait_for(topics, Ready::Replicated).await
    }

    /// Asks every 100 ms whether `topics` are `ready`; fails after 90 s.
    async fn wait_for(&mut self, topics: &[&str], ready: Ready) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if self.is_ready(topics, ready).await? {
                return Ok(());
            }
            if Instant::now() > deadline {
                let what = match ready {
                    Ready::InSync => "not led by node 1 with a full ISR",
                    Ready::Replicated => "not fully replicated",
                };
                bail!("{}: {topics:?} {what} after 90 s", self.label());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Whether every partition of `topics` is as `ready` says, by one Metadata (and, for
    /// [`Ready::InSync`], one ListOffsets).
    async fn is_ready(&mut self, topics: &[&str], ready: Ready) -> Result<bool> {
        let meta = self.metadata(topics).await?;
        Ok(match ready {
            Ready::InSync => {
                let led = meta.topics.len() == topics.len()
                    && meta.topics.iter().all(|t| {
                        t.error_code == 0
                            && !t.partitions.is_empty()
                            && t.partitions.iter().all(|p| {
                                p.error_code == 0
                                    && p.leader_id.0 == LEADER
                                    && p.isr_nodes.len() == p.replica_nodes.len()
                            })
                    });
                // Metadata can name node 1 the leader a moment before its replica manager
                // has made it one: ask the partitions themselves too.
                led && self.partitions_answer(&meta).await?
            }
            Ready::Replicated => meta.topics.iter().all(|t| {
                t.error_code == 0
                    && t.partitions.iter().all(|p| {
                        p.error_code == 0
                            && p.leader_id.0 >= 0
                            && p.isr_nodes.len() == p.replica_nodes.len()
                    })
            }),
        })
    }

    /// Whether node 1 answers a consumer's ListOffsets for every partition in `meta`
    /// without an error (it does only once it leads them).
    async fn partitions_answer(&mut self, meta: &MetadataResponse) -> Result<bool> {
        let topics = meta
            .topics
            .iter()
            .map(|t| {
                ListOffsetsTopic::default()
                    .with_name(t.name.clone().unwrap_or_default())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                ListOffsetsPartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_current_leader_epoch(-1)
                                    .with_timestamp(-1)
                            })
                            .collect(),
                    )
            })
            .collect();
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(topics);
        let resp = self.leader(&req, 7).await?;
        Ok(resp
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .all(|p| p.error_code == 0))
    }

    /// Stops both followers: they neither fetch nor answer until [`Target::resume_followers`].
    pub async fn stop_followers(&mut self) -> Result<()> {
        self.signal_followers(true).await?;
        self.followers_stopped = true;
        Ok(())
    }

    /// Lets both followers run again.
    pub async fn resume_followers(&mut self) -> Result<()> {
        self.signal_followers(false).await?;
        self.followers_stopped = false;
        Ok(())
    }

    pub fn followers_stopped(&self) -> bool {
        self.followers_stopped
    }

    async fn signal_followers(&mut self, stop: bool) -> Result<()> {
        match &self.control {
            Control::Ours { admin } => {
                let action = if stop { "pause" } else { "resume" };
                for id in FOLLOWERS {
                    let (status, body) =
                        http(admin, "POST", &format!("/api/followers/{id}/{action}")).await?;
                    if status != 200 {
                        bail!("{action} follower {id}: HTTP {status}: {body}");
                    }
                }
            }
            Control::Kafka { pids } => {
                let signal = if stop { "-STOP" } else { "-CONT" };
                for pid in pids.values() {
                    let status = Command::new("kill")
                        .args([signal, &pid.to_string()])
                        .status()
                        .context("running kill")?;
                    if !status.success() {
                        bail!("kill {signal} {pid} failed");
                    }
                }
            }
        }
        Ok(())
    }
}

/// One HTTP/1.1 request with an empty body; returns the status and the body.
pub async fn http(addr: &str, method: &str, path: &str) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("no HTTP status in {head:?}"))?;
    Ok((status, body.to_owned()))
}

/// Our broker, started by the harness on loopback ports the kernel picks.
pub struct OursProcess {
    child: Child,
    pub bootstrap: String,
    pub admin: String,
    pub log: std::path::PathBuf,
}

impl OursProcess {
    /// Starts `binary serve --config CONFIG` with `extra` flags, every listener on a port
    /// the kernel picks, and reads the bound addresses from its ready file
    /// (`--ready-file`), which the broker writes whole once every listener serves.
    pub async fn start(
        binary: &str,
        config: &str,
        log_dir: &std::path::Path,
        extra: &[&str],
    ) -> Result<Self> {
        std::fs::create_dir_all(log_dir)?;
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("conformance-broker-{}-{n}", std::process::id());
        let log = log_dir.join(format!("{name}.log"));
        let ready_file = log_dir.join(format!("{name}.ready.json"));
        let out = std::fs::File::create(&log)?;
        let child = Command::new(binary)
            .args(["serve", "--config", config, "--listen", "127.0.0.1:0"])
            .args(["--admin-listen", "127.0.0.1:0", "--ready-file"])
            .arg(&ready_file)
            .args(extra)
            .stdout(out.try_clone()?)
            .stderr(out)
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {binary}"))?;
        let mut started = OursProcess {
            child,
            bootstrap: String::new(),
            admin: String::new(),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(text) = std::fs::read_to_string(&ready_file) {
                let ready: serde_json::Value = serde_json::from_str(&text)
                    .with_context(|| format!("the ready file {}", ready_file.display()))?;
                let field = |key: &str| {
                    ready[key]
                        .as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| anyhow!("the ready file has no {key}: {text}"))
                };
                started.bootstrap = field("bootstrap")?;
                started.admin = field("admin")?;
                let _ = std::fs::remove_file(&ready_file);
                return Ok(started);
            }
            if started.child.try_wait()?.is_some() {
                bail!("our broker stopped; see {}", started.log.display());
            }
            if Instant::now() > deadline {
                started.stop();
                bail!(
                    "our broker was not ready in 30 s; see {}",
                    started.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for OursProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.stop();
        }
    }
}

/// Brokers started by this process so far, for their log and ready files' names.
static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
