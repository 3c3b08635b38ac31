//! acks=all produce latency through the whole purgatory path, measured with a real client.
//!
//! Starts the broker in-process with its two embedded followers (fetching over loopback,
//! long-polling), then sends messages one at a time from a librdkafka producer with
//! `linger.ms=0` and times each delivery report. An acks=all delivery needs: the produce,
//! the append, the followers' parked fetches completing, both followers fetching again at
//! their new log end (which moves the HW), and the DelayedProduce completing.
//!
//!     cargo bench -p purgatory --bench produce_latency -- [--messages N]
//!
//! Prints one line per acks setting: `produce-latency acks=all n=… p50_us=… p99_us=… max_us=…`.

use std::time::{Duration, Instant};

use followersim::FollowerConfig;
use hdrhistogram::Histogram;
use purgatory::config::BrokerConfig;
use purgatory::followers::EmbeddedFollowers;
use purgatory::Broker;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;

async fn measure(bootstrap: &str, topic: &str, acks: &str, messages: usize) -> Histogram<u64> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", acks)
        .set("linger.ms", "0")
        .set("enable.idempotence", "false")
        .create()
        .expect("producer");
    let payload = vec![b'p'; 100];
    // Warm up: connections, metadata, topic creation, followers discovering the topic.
    for _ in 0..50 {
        producer
            .send(
                FutureRecord::<(), _>::to(topic).payload(&payload),
                Timeout::Never,
            )
            .await
            .expect("warm-up");
    }
    let mut histogram = Histogram::<u64>::new(3).expect("histogram");
    for _ in 0..messages {
        let start = Instant::now();
        producer
            .send(
                FutureRecord::<(), _>::to(topic).payload(&payload),
                Timeout::Never,
            )
            .await
            .expect("delivered");
        histogram
            .record(start.elapsed().as_micros() as u64)
            .expect("record");
    }
    histogram
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let messages = args
        .iter()
        .position(|a| a == "--messages")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(5000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let config = BrokerConfig {
            listen: "127.0.0.1:0".into(),
            ..BrokerConfig::default()
        };
        let broker = Broker::start(config).await.expect("broker");
        let bootstrap = broker.local_addr().to_string();
        let followers = EmbeddedFollowers::start_for(
            broker.replica_manager(),
            &bootstrap,
            &[2, 3],
            &FollowerConfig::default(),
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        for acks in ["all", "1"] {
            let topic = format!("latency-acks-{acks}");
            let h = measure(&bootstrap, &topic, acks, messages).await;
            println!(
                "produce-latency acks={acks} n={} p50_us={} p90_us={} p99_us={} max_us={}",
                h.len(),
                h.value_at_quantile(0.5),
                h.value_at_quantile(0.9),
                h.value_at_quantile(0.99),
                h.max()
            );
        }
        followers.shutdown().await;
        broker.shutdown();
    });
}
