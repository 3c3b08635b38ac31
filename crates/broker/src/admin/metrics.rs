//! `GET /metrics`: the broker's metrics in Prometheus' text format, under the names
//! Prometheus' jmx_exporter gives Kafka's JMX MBeans with its example Kafka rules
//! (`kafka-2_0_0.yml`, `kafka-kraft-3_0_0.yml`), with the same labels.
//!
//! How those rules name things, and so how the names here are made:
//! - a gauge `kafka.<domain>:type=<T>,name=<N>[,k=v[,k2=v2]]`, attribute `Value`, becomes
//!   `kafka_<domain>_<t>_<n>{k="v",...}`, lowercased;
//! - a meter whose name ends in `PerSec`, attribute `Count`, becomes the counter
//!   `kafka_<domain>_<t>_<n without PerSec>_total`;
//! - a histogram's `50thPercentile` ... `999thPercentile` become the gauge
//!   `kafka_<domain>_<t>_<n>{...,quantile="0.50"}` ... `quantile="0.999"`, and its `Count`
//!   `kafka_<domain>_<t>_<n>_count` (the rules' "emulated summary", without `_sum`).
//!   The `_count` series is exported untyped: the Prometheus client library only writes
//!   counters with a `_total` suffix, and the name is what queries use.
//!
//! Purgatory gauges are read from `/api/state`'s `purgatories` object, whatever purgatories
//! it lists (Produce, Fetch, and the group coordinator's Rebalance and Heartbeat); partition
//! gauges from its `partitions`; the timing wheel's own metrics (no Kafka counterpart: Kafka
//! exposes nothing of its `SystemTimer`) from its `timer`. Request metrics and
//! expirations come from the counters the request path updates ([`crate::telemetry`]).
//! The text is written by the `prometheus-client` crate.

use std::fmt;
use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{prometheus_text, DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use serde_json::Value;

use super::AdminState;
use crate::telemetry::metrics::{Phase, VERSIONS};

/// Kafka's histogram percentiles, as jmx_exporter's rules label them.
const QUANTILES: [(f64, &str); 6] = [
    (0.50, "0.50"),
    (0.75, "0.75"),
    (0.95, "0.95"),
    (0.98, "0.98"),
    (0.99, "0.99"),
    (0.999, "0.999"),
];

/// `GET /metrics`.
pub async fn get_metrics(State(s): State<AdminState>) -> Response {
    match render(&s) {
        Ok(text) => ([(CONTENT_TYPE, prometheus_text::CONTENT_TYPE)], text).into_response(),
        Err(e) => super::error(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding metrics failed: {e}"),
        ),
    }
}

/// The metrics text.
pub fn render(s: &AdminState) -> Result<String, fmt::Error> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Kafka(s.clone())));
    let mut text = String::new();
    prometheus_text::encode(&mut text, &registry)?;
    Ok(text)
}

/// Reads everything at scrape time.
struct Kafka(AdminState);

impl fmt::Debug for Kafka {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KafkaMetrics")
    }
}

type Labels = Vec<(&'static str, String)>;

/// Writes one metric family: its descriptor, then one sample per label set.
struct Family<'e, 'a> {
    encoder: &'e mut DescriptorEncoder<'a>,
}

impl Family<'_, '_> {
    fn gauge<V: prometheus_client::encoding::EncodeGaugeValue>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (Labels, V)>,
    ) -> fmt::Result {
        self.write(name, help, MetricType::Gauge, samples)
    }

    fn untyped<V: prometheus_client::encoding::EncodeGaugeValue>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (Labels, V)>,
    ) -> fmt::Result {
        self.write(name, help, MetricType::Unknown, samples)
    }

    fn write<V: prometheus_client::encoding::EncodeGaugeValue>(
        &mut self,
        name: &str,
        help: &str,
        kind: MetricType,
        samples: impl IntoIterator<Item = (Labels, V)>,
    ) -> fmt::Result {
        let mut metric = self.encoder.encode_descriptor(name, help, None, kind)?;
        for (labels, value) in samples {
            metric.encode_family(&labels)?.encode_gauge(&value)?;
        }
        Ok(())
    }

    /// A counter; the encoder adds the `_total` suffix to `name`.
    fn counter(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (Labels, u64)>,
    ) -> fmt::Result {
        let mut metric = self
            .encoder
            .encode_descriptor(name, help, None, MetricType::Counter)?;
        for (labels, value) in samples {
            metric
                .encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(&value, None::<&Exemplar<NoLabelSet, u64>>)?;
        }
        Ok(())
    }
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

fn tp_labels(p: &Value) -> Labels {
    vec![
        ("topic", p["topic"].as_str().unwrap_or("").to_string()),
        ("partition", int(&p["partition"]).to_string()),
    ]
}

impl Collector for Kafka {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let s = &self.0;
        let state = super::admin_state_json(s);
        let telemetry = &s.rm.telemetry;
        let metrics = &telemetry.metrics;
        let mut f = Family {
            encoder: &mut encoder,
        };

        // kafka.server:type=DelayedOperationPurgatory,name=...,delayedOperation=<purgatory>
        // Every purgatory listed, whatever its name; one that does not exist yet is null.
        let purgatories: Vec<&Value> = state["purgatories"]
            .as_object()
            .map(|m| m.values().filter(|p| p.is_object()).collect())
            .unwrap_or_default();
        let by_purgatory = |field: &str| -> Vec<(Labels, i64)> {
            purgatories
                .iter()
                .map(|p| {
                    let name = p["name"].as_str().unwrap_or("").to_string();
                    (vec![("delayedOperation", name)], int(&p[field]))
                })
                .collect()
        };
        f.gauge(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize: watcher-list entries (an operation counts once per key it watches, until purged)",
            by_purgatory("watched"),
        )?;
        f.gauge(
            "kafka_server_delayedoperationpurgatory_numdelayedoperations",
            "kafka.server:type=DelayedOperationPurgatory,name=NumDelayedOperations: operations whose timeout is pending",
            by_purgatory("delayed"),
        )?;

        // kafka.server:type=DelayedProduceMetrics,name=ExpiresPerSec[,topic=,partition=]
        let mut produce_expired = vec![(
            Labels::new(),
            metrics.produce_expired.load(Ordering::Relaxed),
        )];
        for (tp, n) in metrics.produce_expirations_by_partition() {
            produce_expired.push((
                vec![
                    ("topic", tp.topic.to_string()),
                    ("partition", tp.partition.to_string()),
                ],
                n,
            ));
        }
        f.counter(
            "kafka_server_delayedproducemetrics_expires",
            "kafka.server:type=DelayedProduceMetrics,name=ExpiresPerSec: partitions of acks=all produces that timed out",
            produce_expired,
        )?;
        // kafka.server:type=DelayedFetchMetrics,name=ExpiresPerSec,fetcherType=follower|consumer
        f.counter(
            "kafka_server_delayedfetchmetrics_expires",
            "kafka.server:type=DelayedFetchMetrics,name=ExpiresPerSec: parked fetches answered at max_wait_ms",
            [
                (
                    vec![("fetcherType", "follower".to_string())],
                    metrics.fetch_expired_follower.load(Ordering::Relaxed),
                ),
                (
                    vec![("fetcherType", "consumer".to_string())],
                    metrics.fetch_expired_consumer.load(Ordering::Relaxed),
                ),
            ],
        )?;

        // kafka.network:type=RequestMetrics,name=RequestsPerSec,request=<name>,version=<v>
        let requests: Vec<_> = metrics.requests().collect();
        let mut per_version = Vec::new();
        for (name, m) in &requests {
            for v in 0..VERSIONS {
                let n = m.versions[v].load(Ordering::Relaxed);
                if n > 0 {
                    per_version.push((
                        vec![("request", name.name()), ("version", v.to_string())],
                        n,
                    ));
                }
            }
        }
        f.counter(
            "kafka_network_requestmetrics_requests",
            "kafka.network:type=RequestMetrics,name=RequestsPerSec: requests answered, per request name and version",
            per_version,
        )?;
        // kafka.network:type=RequestMetrics,name=<Phase>,request=<name>: percentiles, Count
        let qs: Vec<f64> = QUANTILES.iter().map(|(q, _)| *q).collect();
        for phase in Phase::ALL {
            let kafka = phase.kafka_name();
            let base = format!("kafka_network_requestmetrics_{}", kafka.to_lowercase());
            let mut quantiles = Vec::new();
            let mut counts = Vec::new();
            for (name, m) in &requests {
                let h = &m.phases[phase as usize];
                for ((_, label), value) in QUANTILES.iter().zip(h.quantiles_ms(&qs)) {
                    quantiles.push((
                        vec![("request", name.name()), ("quantile", label.to_string())],
                        value,
                    ));
                }
                counts.push((vec![("request", name.name())], h.count()));
            }
            f.gauge(
                &base,
                &format!("kafka.network:type=RequestMetrics,name={kafka}: percentiles in ms, since the broker started"),
                quantiles,
            )?;
            f.untyped(
                &format!("{base}_count"),
                &format!("kafka.network:type=RequestMetrics,name={kafka}: Count"),
                counts,
            )?;
        }

        // kafka.server:type=ReplicaManager,...
        let partitions: Vec<&Value> = state["partitions"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let isr_len = |p: &Value| p["isr"].as_array().map_or(0, Vec::len) as i64;
        let replicas_len = |p: &Value| p["replicas"].as_array().map_or(0, Vec::len) as i64;
        let min_isr = |p: &Value| int(&p["effective_min_isr"]);
        let count = |pred: &dyn Fn(&Value) -> bool| partitions.iter().filter(|p| pred(p)).count();
        let under_replicated = count(&|p| isr_len(p) < replicas_len(p));
        let under_min_isr = count(&|p| isr_len(p) < min_isr(p));
        let at_min_isr = count(&|p| isr_len(p) == min_isr(p));
        let none = Labels::new;
        f.gauge(
            "kafka_server_replicamanager_partitioncount",
            "kafka.server:type=ReplicaManager,name=PartitionCount",
            [(none(), partitions.len())],
        )?;
        f.gauge(
            "kafka_server_replicamanager_leadercount",
            "kafka.server:type=ReplicaManager,name=LeaderCount (this broker leads every partition)",
            [(none(), partitions.len())],
        )?;
        f.gauge(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions: ISR smaller than the replica set",
            [(none(), under_replicated)],
        )?;
        f.gauge(
            "kafka_server_replicamanager_underminisrpartitioncount",
            "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount: ISR smaller than the minimum in force",
            [(none(), under_min_isr)],
        )?;
        f.gauge(
            "kafka_server_replicamanager_atminisrpartitioncount",
            "kafka.server:type=ReplicaManager,name=AtMinIsrPartitionCount: ISR exactly at the minimum in force",
            [(none(), at_min_isr)],
        )?;
        f.counter(
            "kafka_server_replicamanager_isrshrinks",
            "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec: ISR shrinks, one per partition",
            [(none(), metrics.isr_shrinks.load(Ordering::Relaxed))],
        )?;
        f.counter(
            "kafka_server_replicamanager_isrexpands",
            "kafka.server:type=ReplicaManager,name=IsrExpandsPerSec: followers rejoining an ISR",
            [(none(), metrics.isr_expands.load(Ordering::Relaxed))],
        )?;

        // kafka.cluster:type=Partition,name=...,topic=,partition=
        let per_partition = |value: &dyn Fn(&Value) -> i64| -> Vec<(Labels, i64)> {
            partitions
                .iter()
                .map(|p| (tp_labels(p), value(p)))
                .collect()
        };
        f.gauge(
            "kafka_cluster_partition_insyncreplicascount",
            "kafka.cluster:type=Partition,name=InSyncReplicasCount",
            per_partition(&|p| isr_len(p)),
        )?;
        f.gauge(
            "kafka_cluster_partition_replicascount",
            "kafka.cluster:type=Partition,name=ReplicasCount",
            per_partition(&|p| replicas_len(p)),
        )?;
        f.gauge(
            "kafka_cluster_partition_underreplicated",
            "kafka.cluster:type=Partition,name=UnderReplicated: 1 if the ISR is smaller than the replica set",
            per_partition(&|p| i64::from(isr_len(p) < replicas_len(p))),
        )?;
        f.gauge(
            "kafka_cluster_partition_underminisr",
            "kafka.cluster:type=Partition,name=UnderMinIsr",
            per_partition(&|p| i64::from(isr_len(p) < min_isr(p))),
        )?;
        f.gauge(
            "kafka_cluster_partition_atminisr",
            "kafka.cluster:type=Partition,name=AtMinIsr",
            per_partition(&|p| i64::from(isr_len(p) == min_isr(p))),
        )?;
        // kafka.log:type=Log,name=...,topic=,partition=
        f.gauge(
            "kafka_log_log_logendoffset",
            "kafka.log:type=Log,name=LogEndOffset",
            per_partition(&|p| int(&p["log_end_offset"])),
        )?;
        f.gauge(
            "kafka_log_log_logstartoffset",
            "kafka.log:type=Log,name=LogStartOffset",
            per_partition(&|p| int(&p["log_start_offset"])),
        )?;
        f.gauge(
            "kafka_log_log_size",
            "kafka.log:type=Log,name=Size: bytes held",
            per_partition(&|p| int(&p["size_bytes"])),
        )?;
        // Not a Kafka MBean: the high watermark itself, which Kafka shows only per request.
        f.gauge(
            "purgatory_partition_high_watermark",
            "The partition's high watermark (no Kafka MBean)",
            per_partition(&|p| int(&p["high_watermark"])),
        )?;

        // The timing wheel (no Kafka counterpart).
        let timer = &state["timer"];
        let levels: Vec<&Value> = timer["levels"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let buckets: Vec<&Value> = timer["buckets"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        f.gauge(
            "purgatory_timer_pending_timers",
            "Timers in the timing wheel (every purgatory's timeouts, plus the ISR check)",
            [(none(), int(&timer["pending"]))],
        )?;
        f.gauge(
            "purgatory_timer_levels",
            "Levels of the hierarchical timing wheel (overflow levels are created on demand)",
            [(none(), levels.len())],
        )?;
        let level_label = |l: &Value| vec![("level", int(&l["level"]).to_string())];
        let in_level = |l: &Value| -> (i64, i64) {
            let mine = buckets.iter().filter(|b| b["level"] == l["level"]);
            mine.fold((0, 0), |(n, e), b| (n + 1, e + int(&b["entries"])))
        };
        f.gauge(
            "purgatory_timer_buckets",
            "Non-empty buckets per wheel level (those in the bucket queue)",
            levels.iter().map(|l| (level_label(l), in_level(l).0)),
        )?;
        f.gauge(
            "purgatory_timer_bucket_timers",
            "Timers held in each wheel level's buckets",
            levels.iter().map(|l| (level_label(l), in_level(l).1)),
        )?;
        f.gauge(
            "purgatory_timer_tick_ms",
            "The bucket width of each wheel level, in ms",
            levels.iter().map(|l| (level_label(l), int(&l["tick_ms"]))),
        )?;
        for (field, help) in [
            (
                "cascaded",
                "Timers each level's bucket flushes moved down to a finer level",
            ),
            ("fired", "Timers each level's bucket flushes fired"),
        ] {
            if levels.iter().any(|l| l.get(field).is_some()) {
                f.counter(
                    &format!("purgatory_timer_{field}"),
                    help,
                    levels
                        .iter()
                        .map(|l| (level_label(l), l[field].as_u64().unwrap_or(0))),
                )?;
            }
        }
        if let Some(flushes) = timer.get("flushes_total").and_then(Value::as_u64) {
            f.counter(
                "purgatory_timer_bucket_flushes",
                "Bucket flushes (a bucket's expiration came: its timers cascaded or fired)",
                [(none(), flushes)],
            )?;
        }
        Ok(())
    }
}
