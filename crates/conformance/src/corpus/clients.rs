//! Behaviour that spans requests, seen through a real client: a librdkafka group consumer
//! that commits while the followers are stopped.
//!
//! The sequence (issue 18): a consumer with `enable.auto.commit=false` and
//! `session.timeout.ms=30000` reads 10 records; both followers are stopped; it commits
//! offset 5 synchronously; the followers stay stopped for [`STOPPED_FOR`]; they come back;
//! it commits offset 7; once the rebalance that follows gives it its partition back, it
//! commits 7 again. What is written down is what its user sees — whether each commit failed
//! and whether it waited, whether the client lost its session, whether the group recovers —
//! and, from librdkafka's own debug log, whether it looped looking for the coordinator.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext};
use rdkafka::{Message, Offset, TopicPartitionList};

use super::{produce, scenario, values, Ctx, Scenario};
use crate::observe::Observation;
use crate::target::Target;

/// How long the followers stay stopped after the first commit is sent. Longer than Kafka's
/// `broker.session.timeout.ms` (9 s, after which its controller fences a silent broker),
/// shorter than `replica.lag.time.max.ms` (30 s) and the consumer's session.
pub const STOPPED_FOR: Duration = Duration::from_secs(20);

pub fn scenarios() -> Vec<Scenario> {
    vec![scenario!(
        "clients/librdkafka commits while the followers are stopped",
        true,
        commit_sequence
    )]
}

/// librdkafka's log lines, each with when it arrived.
#[derive(Clone, Default)]
struct LogLines(Arc<Mutex<Vec<(Instant, String, String)>>>);

impl ClientContext for LogLines {
    fn log(&self, _level: RDKafkaLogLevel, fac: &str, line: &str) {
        if let Ok(mut lines) = self.0.lock() {
            lines.push((Instant::now(), fac.to_owned(), line.to_owned()));
        }
    }
}
impl ConsumerContext for LogLines {}

impl LogLines {
    /// Writes every line, with its time from `start`, to `path` (for reading afterwards).
    fn save(&self, start: Instant, path: &str) {
        let Ok(lines) = self.0.lock() else { return };
        let text: String = lines
            .iter()
            .map(|(at, fac, line)| {
                let ms = at
                    .checked_duration_since(start)
                    .unwrap_or_default()
                    .as_millis();
                format!("{ms:>7} {fac} {line}\n")
            })
            .collect();
        let _ = std::fs::write(path, text);
    }

    /// Lines between `from` and `to` that contain `needle`.
    fn count(&self, from: Instant, to: Instant, needle: &str) -> usize {
        self.0
            .lock()
            .map(|lines| {
                lines
                    .iter()
                    .filter(|(at, _, line)| *at >= from && *at <= to && line.contains(needle))
                    .count()
            })
            .unwrap_or(0)
    }
}

/// What the main task tells the consumer thread.
enum Step {
    Commit(i64),
    Finish,
}

/// What the consumer thread reports.
#[derive(Debug)]
enum Report {
    Read(Vec<String>),
    Committed {
        offset: i64,
        result: String,
        took: Duration,
    },
    Assignment(Vec<i32>),
    Failed(String),
}

fn consumer_thread(
    bootstrap: String,
    group: String,
    topic: String,
    log: LogLines,
    steps: mpsc::Receiver<Step>,
    reports: Reports,
) {
    let fail = |reports: &Reports, e: String| {
        let _ = reports.send(Report::Failed(e));
    };
    let consumer: BaseConsumer<LogLines> = match ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", &group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "30000")
        .set("debug", "cgrp,broker,protocol")
        .set_log_level(RDKafkaLogLevel::Debug)
        .create_with_context(log)
    {
        Ok(c) => c,
        Err(e) => return fail(&reports, format!("creating the consumer: {e}")),
    };
    if let Err(e) = consumer.subscribe(&[&topic]) {
        return fail(&reports, format!("subscribing: {e}"));
    }
    let mut read = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while read.len() < 10 && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            read.push(format!(
                "{}:{}",
                m.offset(),
                String::from_utf8_lossy(m.payload().unwrap_or_default())
            ));
        }
    }
    let _ = reports.send(Report::Read(read));
    loop {
        // Keep polling between steps, as an application's loop does.
        let step = loop {
            match steps.try_recv() {
                Ok(step) => break step,
                Err(mpsc::TryRecvError::Empty) => {
                    let _ = consumer.poll(Duration::from_millis(100));
                }
                Err(mpsc::TryRecvError::Disconnected) => return,
            }
        };
        match step {
            Step::Commit(offset) => {
                let mut list = TopicPartitionList::new();
                if let Err(e) = list.add_partition_offset(&topic, 0, Offset::Offset(offset)) {
                    return fail(&reports, format!("building the commit: {e}"));
                }
                let start = Instant::now();
                let result = match consumer.commit(&list, CommitMode::Sync) {
                    Ok(()) => "ok".to_owned(),
                    Err(e) => e
                        .rdkafka_error_code()
                        .map_or_else(|| e.to_string(), |c| format!("{c:?}")),
                };
                let _ = reports.send(Report::Committed {
                    offset,
                    result,
                    took: start.elapsed(),
                });
            }
            Step::Finish => {
                // The group recovers: the consumer gets its partition back from the
                // rebalance its lost session caused (within a minute), and can commit.
                let assigned = |c: &BaseConsumer<LogLines>| -> Vec<i32> {
                    c.assignment()
                        .map(|l| l.elements().iter().map(|e| e.partition()).collect())
                        .unwrap_or_default()
                };
                let deadline = Instant::now() + Duration::from_secs(60);
                while assigned(&consumer).is_empty() && Instant::now() < deadline {
                    let _ = consumer.poll(Duration::from_millis(100));
                }
                let _ = reports.send(Report::Assignment(assigned(&consumer)));
                continue;
            }
        }
    }
}

type Reports = tokio::sync::mpsc::UnboundedSender<Report>;

async fn next_report(
    reports: &mut tokio::sync::mpsc::UnboundedReceiver<Report>,
    within: Duration,
) -> Result<Report> {
    match tokio::time::timeout(within, reports.recv()).await {
        Err(_) => bail!("no word from the consumer in {within:?}"),
        Ok(None) => bail!("the consumer thread ended"),
        Ok(Some(Report::Failed(e))) => bail!("the consumer failed: {e}"),
        Ok(Some(r)) => Ok(r),
    }
}

async fn commit(
    steps: &mpsc::Sender<Step>,
    reports: &mut tokio::sync::mpsc::UnboundedReceiver<Report>,
    offset: i64,
    o: &mut Observation,
    key: &str,
    timed: bool,
) -> Result<()> {
    steps
        .send(Step::Commit(offset))
        .map_err(|_| anyhow!("the consumer thread ended"))?;
    match next_report(reports, Duration::from_secs(120)).await? {
        Report::Committed {
            offset: got,
            result,
            took,
        } if got == offset => {
            // Which error a failed commit gets depends on where librdkafka's own timers
            // stand (its retries, its session): Kafka itself answered either
            // COORDINATOR_NOT_AVAILABLE or, later in the loop, UNKNOWN_MEMBER_ID, from one
            // run to the next. What a user relies on is whether it failed, and whether it
            // waited; the error is in the log.
            eprintln!("conformance: {key}: {result} after {took:.1?}");
            o.set(
                format!("{key}.result"),
                if result == "ok" { "ok" } else { "failed" },
            );
            // offsets.commit.timeout.ms is 5 s on both.
            if timed {
                o.set(format!("{key}.answered"), super::timing(took, 5_000));
            }
            Ok(())
        }
        other => bail!("expected the commit of {offset}, got {other:?}"),
    }
}

async fn commit_sequence(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("t");
    t.create_topic(&topic, 1, &[]).await?;
    produce(t, &topic, 0, -1, 30_000, values("r", 10)).await?;
    let group = c.group("g");
    let log = LogLines::default();
    let (step_tx, step_rx) = mpsc::channel();
    let (report_tx, mut report_rx) = tokio::sync::mpsc::unbounded_channel();
    let thread = {
        let (bootstrap, group, topic, log) = (
            t.bootstrap().to_owned(),
            group.clone(),
            topic.clone(),
            log.clone(),
        );
        std::thread::spawn(move || {
            consumer_thread(bootstrap, group, topic, log, step_rx, report_tx)
        })
    };
    let mut o = Observation::new();
    let began = Instant::now();
    let seen = async {
        match next_report(&mut report_rx, Duration::from_secs(90)).await? {
            Report::Read(read) => o.set("read", read.len()),
            other => bail!("expected the records read, got {other:?}"),
        };
        t.stop_followers().await?;
        let stopped_at = Instant::now();
        commit(&step_tx, &mut report_rx, 5, &mut o, "commit_5_stopped", true).await?;
        if let Some(rest) = STOPPED_FOR.checked_sub(stopped_at.elapsed()) {
            tokio::time::sleep(rest).await;
        }
        t.resume_followers().await?;
        t.wait_replicated(&["__consumer_offsets", &topic]).await?;
        // Whether this commit waits is a race inside the client, not a property of the
        // broker: it depends on whether the 30 s session has already run out when
        // librdkafka's retry loop hands back the first commit. When it has, the broker
        // answers UNKNOWN_MEMBER_ID at once; when not, the commit waits. Our broker has
        // been seen doing each on the same code (at once in one CI run, after the wait in
        // the others), so only the failure is compared.
        commit(&step_tx, &mut report_rx, 7, &mut o, "commit_7_resumed", false).await?;
        step_tx.send(Step::Finish).map_err(|_| anyhow!("the consumer thread ended"))?;
        match next_report(&mut report_rx, Duration::from_secs(90)).await? {
            Report::Assignment(a) => o.set("assignment_after_rebalance", format!("{a:?}")),
            other => bail!("expected the assignment, got {other:?}"),
        };
        commit(&step_tx, &mut report_rx, 7, &mut o, "commit_7_after_rebalance", true).await?;
        // librdkafka hands its log lines over when the application polls, late and in
        // bursts, so they are counted over the whole sequence, not timed.
        let count = |needle: &str| log.count(began, Instant::now(), needle);
        let find = count("Sent FindCoordinatorRequest");
        let connects = count("Connected (#");
        let heartbeat_errors = count("heartbeat error response");
        o.set("find_coordinator_requests", bucket(find));
        o.set("coordinator_connections", bucket(connects));
        o.set("heartbeat_errors", heartbeat_errors > 0);
        o.set("session_lost_by_the_client", count("session timed out") > 0);
        eprintln!(
            "conformance: {}: librdkafka sent {find} FindCoordinator requests, opened {connects} connections, saw {heartbeat_errors} heartbeat errors",
            t.label()
        );
        Ok(())
    }
    .await;
    if t.followers_stopped() {
        t.resume_followers().await?;
    }
    drop(step_tx);
    let _ = thread.join();
    let path = format!(
        "target/conformance-librdkafka-{}.log",
        if t.kind == crate::target::Kind::Kafka {
            "kafka"
        } else {
            "ours"
        }
    );
    log.save(began, &path);
    seen?;
    Ok(o)
}

/// A count, in the words that matter: none, a few (a retry or two), or many (a loop).
fn bucket(n: usize) -> &'static str {
    match n {
        0 => "none",
        1..=5 => "a few",
        _ => "many",
    }
}
