//! acks=all through the whole purgatory path against librdkafka's own mock cluster.
//!
//! With the same librdkafka producer settings and 100-byte values, it compares our broker
//! with its two embedded followers (replicating over the Kafka protocol, acks=all waiting
//! for both) with `rdkafka::mocking::MockCluster` (which ignores acks and replicates
//! nothing): throughput, and sequential latency. The goals and the latest figures are in
//! docs/performance.md.
//!
//!     cargo bench -p purgatory --bench vs_mock -- [--rounds N] [--messages N]
//!         [--latency-messages N] [--only throughput|latency] [--variants LIST]
//!         [--binary [LABEL=]PATH,...] [--no-mock | --no-ours]
//!
//! Each round measures every side, interleaved (the order reverses every other round):
//! - **throughput**: `--messages` (200k) messages of 100 bytes, `linger.ms=5`, produced as
//!   fast as librdkafka takes them; the time runs from the first send until every delivery
//!   report is in;
//! - **latency**: `--latency-messages` (3000) messages of 100 bytes sent one at a time,
//!   `linger.ms=0`, each timed from the send until its delivery report; p50/p90/p99.
//!
//! Both sides use the same client code: a librdkafka `ThreadedProducer` driven from a plain
//! thread (not a tokio task), `acks=all`, a fresh producer and topic per measurement,
//! warmed up with 200 sequential messages first. Only `bootstrap.servers` differs. The mock
//! cluster (one broker) runs on librdkafka's own thread.
//!
//! Ours is `Broker::start` plus `EmbeddedFollowers::start_for` with the follower settings
//! `purgatory serve` gives them, on the tokio runtime `serve` uses
//! ([`purgatory::server::runtime`]), driven by a thread of its own that sits in `block_on`
//! as `serve`'s main thread does. `--variants` runs several of ours side by side, for
//! comparing runtime set-ups in one run: a comma-separated list of `serve` (the default),
//! `ct` (current-thread runtime), `mtN` (multi-thread, N workers), each optionally with
//! `+ft` (the followers on a current-thread runtime and thread of their own). `--binary
//! target/release/purgatory` also measures the real binary as its own process (what users
//! run, logging at its default level to /dev/null); a comma-separated list of
//! `LABEL=PATH` measures several builds side by side, e.g. the commit before a change and
//! after it: `--binary before=/tmp/purgatory-before,after=target/release/purgatory`. `--no-mock` and `--no-ours` skip a side (for profiling one).
//!
//! Output: one line per side and round, then the medians over rounds and the ratios
//! (ours/mock) against the targets: the median of the per-round ratios (each round's sides
//! ran back to back, so this one cancels most of the machine's drift) and the ratio of the
//! medians.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use followersim::FollowerConfig;
use hdrhistogram::Histogram;
use purgatory::config::BrokerConfig;
use purgatory::followers::EmbeddedFollowers;
use purgatory::Broker;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;

const VALUE_BYTES: usize = 100;
const WARM_UP: usize = 200;

/// Counts delivery reports and hands each one to whoever waits for it.
struct Deliveries {
    ok: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
    /// Signalled on every delivery report (the latency loop waits on it).
    tx: Mutex<mpsc::Sender<()>>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => {
                self.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err((e, _)) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                self.first_error
                    .lock()
                    .unwrap()
                    .get_or_insert_with(|| e.to_string());
            }
        }
        let _ = self.tx.lock().unwrap().send(());
    }
}

/// The producer settings both sides get; only the bootstrap address differs.
fn producer(bootstrap: &str, linger_ms: u32) -> (ThreadedProducer<Deliveries>, mpsc::Receiver<()>) {
    let (tx, rx) = mpsc::channel();
    let context = Deliveries {
        ok: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        first_error: Mutex::new(None),
        tx: Mutex::new(tx),
    };
    let producer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("linger.ms", linger_ms.to_string())
        .set("enable.idempotence", "false")
        .create_with_context(context)
        .expect("producer");
    (producer, rx)
}

fn send_one(producer: &ThreadedProducer<Deliveries>, topic: &str, value: &[u8]) {
    let mut record = BaseRecord::<(), [u8]>::to(topic).payload(value);
    loop {
        match producer.send(record) {
            Ok(()) => return,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                // librdkafka's queue is full: let its threads drain it.
                record = r;
                std::thread::sleep(Duration::from_micros(200));
            }
            Err((e, _)) => panic!("send failed: {e}"),
        }
    }
}

fn check_all_delivered(producer: &ThreadedProducer<Deliveries>, expected: u64, what: &str) {
    let ctx = producer.context();
    let failed = ctx.failed.load(Ordering::Relaxed);
    let ok = ctx.ok.load(Ordering::Relaxed);
    assert!(
        failed == 0 && ok == expected,
        "{what}: {ok} delivered, {failed} failed of {expected} (first error: {:?})",
        ctx.first_error.lock().unwrap()
    );
}

/// Sends `WARM_UP` messages one by one: connections, metadata, topic creation, and (on our
/// side) the followers discovering the topic are all done before the clock starts.
fn warm_up(producer: &ThreadedProducer<Deliveries>, rx: &mpsc::Receiver<()>, topic: &str) {
    let value = vec![b'w'; VALUE_BYTES];
    for _ in 0..WARM_UP {
        send_one(producer, topic, &value);
        rx.recv_timeout(Duration::from_secs(30))
            .expect("warm-up delivery");
    }
}

/// Messages per second for `messages` messages with `linger.ms=5`.
fn throughput(bootstrap: &str, topic: &str, messages: usize) -> f64 {
    let (producer, rx) = producer(bootstrap, 5);
    warm_up(&producer, &rx, topic);
    let value = vec![b't'; VALUE_BYTES];
    let start = Instant::now();
    for _ in 0..messages {
        send_one(&producer, topic, &value);
    }
    // Wait for the delivery reports themselves rather than with `flush`: rdkafka's `flush`
    // polls in slices of 100 ms (its `poll` returns only at the end of its timeout), which
    // would round every measurement up to the next 100 ms.
    for _ in 0..messages {
        rx.recv_timeout(Duration::from_secs(120))
            .expect("every delivery report within 120 s");
    }
    let elapsed = start.elapsed();
    check_all_delivered(&producer, (WARM_UP + messages) as u64, "throughput");
    messages as f64 / elapsed.as_secs_f64()
}

/// Latency of `messages` sequential sends (one in flight, `linger.ms=0`), in µs.
fn latency(bootstrap: &str, topic: &str, messages: usize) -> Histogram<u64> {
    let (producer, rx) = producer(bootstrap, 0);
    warm_up(&producer, &rx, topic);
    let value = vec![b'l'; VALUE_BYTES];
    let mut histogram = Histogram::<u64>::new(3).expect("histogram");
    for _ in 0..messages {
        let start = Instant::now();
        send_one(&producer, topic, &value);
        rx.recv_timeout(Duration::from_secs(30)).expect("delivery");
        histogram
            .record(start.elapsed().as_nanos() as u64 / 1000)
            .expect("record");
    }
    check_all_delivered(&producer, (WARM_UP + messages) as u64, "latency");
    histogram
}

/// One side under test: where to connect, and how to make a topic there.
struct Side {
    name: String,
    bootstrap: String,
    /// The mock does not auto-create topics the way we do: it gets them made for it.
    mock: Option<MockCluster<'static, rdkafka::producer::DefaultProducerContext>>,
    /// A broker running as its own process: its CPU time is reported per message.
    pid: Option<u32>,
}

/// CPU time the process has used so far, all threads, in nanoseconds (from
/// `/proc/PID/task/*/schedstat`, whose first field is the thread's time on a CPU).
fn process_cpu_ns(pid: u32) -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// The broker's CPU per message over a measurement, as text for the round's line.
fn cpu_per_message(side: &Side, before: Option<u64>, messages: usize) -> String {
    match (side.pid.and_then(process_cpu_ns), before) {
        (Some(after), Some(before)) => format!(
            "  broker cpu {:>5.1} us/msg",
            (after - before) as f64 / 1e3 / (messages + WARM_UP) as f64
        ),
        _ => String::new(),
    }
}

impl Side {
    /// The topic for one kind of measurement: the same one every round (as a user's
    /// benchmark would), so that later rounds do not find more partitions than earlier
    /// ones (each follower fetch covers all of them). One partition.
    fn topic(&self, kind: &str, round: usize) -> String {
        let topic = format!("bench-{kind}");
        if let (Some(mock), 0) = (&self.mock, round) {
            mock.create_topic(&topic, 1, 1).expect("mock topic");
        }
        topic
    }
}

#[derive(Default)]
struct Results {
    throughput: Vec<f64>,
    p50: Vec<u64>,
    p90: Vec<u64>,
    p99: Vec<u64>,
}

fn median<T: Copy + PartialOrd>(values: &[T]) -> Option<T> {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    // Upper median for an even count keeps integer figures integers.
    v.get(v.len() / 2).copied()
}

struct Args {
    rounds: usize,
    messages: usize,
    latency_messages: usize,
    variants: Vec<String>,
    /// `(label, path)` of each binary to run as its own process.
    binaries: Vec<(String, String)>,
    no_mock: bool,
    no_ours: bool,
    throughput: bool,
    latency: bool,
}

fn parse_args() -> Args {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let number = |name: &str, default: usize| {
        value(name)
            .map(|v| {
                v.parse()
                    .unwrap_or_else(|_| panic!("{name} takes a number"))
            })
            .unwrap_or(default)
    };
    let only = value("--only");
    Args {
        rounds: number("--rounds", 5),
        messages: number("--messages", 200_000),
        latency_messages: number("--latency-messages", 3000),
        variants: value("--variants")
            .unwrap_or_else(|| "serve".into())
            .split(',')
            .map(str::to_string)
            .collect(),
        binaries: value("--binary")
            .map(|list| {
                let many = list.contains(',');
                list.split(',')
                    .map(|item| match item.split_once('=') {
                        Some((label, path)) => (label.to_string(), path.to_string()),
                        None if many => (item.to_string(), item.to_string()),
                        None => ("ours-process".to_string(), item.to_string()),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        no_mock: args.iter().any(|a| a == "--no-mock"),
        no_ours: args.iter().any(|a| a == "--no-ours"),
        throughput: only.as_deref() != Some("latency"),
        latency: only.as_deref() != Some("throughput"),
    }
}

/// The real binary as its own process, no admin API, on a port the kernel picks: the
/// binary announces it as one JSON line on stdout once it serves, so a build to compare
/// must be one with that announcement (`--ready-file`'s, from the same commit on).
fn spawn_binary(path: &str) -> (Child, String) {
    let mut child = Command::new(path)
        .args(["serve", "--listen", "127.0.0.1:0", "--no-admin"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {path}: {e}"));
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
        .unwrap_or_else(|e| panic!("reading {path}'s ready line: {e}"));
    let ready: serde_json::Value = serde_json::from_str(&line)
        .unwrap_or_else(|e| panic!("{path} did not announce its listener ({e}): {line:?}"));
    let addr = ready["bootstrap"]
        .as_str()
        .unwrap_or_else(|| panic!("{path}'s ready line has no bootstrap: {line:?}"))
        .to_string();
    (child, addr)
}

/// How our broker is run: which tokio runtime, and where the embedded followers run.
#[derive(Clone)]
struct Variant {
    /// `None`: [`purgatory::server::runtime`], what `purgatory serve` uses.
    runtime: Option<RuntimeSpec>,
    /// Followers on a runtime of their own (one current-thread runtime on its own thread).
    followers_apart: bool,
}

#[derive(Clone, Copy)]
enum RuntimeSpec {
    CurrentThread,
    MultiThread(usize),
}

impl Variant {
    fn parse(spec: &str) -> Variant {
        let (rt, apart) = match spec.strip_suffix("+ft") {
            Some(rt) => (rt, true),
            None => (spec, false),
        };
        let runtime = match rt {
            "serve" => None,
            "ct" => Some(RuntimeSpec::CurrentThread),
            mt => Some(RuntimeSpec::MultiThread(
                mt.strip_prefix("mt")
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| {
                        panic!("variant {spec:?}: serve, ct or mtN, optionally +ft")
                    }),
            )),
        };
        Variant {
            runtime,
            followers_apart: apart,
        }
    }

    fn build(runtime: Option<RuntimeSpec>) -> tokio::runtime::Runtime {
        match runtime {
            None => purgatory::server::runtime(),
            Some(RuntimeSpec::CurrentThread) => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build(),
            Some(RuntimeSpec::MultiThread(n)) => tokio::runtime::Builder::new_multi_thread()
                .worker_threads(n)
                .enable_all()
                .build(),
        }
        .expect("runtime")
    }
}

/// What stops one runtime thread of ours: send, then join.
type Stop = (
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<()>,
);

/// Our broker and its two followers, started as `purgatory serve` starts them (server.rs,
/// main.rs), each runtime on a thread of its own that stays inside `block_on` like
/// `serve`'s main thread does (a current-thread runtime only runs while someone is in
/// `block_on`). Returns the bootstrap address and what stops it.
fn start_ours(variant: &Variant) -> (String, Vec<Stop>) {
    let mut stops = Vec::new();
    let (tx, rx) = mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let v = variant.clone();
    let broker_thread = std::thread::spawn(move || {
        let runtime = Variant::build(v.runtime);
        runtime.block_on(async {
            let config = BrokerConfig {
                listen: "127.0.0.1:0".into(),
                ..BrokerConfig::default()
            };
            let broker = Broker::start(config).await.expect("broker");
            let rm = broker.replica_manager().clone();
            let bootstrap = format!("127.0.0.1:{}", broker.local_addr().port());
            let followers = if v.followers_apart {
                None
            } else {
                Some(start_followers(&rm, &bootstrap))
            };
            tx.send((bootstrap, rm)).expect("main thread");
            let _ = stop_rx.await;
            if let Some(f) = followers {
                f.shutdown().await;
            }
            broker.shutdown();
        });
    });
    let (bootstrap, rm) = rx.recv().expect("broker started");
    stops.push((stop_tx, broker_thread));
    if variant.followers_apart {
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let b = bootstrap.clone();
        let thread = std::thread::spawn(move || {
            let runtime = Variant::build(Some(RuntimeSpec::CurrentThread));
            runtime.block_on(async {
                let followers = start_followers(&rm, &b);
                let _ = stop_rx.await;
                followers.shutdown().await;
            });
        });
        stops.insert(0, (stop_tx, thread));
    }
    (bootstrap, stops)
}

/// The two embedded followers, configured as `serve` configures them.
fn start_followers(
    rm: &std::sync::Arc<purgatory::replica_manager::ReplicaManager>,
    bootstrap: &str,
) -> EmbeddedFollowers {
    let template = FollowerConfig {
        fetch_max_wait_ms: rm.config.follower_fetch_max_wait_ms,
        fetch_delay_ms: rm.config.follower_fetch_delay_ms,
        ..FollowerConfig::default()
    };
    EmbeddedFollowers::start_for(rm, bootstrap, &[2, 3], &template)
}

fn main() {
    let args = parse_args();
    let mut sides = Vec::new();
    let mut stops = Vec::new();
    for spec in &args.variants {
        let (bootstrap, s) = start_ours(&Variant::parse(spec));
        stops.extend(s);
        sides.push(Side {
            name: if args.variants.len() == 1 {
                "ours".to_string()
            } else {
                format!("ours[{spec}]")
            },
            bootstrap,
            mock: None,
            pid: None,
        });
    }
    let mock = MockCluster::new(1).expect("mock cluster");
    let mock_i = sides.len();
    sides.push(Side {
        name: "mock".to_string(),
        bootstrap: mock.bootstrap_servers(),
        mock: Some(mock),
        pid: None,
    });
    let mut children = Vec::new();
    for (label, path) in &args.binaries {
        let (c, addr) = spawn_binary(path);
        sides.push(Side {
            name: label.clone(),
            bootstrap: addr,
            mock: None,
            pid: Some(c.id()),
        });
        children.push(c);
    }
    println!(
        "vs_mock: {} round(s); throughput {} x {VALUE_BYTES} B, linger.ms=5; latency {} sequential, linger.ms=0; acks=all; ours: broker + 2 embedded followers on `purgatory::server::runtime()` (current-thread) unless --variants says otherwise",
        args.rounds, args.messages, args.latency_messages
    );

    let mut results: Vec<Results> = sides.iter().map(|_| Results::default()).collect();
    for round in 0..args.rounds {
        // Alternate which side goes first, so neither always runs on a warmer machine.
        let mut order: Vec<usize> = (0..sides.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        if args.throughput {
            for &i in &order {
                if (args.no_mock && i == mock_i) || (args.no_ours && i != mock_i) {
                    continue;
                }
                let side = &sides[i];
                let topic = side.topic("throughput", round);
                let cpu_before = side.pid.and_then(process_cpu_ns);
                let rate = throughput(&side.bootstrap, &topic, args.messages);
                println!(
                    "round {round} {:<12} throughput {:>9.0} msg/s{}",
                    side.name,
                    rate,
                    cpu_per_message(side, cpu_before, args.messages)
                );
                results[i].throughput.push(rate);
            }
        }
        if args.latency {
            for &i in &order {
                if (args.no_mock && i == mock_i) || (args.no_ours && i != mock_i) {
                    continue;
                }
                let side = &sides[i];
                let topic = side.topic("latency", round);
                let cpu_before = side.pid.and_then(process_cpu_ns);
                let h = latency(&side.bootstrap, &topic, args.latency_messages);
                let (p50, p90, p99) = (
                    h.value_at_quantile(0.5),
                    h.value_at_quantile(0.9),
                    h.value_at_quantile(0.99),
                );
                println!(
                    "round {round} {:<12} latency p50 {p50:>5} us  p90 {p90:>5} us  p99 {p99:>5} us  max {:>6} us{}",
                    side.name,
                    h.max(),
                    cpu_per_message(side, cpu_before, args.latency_messages)
                );
                results[i].p50.push(p50);
                results[i].p90.push(p90);
                results[i].p99.push(p99);
            }
        }
    }

    println!("--- medians over {} round(s)", args.rounds);
    for (side, r) in sides
        .iter()
        .zip(&results)
        .filter(|(s, _)| !(args.no_mock && s.mock.is_some() || args.no_ours && s.mock.is_none()))
    {
        let mut line = format!("{:<12}", side.name);
        if let Some(t) = median(&r.throughput) {
            line += &format!(" throughput {t:>9.0} msg/s");
        }
        if let (Some(p50), Some(p90), Some(p99)) = (median(&r.p50), median(&r.p90), median(&r.p99))
        {
            line += &format!("  latency p50 {p50:>5} us  p90 {p90:>5} us  p99 {p99:>5} us");
        }
        println!("{line}");
    }
    for (i, side) in sides
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != mock_i && !args.no_mock && !args.no_ours)
    {
        let ratio = |ours: &[f64], mock: &[f64]| -> Option<(f64, f64)> {
            // The median of the per-round ratios (each round's sides ran back to back),
            // and the ratio of the medians.
            let per_round: Vec<f64> = ours.iter().zip(mock).map(|(o, m)| o / m).collect();
            Some((median(&per_round)?, median(ours)? / median(mock)?))
        };
        let f = |v: &[u64]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
        let (ours, mock) = (&results[i], &results[mock_i]);
        let verdict = |ok: bool| if ok { "ok" } else { "MISSED" };
        if let Some((r, m)) = ratio(&ours.throughput, &mock.throughput) {
            println!(
                "{} / mock throughput: {r:.2}x (median of per-round ratios; ratio of medians {m:.2}x)  target >= 1.0x  {}",
                side.name,
                verdict(r >= 1.0)
            );
        }
        if let Some((r, m)) = ratio(&f(&ours.p50), &f(&mock.p50)) {
            println!(
                "{} / mock latency p50: {r:.2}x (ratio of medians {m:.2}x)  target <= 1.5x  {}",
                side.name,
                verdict(r <= 1.5)
            );
        }
        if let Some((r, m)) = ratio(&f(&ours.p99), &f(&mock.p99)) {
            println!(
                "{} / mock latency p99: {r:.2}x (ratio of medians {m:.2}x)  target <= 2.0x  {}",
                side.name,
                verdict(r <= 2.0)
            );
        }
    }

    for mut c in children {
        let _ = c.kill();
        let _ = c.wait();
    }
    for (stop, thread) in stops {
        let _ = stop.send(());
        thread.join().expect("broker thread");
    }
}
