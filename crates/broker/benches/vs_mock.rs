//! acks=all through the whole purgatory path against librdkafka's own mock cluster.
//!
//! Issue 9, section 3: with the same librdkafka producer settings and 100-byte values, our
//! broker with its two embedded followers (replicating over the Kafka protocol, acks=all
//! waiting for both) should reach at least the throughput of `rdkafka::mocking::MockCluster`
//! (which ignores acks and replicates nothing), and a sequential p50 within 1.5x of it,
//! p99 within 2x.
//!
//!     cargo bench -p purgatory --bench vs_mock -- [--rounds N] [--messages N]
//!         [--latency-messages N] [--workers N | --current-thread] [--binary PATH]
//!         [--only throughput|latency]
//!
//! Each round measures, interleaved (the side that goes first alternates per round):
//! - **throughput**: `--messages` (200k) messages of 100 bytes, `linger.ms=5`, produced as
//!   fast as librdkafka takes them; the time runs from the first send until every delivery
//!   report is in;
//! - **latency**: `--latency-messages` (3000) messages of 100 bytes sent one at a time,
//!   `linger.ms=0`, each timed from the send until its delivery report; p50/p90/p99.
//!
//! Both sides use the same client code: a librdkafka `ThreadedProducer` driven from a plain
//! thread (not a tokio task), a fresh producer and topic per measurement, warmed up first.
//! Only `bootstrap.servers` differs. The mock cluster runs on librdkafka's own thread. Our
//! broker runs in this process on the tokio runtime `purgatory serve` uses
//! ([`purgatory::server::runtime`]) unless `--workers`/`--current-thread` says otherwise,
//! with its followers started exactly as `serve` starts them. `--binary
//! target/release/purgatory` also measures the real binary as its own process (what users
//! run; it logs at its default level, to /dev/null).
//!
//! Output: one line per side and round, then the medians over rounds and the ratios
//! (ours/mock) against the targets.

use std::net::TcpListener as StdListener;
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
    producer
        .flush(Duration::from_secs(120))
        .expect("flush within 120 s");
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
    name: &'static str,
    bootstrap: String,
    /// The mock does not auto-create topics the way we do: it gets them made for it.
    mock: Option<MockCluster<'static, rdkafka::producer::DefaultProducerContext>>,
}

impl Side {
    fn topic(&self, kind: &str, round: usize) -> String {
        let topic = format!("bench-{kind}-{round}");
        if let Some(mock) = &self.mock {
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
    workers: Option<usize>,
    current_thread: bool,
    binary: Option<String>,
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
            .map(|v| v.parse().unwrap_or_else(|_| panic!("{name} takes a number")))
            .unwrap_or(default)
    };
    let only = value("--only");
    Args {
        rounds: number("--rounds", 5),
        messages: number("--messages", 200_000),
        latency_messages: number("--latency-messages", 3000),
        workers: value("--workers").map(|v| v.parse().expect("--workers takes a number")),
        current_thread: args.iter().any(|a| a == "--current-thread"),
        binary: value("--binary"),
        throughput: only.as_deref() != Some("latency"),
        latency: only.as_deref() != Some("throughput"),
    }
}

/// The real binary as its own process, on a free port, no admin API.
fn spawn_binary(path: &str) -> (Child, String) {
    let port = StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let addr = format!("127.0.0.1:{port}");
    let child = Command::new(path)
        .args(["serve", "--listen", &addr, "--no-admin"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {path}: {e}"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(Instant::now() < deadline, "{path} did not start listening");
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, addr)
}

fn main() {
    let args = parse_args();
    let runtime = if args.current_thread {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    } else if let Some(n) = args.workers {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .enable_all()
            .build()
            .expect("runtime")
    } else {
        purgatory::server::runtime().expect("runtime")
    };
    let runtime_desc = if args.current_thread {
        "current-thread".to_string()
    } else {
        format!(
            "multi-thread, {} workers{}",
            args.workers
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
            if args.workers.is_none() {
                " (as `purgatory serve`)"
            } else {
                ""
            }
        )
    };

    // Ours, started as `purgatory serve` starts it (server.rs, main.rs), on its own thread
    // that stays inside `block_on` like `serve`'s main thread does (a current-thread
    // runtime only runs while someone is in `block_on`).
    let (addr_tx, addr_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let broker_thread = std::thread::spawn(move || {
        runtime.block_on(async {
            let config = BrokerConfig {
                listen: "127.0.0.1:0".into(),
                ..BrokerConfig::default()
            };
            let broker = Broker::start(config).await.expect("broker");
            let rm = broker.replica_manager().clone();
            let template = FollowerConfig {
                fetch_max_wait_ms: rm.config.follower_fetch_max_wait_ms,
                fetch_delay_ms: rm.config.follower_fetch_delay_ms,
                ..FollowerConfig::default()
            };
            let bootstrap = format!("127.0.0.1:{}", broker.local_addr().port());
            let followers = EmbeddedFollowers::start_for(&rm, &bootstrap, &[2, 3], &template);
            addr_tx.send(bootstrap).expect("main thread");
            let _ = stop_rx.await;
            followers.shutdown().await;
            broker.shutdown();
        });
    });
    let ours = addr_rx.recv().expect("broker started");
    let mock = MockCluster::new(1).expect("mock cluster");
    let mut sides = vec![
        Side {
            name: "ours",
            bootstrap: ours,
            mock: None,
        },
        Side {
            name: "mock",
            bootstrap: mock.bootstrap_servers(),
            mock: Some(mock),
        },
    ];
    let mut child = None;
    if let Some(path) = &args.binary {
        let (c, addr) = spawn_binary(path);
        child = Some(c);
        sides.push(Side {
            name: "ours-process",
            bootstrap: addr,
            mock: None,
        });
    }
    println!(
        "vs_mock: {} round(s); throughput {} x {VALUE_BYTES} B, linger.ms=5; latency {} sequential, linger.ms=0; acks=all; ours: broker + 2 embedded followers, tokio {runtime_desc}",
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
                let side = &sides[i];
                let topic = side.topic("throughput", round);
                let rate = throughput(&side.bootstrap, &topic, args.messages);
                println!(
                    "round {round} {:<12} throughput {:>9.0} msg/s",
                    side.name, rate
                );
                results[i].throughput.push(rate);
            }
        }
        if args.latency {
            for &i in &order {
                let side = &sides[i];
                let topic = side.topic("latency", round);
                let h = latency(&side.bootstrap, &topic, args.latency_messages);
                let (p50, p90, p99) = (
                    h.value_at_quantile(0.5),
                    h.value_at_quantile(0.9),
                    h.value_at_quantile(0.99),
                );
                println!(
                    "round {round} {:<12} latency p50 {p50:>5} us  p90 {p90:>5} us  p99 {p99:>5} us  max {:>6} us",
                    side.name,
                    h.max()
                );
                results[i].p50.push(p50);
                results[i].p90.push(p90);
                results[i].p99.push(p99);
            }
        }
    }

    println!("--- medians over {} round(s)", args.rounds);
    for (side, r) in sides.iter().zip(&results) {
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
    let mock_i = 1;
    for (i, side) in sides.iter().enumerate().filter(|(i, _)| *i != mock_i) {
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

    if let Some(mut c) = child {
        let _ = c.kill();
        let _ = c.wait();
    }
    let _ = stop_tx.send(());
    broker_thread.join().expect("broker thread");
}
