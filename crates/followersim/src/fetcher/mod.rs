//! The fetch loop of one follower: connect, learn partitions, fetch, append, repeat.
//!
//! # The Kafka concept
//!
//! This is Kafka's `ReplicaFetcherThread`, in miniature:
//!
//! 1. **Connect and negotiate.** ApiVersions (v3) tells us which versions of each API the
//!    leader speaks.
//! 2. **Learn the assignment.** A real follower is told which partitions it follows by the
//!    controller; a simulator asks Metadata for all topics and keeps every partition whose
//!    `replica_nodes` list its id (and whose leader is someone else). It re-reads Metadata
//!    every `metadata_refresh_ms`, and at once on `UNKNOWN_TOPIC_OR_PARTITION`, so
//!    auto-created and deleted topics are picked up.
//! 3. **Fetch.** One Fetch (v12: topic names, `replica_id` in the body) for all partitions,
//!    each from the follower's own log end offset. `replica_id >= 0` is what tells the
//!    leader "this is a follower": it may read up to the leader's LEO (not just the HW), and
//!    the fetch offset is recorded as this replica's LEO. That is the *only* way the leader
//!    learns how far a follower has got, so the HW moves when the follower sends its
//!    **next** Fetch, not when the data leaves the leader.
//! 4. **Append.** Each partition's batches are checked (contiguous from the LEO, whole,
//!    magic 2, CRC-32C) and appended all-or-nothing; a rejected response is logged and
//!    fetched again from the unchanged LEO after a backoff.
//! 5. **Handle errors.** `OFFSET_OUT_OF_RANGE` means the fetch offset is outside the leader's
//!    log (retention moved its start past us, or the leader restarted empty): truncate the
//!    copy and start again from the leader's log start offset.
//!
//! The control knobs of [`crate::FollowerHandle`] are checked between steps: pause before a
//! Fetch, the fetch delay before a Fetch, the lag hold between receiving data and appending
//! it. Crash, restart and shutdown drop the whole session, connection included.

mod response;
use crate::backoff::Backoff;
use crate::state::{Control, Desired, PartitionState, ReplicaState, Shared, TopicPartition};
use crate::wire::KafkaConnection;
use anyhow::{anyhow, bail, Context, Result};
use kafka_protocol::error::ParseResponseErrorCode;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, BrokerId, FetchRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;
use tokio::time::{sleep, sleep_until, timeout, Instant};
use tracing::{debug, info, warn};

/// Highest Fetch version used: v12 is the last one that names topics (v13+ use topic ids).
pub const FETCH_VERSION: i16 = 12;
/// Highest Metadata version used.
pub const METADATA_VERSION: i16 = 12;
/// Highest ListOffsets version used.
pub const LIST_OFFSETS_VERSION: i16 = 7;
/// ApiVersions version sent first (what librdkafka sends).
pub const API_VERSIONS_VERSION: i16 = 3;

/// A partition's records at least this large, making up at least half of their response
/// frame, are kept by the follower's log as they are: the frame was read into an allocation
/// of its own (see [`crate::wire`]), so keeping slices of it pins at most twice what the
/// log accounts for, and the copy would cost a pass over the data plus fresh pages (with
/// `linger.ms=5` the embedded followers receive batches of about 1 MB).
const SHARE_RECORDS_FROM_BYTES: usize = 64 * 1024;

/// ListOffsets timestamp meaning "the log start offset".
const EARLIEST_TIMESTAMP: i64 = -2;

/// The API versions agreed with the leader.
#[derive(Debug, Clone, Copy)]
struct Versions {
    fetch: i16,
    metadata: i16,
    list_offsets: Option<i16>,
}

/// Sets `done` (and clears `connected`) when the task ends, however it ends.
struct DoneGuard(Arc<Shared>);

impl Drop for DoneGuard {
    fn drop(&mut self) {
        {
            let mut st = self.0.replica.lock();
            st.connected = false;
            st.finished = true;
        }
        self.0.done.send_replace(true);
    }
}

fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn error_name(code: i16) -> String {
    match code.err() {
        Some(e) => format!("{e:?} ({code})"),
        None => "NONE (0)".to_owned(),
    }
}

/// Sleeps until `start + ms(control)`, re-reading the knob whenever it changes, so that a
/// new delay takes effect at once (a shorter one ends the sleep early).
async fn controlled_sleep(
    ctl: &mut watch::Receiver<Control>,
    start: Instant,
    ms: impl Fn(&Control) -> u64,
) {
    loop {
        let wait = ms(&ctl.borrow_and_update());
        let deadline = crate::instant_after(start, wait);
        if Instant::now() >= deadline {
            return;
        }
        tokio::select! {
            _ = sleep_until(deadline) => return,
            changed = ctl.changed() => if changed.is_err() { return },
        }
    }
}

/// Waits until the control's session counter differs from `session`.
async fn session_ended(ctl: &mut watch::Receiver<Control>, session: u64) {
    // The sender lives as long as the task's `Shared`, so an error cannot happen; if it
    // did, treat it as the end of the session.
    let _ = ctl.wait_for(|c| c.session != session).await.map(drop);
}

/// The follower task: runs sessions (one per connection) until shut down.
pub(crate) async fn run(shared: Arc<Shared>) {
    let _guard = DoneGuard(shared.clone());
    let cfg = &shared.config;
    let mut ctl = shared.control.subscribe();
    let mut backoff = Backoff::new(cfg.reconnect_backoff_ms, cfg.reconnect_backoff_max_ms);
    info!(leader = %cfg.bootstrap, "follower {} starting", cfg.replica_id);
    loop {
        let (desired, session) = {
            let c = ctl.borrow_and_update();
            (c.desired, c.session)
        };
        match desired {
            Desired::Shutdown => break,
            Desired::Crashed => {
                // Down until restart (or shutdown) changes the control.
                if ctl.changed().await.is_err() {
                    break;
                }
                continue;
            }
            Desired::Running | Desired::Paused => {}
        }
        let mut session_ctl = ctl.clone();
        let outcome = tokio::select! {
            r = run_session(&shared, &mut session_ctl, &mut backoff) => Some(r),
            _ = session_ended(&mut ctl, session) => None,
        };
        shared.replica.lock().connected = false;
        match outcome {
            None => debug!("session ended by a control action"),
            Some(Ok(())) => {}
            Some(Err(e)) => {
                let delay = backoff.failure();
                let msg = format!("{e:#}");
                if backoff.failures == 1 {
                    warn!("lost the leader at {}: {msg}; reconnecting in {} ms (and retrying quietly)", cfg.bootstrap, delay.as_millis());
                } else {
                    debug!(
                        "still cannot reach the leader: {msg}; retry in {} ms",
                        delay.as_millis()
                    );
                }
                shared.replica.lock().last_error = Some(msg);
                tokio::select! {
                    _ = sleep(delay) => {}
                    _ = session_ended(&mut ctl, session) => {}
                }
            }
        }
    }
    info!("follower {} stopped", cfg.replica_id);
}

/// Runs one connection: handshake, then metadata/fetch cycles until an error.
async fn run_session(
    shared: &Shared,
    ctl: &mut watch::Receiver<Control>,
    backoff: &mut Backoff,
) -> Result<()> {
    let cfg = &shared.config;
    let request_timeout = Duration::from_millis(cfg.request_timeout_ms);
    let mut conn = timeout(request_timeout, KafkaConnection::connect(&cfg.bootstrap))
        .await
        .map_err(|_| anyhow!("connecting timed out"))??;
    conn.set_client_id(Some(cfg.effective_client_id()));
    let versions = timeout(request_timeout, negotiate(&mut conn))
        .await
        .map_err(|_| anyhow!("ApiVersions timed out"))??;
    let epoch = {
        let mut st = shared.replica.lock();
        st.connected = true;
        st.counters.connections += 1;
        st.wipe_epoch
    };
    backoff.reset();
    info!(
        "connected to the leader at {} (Fetch v{}, Metadata v{})",
        conn.peer_addr(),
        versions.fetch,
        versions.metadata
    );

    let mut session = Session {
        shared,
        conn,
        versions,
        epoch,
        request_timeout,
        metadata_due: Instant::now(),
    };
    let mut nudges_seen = ctl.borrow().metadata_nudges;
    loop {
        let nudges = ctl.borrow().metadata_nudges;
        if nudges != nudges_seen {
            // Told that the partition set changed (FollowerHandle::refresh_metadata).
            nudges_seen = nudges;
            session.metadata_due = Instant::now();
        }
        if ctl.borrow().desired == Desired::Paused {
            // Keep the connection and send no Fetch until resumed. (Crash, restart and
            // shutdown end the whole session from outside.) Metadata is still refreshed:
            // it does not count as progress for the leader, and it lets us report the
            // moment the leader drops this paused follower from the ISR.
            let due = session.metadata_due;
            let resumed = async {
                let _ = ctl
                    .wait_for(|c| c.desired != Desired::Paused || c.metadata_nudges != nudges_seen)
                    .await
                    .map(drop);
            };
            tokio::select! {
                _ = resumed => {}
                _ = sleep_until(due) => session.refresh_metadata().await?,
            }
            continue;
        }
        if Instant::now() >= session.metadata_due {
            session.refresh_metadata().await?;
        }
        if session.partition_count() == 0 {
            // Nothing to follow yet: wait for the next metadata refresh (or a control change).
            tokio::select! {
                _ = sleep_until(session.metadata_due) => {}
                _ = ctl.changed() => {}
            }
            continue;
        }
        controlled_sleep(ctl, Instant::now(), |c| c.fetch_delay_ms).await;
        if ctl.borrow().desired == Desired::Paused {
            continue;
        }
        session.fetch_once(ctl).await?;
    }
}

/// One connection's worth of state.
struct Session<'a> {
    shared: &'a Shared,
    conn: KafkaConnection,
    versions: Versions,
    /// The `wipe_epoch` this session started with; a crash bumps it.
    epoch: u64,
    request_timeout: Duration,
    metadata_due: Instant,
}

/// Checks the state is still the one this session started with (no crash since).
fn check_epoch(st: &ReplicaState, epoch: u64) -> Result<()> {
    if st.wipe_epoch != epoch {
        bail!("the follower's state was wiped (crash) during the request");
    }
    Ok(())
}

/// Sends ApiVersions and picks the versions to use.
async fn negotiate(conn: &mut KafkaConnection) -> Result<Versions> {
    let req = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("followersim"))
        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
    let resp = conn
        .send(&req, API_VERSIONS_VERSION)
        .await
        .context("ApiVersions")?;
    if resp.error_code != 0 {
        bail!("ApiVersions failed: {}", error_name(resp.error_code));
    }
    let range = |key: ApiKey| {
        resp.api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .map(|k| (k.min_version, k.max_version))
    };
    let pick = |key: ApiKey, want: i16, lowest_we_speak: i16| -> Option<i16> {
        let (min, max) = range(key)?;
        let v = want.min(max);
        (v >= min && v >= lowest_we_speak).then_some(v)
    };
    let fetch = pick(ApiKey::Fetch, FETCH_VERSION, 4)
        .context("the leader supports no Fetch version between 4 and 12")?;
    let metadata = pick(ApiKey::Metadata, METADATA_VERSION, 1)
        .context("the leader supports no Metadata version between 1 and 12")?;
    let list_offsets = pick(ApiKey::ListOffsets, LIST_OFFSETS_VERSION, 1);
    Ok(Versions {
        fetch,
        metadata,
        list_offsets,
    })
}

/// A partition as Metadata describes it.
struct Assignment {
    topic_id: u128,
    leader_id: i32,
    leader_epoch: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
}

impl Session<'_> {
    fn replica_id(&self) -> i32 {
        self.shared.config.replica_id
    }

    fn partition_count(&self) -> usize {
        self.shared.replica.lock().partitions.len()
    }

    /// Re-reads Metadata (all topics) and updates the set of followed partitions.
    async fn refresh_metadata(&mut self) -> Result<()> {
        let cfg = &self.shared.config;
        self.metadata_due = crate::instant_after(Instant::now(), cfg.metadata_refresh_ms.max(1));
        let mut req = MetadataRequest::default().with_topics(None);
        if self.versions.metadata >= 4 {
            req = req.with_allow_auto_topic_creation(false);
        }
        let resp = timeout(
            self.request_timeout,
            self.conn.send(&req, self.versions.metadata),
        )
        .await
        .map_err(|_| anyhow!("Metadata timed out"))?
        .context("Metadata")?;

        let me = self.replica_id();
        let mut assigned: BTreeMap<TopicPartition, Assignment> = BTreeMap::new();
        // Topics the leader reported with an error: keep what we have of them.
        let mut unsure_topics: BTreeSet<String> = BTreeSet::new();
        for t in &resp.topics {
            let Some(name) = t.name.as_ref().map(|n| n.0.to_string()) else {
                continue;
            };
            if t.error_code != 0 {
                unsure_topics.insert(name);
                continue;
            }
            for p in &t.partitions {
                if p.error_code != 0 && p.error_code != ResponseError::ReplicaNotAvailable.code() {
                    unsure_topics.insert(name.clone());
                    continue;
                }
                let replicas: Vec<i32> = p.replica_nodes.iter().map(|b| b.0).collect();
                if !replicas.contains(&me) || p.leader_id.0 == me || p.leader_id.0 < 0 {
                    continue;
                }
                if cfg.leader_id.is_some_and(|leader| leader != p.leader_id.0) {
                    continue; // led by a broker another of our fetchers follows
                }
                assigned.insert(
                    TopicPartition {
                        topic: name.clone(),
                        partition: p.partition_index,
                    },
                    Assignment {
                        topic_id: t.topic_id.as_u128(),
                        leader_id: p.leader_id.0,
                        leader_epoch: p.leader_epoch,
                        replicas,
                        isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                    },
                );
            }
        }

        let mut st = self.shared.replica.lock();
        check_epoch(&st, self.epoch)?;
        st.partitions.retain(|tp, p| {
            let keep = assigned.contains_key(tp) || unsure_topics.contains(&tp.topic);
            if !keep {
                info!(
                    "no longer following {tp} from this leader (topic deleted, reassigned or led elsewhere); our copy ended at offset {}",
                    p.log.log_end_offset()
                );
            }
            keep
        });
        for (tp, a) in assigned {
            match st.partitions.get_mut(&tp) {
                None => {
                    let Some(log) = self.shared.logs.open(&tp.topic, tp.partition) else {
                        debug!("{tp} lists us as a replica, but we keep no copy of it (yet)");
                        continue;
                    };
                    info!(
                        "now following {tp}: replicas {:?}, leader {}, ISR {:?}; replicating from offset {}",
                        a.replicas, a.leader_id, a.isr, log.log_end_offset()
                    );
                    st.partitions.insert(
                        tp,
                        PartitionState {
                            log,
                            topic_id: a.topic_id,
                            leader_id: a.leader_id,
                            leader_epoch: a.leader_epoch,
                            replicas: a.replicas,
                            isr: a.isr,
                            leader_high_watermark_seen: -1,
                            leader_log_start_seen: -1,
                            last_error_code: 0,
                        },
                    );
                }
                Some(p) => {
                    if p.topic_id != 0 && a.topic_id != 0 && p.topic_id != a.topic_id {
                        info!("{tp} was deleted and re-created (new topic id): starting our copy again from offset 0");
                        match self.shared.logs.open(&tp.topic, tp.partition) {
                            Some(log) => p.log = log,
                            None => p.log.reset_to(0),
                        }
                        p.topic_id = a.topic_id;
                    }
                    let was_in = p.isr.contains(&me);
                    let now_in = a.isr.contains(&me);
                    if was_in != now_in {
                        if now_in {
                            info!(
                                "the leader has added us back to the ISR of {tp}: ISR now {:?}",
                                a.isr
                            );
                        } else {
                            info!("the leader has dropped us from the ISR of {tp} (we fell behind for longer than replica.lag.time.max.ms): ISR now {:?}", a.isr);
                        }
                    }
                    p.leader_id = a.leader_id;
                    p.leader_epoch = a.leader_epoch;
                    p.replicas = a.replicas;
                    p.isr = a.isr;
                }
            }
        }
        Ok(())
    }

    /// Builds the Fetch request for every followed partition, from each one's LEO.
    fn build_fetch(&self, control: &Control) -> Result<FetchRequest> {
        let cfg = &self.shared.config;
        let st = self.shared.replica.lock();
        check_epoch(&st, self.epoch)?;
        let mut topics: Vec<FetchTopic> = Vec::new();
        for (tp, p) in &st.partitions {
            let mut part = FetchPartition::default()
                .with_partition(tp.partition)
                .with_fetch_offset(p.log.log_end_offset())
                .with_log_start_offset(p.log.log_start_offset())
                .with_partition_max_bytes(cfg.partition_max_bytes);
            if self.versions.fetch >= 9 {
                // Lets the leader fence us if our view of its epoch is stale.
                part = part.with_current_leader_epoch(p.leader_epoch);
            }
            // With the epoch of our last batch (a log that tracks epochs), the leader checks
            // that our log has not diverged from its own and, if it has, answers where it
            // did instead of records (KIP-320). -1 skips the check.
            let last_fetched_epoch = p.log.last_fetched_epoch();
            if self.versions.fetch >= 12 && last_fetched_epoch >= 0 {
                part = part.with_last_fetched_epoch(last_fetched_epoch);
            }
            match topics.last_mut() {
                Some(t) if t.topic.0.as_str() == tp.topic => t.partitions.push(part),
                _ => topics.push(
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(tp.topic.clone())))
                        .with_partitions(vec![part]),
                ),
            }
        }
        Ok(FetchRequest::default()
            .with_replica_id(BrokerId(cfg.replica_id))
            .with_max_wait_ms(cfg.fetch_max_wait_ms)
            .with_min_bytes(cfg.fetch_min_bytes)
            .with_max_bytes(control.max_bytes)
            .with_isolation_level(0)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(topics))
    }

    /// Sends one Fetch, then checks, (in lag mode) holds, and appends what came back.
    /// While it does, the status says a fetch is in flight: a pause takes effect after it.
    async fn fetch_once(&mut self, ctl: &mut watch::Receiver<Control>) -> Result<()> {
        let done = self.fetch_and_append(ctl).await;
        self.shared.replica.lock().fetch_in_flight = false;
        done
    }

    async fn fetch_and_append(&mut self, ctl: &mut watch::Receiver<Control>) -> Result<()> {
        let control = ctl.borrow().clone();
        let req = self.build_fetch(&control)?;
        {
            let mut st = self.shared.replica.lock();
            st.counters.fetches_sent += 1;
            st.counters.last_fetch_unix_ms = Some(now_unix_ms());
            st.fetch_in_flight = true;
        }
        let wait = Duration::from_millis(self.shared.config.fetch_max_wait_ms.max(0) as u64);
        let resp = timeout(
            wait + self.request_timeout,
            self.conn.send(&req, self.versions.fetch),
        )
        .await
        .map_err(|_| anyhow!("Fetch timed out"))?
        .context("Fetch")?;
        let received_at = Instant::now();

        let frame_len = self.conn.last_frame_len();
        let outcome = self.examine(&resp, frame_len)?;
        if !outcome.checked.is_empty() {
            // "Stay N ms behind": hold the data before appending it (and before the next
            // Fetch, which is what would tell the leader we have it).
            controlled_sleep(ctl, received_at, |c| c.lag_ms).await;
            self.commit(outcome.checked)?;
        }
        for (tp, epoch, end_offset) in outcome.diverged {
            self.truncate_diverged(&tp, epoch, end_offset)?;
        }
        for (tp, leader_log_start) in outcome.out_of_range {
            self.reset_partition(&tp, leader_log_start).await?;
        }
        if outcome.refresh_metadata {
            self.metadata_due = Instant::now();
        }
        if outcome.back_off {
            let ms = self.shared.config.fetch_backoff_ms;
            controlled_sleep(ctl, Instant::now(), |_| ms).await;
        }
        Ok(())
    }
}
