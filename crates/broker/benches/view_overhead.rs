//! What the live view and the request log cost, measured in isolation (a busy shared
//! machine makes end-to-end throughput figures too noisy to resolve a few percent; see
//! `scripts/bench_view.py` for those):
//!
//! - `hot path`: the telemetry work one acks=all produce brings, as the connection and the
//!   replica manager do it — the produce's record opened, its append noted, two follower
//!   fetch records opened and closed, two replication events, the completion noted, the
//!   record closed with its phase times into the histograms. Nanoseconds per produce.
//! - `frame`: one frame of the live view (the state with its purgatories, wheel and
//!   partitions, the newest requests with their stories, the events) built and serialised,
//!   as each open page gets up to 11 times a second. Microseconds per frame.
//!
//!     cargo bench -p purgatory --bench view_overhead

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use kafka_protocol::messages::ApiKey;
use purgatory::admin::{view, AdminState};
use purgatory::config::{BrokerConfig, ClockMode};
use purgatory::followers::EmbeddedFollowers;
use purgatory::partition::TopicPartition;
use purgatory::replica_manager::{AppendOrigin, ReplicaManager};
use purgatory::request::RequestContext;
use purgatory::telemetry::events::EventKind;
use purgatory::telemetry::{
    Cause, Outcome, Park, PartitionNote, RequestName, RequestTiming, Telemetry,
};
use replog::test_util::BatchBuilder;

fn hot_path(telemetry: &Telemetry, n: u64) -> f64 {
    let produce = RequestName::of_key(ApiKey::Produce);
    let follower = RequestName::fetch_follower();
    let ctx = RequestContext::internal("rdkafka");
    let tp = TopicPartition::new("demo", 0);
    let start = Instant::now();
    for i in 0..n as i64 {
        let now = Instant::now();
        let trace = telemetry.begin(produce, &ctx, now, 0);
        let note = PartitionNote {
            tp: tp.clone(),
            offset: i,
            last_offset: i,
            required: Some(i + 1),
            error: None,
        };
        let park = Park {
            purgatory: "Produce",
            created_ms: 0,
            deadline_ms: 30_000,
        };
        telemetry.note_produce(trace, -1, std::iter::once(note), Some(park));
        for replica in [2, 3] {
            let fetch = telemetry.begin(follower, &ctx, Instant::now(), 0);
            telemetry.record_event(
                &tp,
                0,
                EventKind::FollowerFetch {
                    replica,
                    fetch_offset: i + 1,
                    hw_before: i,
                    hw_after: i + 1,
                    request: fetch.seq(),
                    correlation_id: 1,
                },
            );
            let t = Instant::now();
            let timing = RequestTiming {
                trace: fetch,
                name: follower,
                api_version: 12,
                received: t,
                local_start: t,
                local_end: t,
            };
            telemetry.finish(&timing, None, t, Instant::now(), Outcome::Sent);
        }
        telemetry.completed(trace, Cause::Immediate, std::iter::once(None));
        let t = Instant::now();
        let timing = RequestTiming {
            trace,
            name: produce,
            api_version: 9,
            received: now,
            local_start: now,
            local_end: t,
        };
        telemetry.finish(&timing, None, t, Instant::now(), Outcome::Sent);
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

fn main() {
    // The hot path.
    let telemetry = Telemetry::default();
    hot_path(&telemetry, 20_000); // warm: the rings fill, their slots get their capacity
    let mut runs: Vec<f64> = (0..5).map(|_| hot_path(&telemetry, 200_000)).collect();
    runs.sort_by(|a, b| a.total_cmp(b));
    println!(
        "view-overhead hot-path ns_per_acks_all_produce median={:.0} min={:.0} (the produce's record, 2 follower fetch records, 2 events, histograms)",
        runs[2], runs[0]
    );

    // A frame, with a broker that has done some work: 300 produces completed by follower
    // fetches, 20 more parked.
    let rm = ReplicaManager::new(BrokerConfig {
        clock: ClockMode::Manual,
        ..BrokerConfig::default()
    });
    rm.create_topic(
        purgatory::topics::NewTopic {
            name: "demo".into(),
            partitions: 1,
            replication_factor: 3,
            configs: vec![],
        },
        false,
    )
    .unwrap();
    let mut ctx = RequestContext::internal("rdkafka");
    for i in 0..320 {
        ctx.correlation_id = i;
        ctx.trace = rm.telemetry.begin(
            RequestName::of_key(ApiKey::Produce),
            &ctx,
            Instant::now(),
            0,
        );
        rm.append_records(
            &ctx,
            30_000,
            -1,
            AppendOrigin::Client,
            vec![(TopicPartition::new("demo", 0), BatchBuilder::new(1).bytes())],
            Box::new(|_| {}),
        );
        if i < 300 {
            for replica in [2, 3] {
                let params = purgatory::delayed::FetchParams {
                    replica_id: replica,
                    max_wait_ms: 0,
                    min_bytes: 1,
                    max_bytes: 1 << 20,
                    bound: replog::ReadBound::LogEnd,
                };
                let partitions = vec![purgatory::replica_manager::FetchPartitionRequest::new(
                    TopicPartition::new("demo", 0),
                    i64::from(i) + 1,
                    1 << 20,
                )];
                rm.fetch_messages(&ctx, params, partitions, Box::new(|_| {}));
            }
        }
        let t = Instant::now();
        let timing = RequestTiming {
            trace: ctx.trace,
            name: RequestName::of_key(ApiKey::Produce),
            api_version: 9,
            received: t,
            local_start: t,
            local_end: t,
        };
        if i < 300 {
            rm.telemetry
                .finish(&timing, None, t, Instant::now(), Outcome::Sent);
        }
    }
    let state = AdminState::new(
        Arc::clone(&rm),
        purgatory::coordinator::GroupCoordinator::new(&rm),
        EmbeddedFollowers::none(),
        None,
    );
    let frames = 2_000;
    let start = Instant::now();
    let mut bytes = 0;
    for _ in 0..frames {
        let frame = view::first_frame(&state, false);
        bytes += black_box(frame.to_string()).len();
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / f64::from(frames);
    println!(
        "view-overhead frame us_per_frame={us:.0} bytes_per_frame={} (a first frame: 60 requests, 20 parked produces) cpu_at_11_frames_per_s={:.2}%",
        bytes / frames as usize,
        us * 11.0 / 1e6 * 100.0
    );
}
