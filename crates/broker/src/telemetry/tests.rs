//! A produce's story and phases, driven through the replica manager on a manual clock:
//! the follower fetches that move the high watermark appear in it, in order, and end it;
//! an expired produce says so and counts as Kafka's DelayedProduceMetrics expiration.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use replog::test_util::BatchBuilder;
use replog::ReadBound;

use super::*;
use crate::delayed::FetchParams;
use crate::replica_manager::{AppendOrigin, FetchPartitionRequest, ReplicaManager};
use crate::request::RequestContext;
use crate::test_util::manual_broker;

fn broker() -> Arc<ReplicaManager> {
    manual_broker(|_| {}, &[("demo", 1, 3)])
}

/// A request context with a record in the request log, as the connection makes one.
fn traced(
    rm: &ReplicaManager,
    name: RequestName,
    client: &str,
    correlation_id: i32,
) -> RequestContext {
    let mut ctx = RequestContext::internal(client);
    ctx.correlation_id = correlation_id;
    ctx.trace = rm.telemetry.begin(name, &ctx, Instant::now(), rm.now_ms());
    ctx
}

fn produce(rm: &ReplicaManager, correlation_id: i32, timeout_ms: u64) -> RequestContext {
    let ctx = traced(
        rm,
        RequestName::of_key(ApiKey::Produce),
        "rdkafka",
        correlation_id,
    );
    rm.append_records(
        &ctx,
        timeout_ms,
        -1,
        AppendOrigin::Client,
        vec![(TopicPartition::new("demo", 0), BatchBuilder::new(1).bytes())],
        Box::new(|_| {}),
    );
    ctx
}

fn follower_fetch(rm: &ReplicaManager, replica: i32, offset: i64, correlation_id: i32) {
    let ctx = traced(
        rm,
        RequestName::fetch_follower(),
        "followersim",
        correlation_id,
    );
    let params = FetchParams {
        replica_id: replica,
        max_wait_ms: 0,
        min_bytes: 1,
        max_bytes: 1 << 20,
        bound: ReadBound::LogEnd,
    };
    let partitions = vec![FetchPartitionRequest::new(
        TopicPartition::new("demo", 0),
        offset,
        1 << 20,
    )];
    rm.fetch_messages(&ctx, params, partitions, Box::new(|_| {}));
}

fn finish(rm: &ReplicaManager, ctx: &RequestContext) {
    let now = Instant::now();
    let timing = RequestTiming {
        trace: ctx.trace,
        name: RequestName::of_key(ApiKey::Produce),
        api_version: 9,
        received: now,
        local_start: now,
        local_end: now,
    };
    rm.telemetry.finish(&timing, None, now, now, Outcome::Sent);
}

#[test]
fn a_produce_story_names_the_follower_fetches_that_moved_the_high_watermark() {
    let rm = broker();
    let ctx = produce(&rm, 17, 30_000);
    let parked = rm.telemetry.request(ctx.trace.seq()).unwrap();
    assert_eq!(parked.state, "parked");
    assert_eq!(parked.purgatory, Some("Produce"));
    assert_eq!(parked.partitions[0].required_offset, Some(1));
    assert_eq!(parked.deadline_ms, Some(30_000));

    follower_fetch(&rm, 2, 1, 5);
    assert_eq!(
        rm.produce_purgatory.delayed(),
        1,
        "one follower is not enough"
    );
    follower_fetch(&rm, 3, 1, 6);
    assert_eq!(rm.produce_purgatory.delayed(), 0);
    finish(&rm, &ctx);

    let done = rm.telemetry.request(ctx.trace.seq()).unwrap();
    assert_eq!(done.state, "done");
    assert_eq!(done.cause.kind, "follower_fetch");
    assert_eq!(done.cause.replica, Some(3));
    assert_eq!(done.cause.high_watermark, Some(1));
    let story = done.story;
    let expected = [
        "produce #17 client=rdkafka demo-0 appended @0",
        "→ parked (needs HW 1, deadline 30000 ms)",
        "→ follower 2 fetch @1",
        "→ follower 3 fetch @1 → HW 1",
        "→ completed after",
    ];
    let mut rest = story.as_str();
    for part in expected {
        let at = rest
            .find(part)
            .unwrap_or_else(|| panic!("{part:?} missing (in order) from {story:?}"));
        rest = &rest[at + part.len()..];
    }
    assert!(done.error.is_none(), "{story}");
    let produce = rm
        .telemetry
        .metrics
        .request(RequestName::of_key(ApiKey::Produce));
    assert_eq!(produce.versions[9].load(Ordering::Relaxed), 1);
    assert_eq!(produce.phases[5].count(), 1);
}

#[test]
fn an_expired_produce_says_so_and_counts_as_a_kafka_expiration() {
    let rm = broker();
    let ctx = produce(&rm, 3, 1_000);
    follower_fetch(&rm, 2, 1, 5); // one follower only: the HW stays at 0
    rm.timer.advance_by(1_000);
    let done = rm.telemetry.request(ctx.trace.seq()).unwrap();
    assert_eq!(done.cause.kind, "expired");
    assert_eq!(done.error.as_deref(), Some("REQUEST_TIMED_OUT"));
    assert!(
        done.story.contains("→ expired after") && done.story.ends_with(": REQUEST_TIMED_OUT"),
        "{}",
        done.story
    );
    assert_eq!(
        rm.telemetry.metrics.produce_expired.load(Ordering::Relaxed),
        1
    );
    assert_eq!(
        rm.telemetry.metrics.produce_expirations_by_partition(),
        vec![(TopicPartition::new("demo", 0), 1)]
    );
}

#[test]
fn filters_pick_requests_by_client_topic_and_name() {
    let rm = broker();
    produce(&rm, 1, 1_000);
    follower_fetch(&rm, 2, 0, 2);
    let all = rm
        .telemetry
        .recent_requests(0, 10, &RequestFilter::default());
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].request, "FetchFollower", "newest first");
    let by_client = RequestFilter {
        client: Some("rdkafka".into()),
        ..RequestFilter::default()
    };
    assert_eq!(rm.telemetry.recent_requests(0, 10, &by_client).len(), 1);
    let no_followers = RequestFilter {
        no_followers: true,
        topic: Some("demo".into()),
        ..RequestFilter::default()
    };
    let only = rm.telemetry.recent_requests(0, 10, &no_followers);
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].request, "Produce");
    let other_topic = RequestFilter {
        topic: Some("other".into()),
        ..RequestFilter::default()
    };
    assert!(rm.telemetry.recent_requests(0, 10, &other_topic).is_empty());
}

#[test]
fn kafka_names_for_requests_and_errors() {
    assert_eq!(RequestName::of_key(ApiKey::Produce).name(), "Produce");
    assert_eq!(RequestName::of_key(ApiKey::Fetch).name(), "FetchConsumer");
    assert_eq!(RequestName::from_slot(255).name(), "FetchFollower");
    assert_eq!(
        RequestName::of_key(ApiKey::ApiVersions).name(),
        "ApiVersions"
    );
    assert_eq!(error_name(7), "REQUEST_TIMED_OUT");
    assert_eq!(error_name(20), "NOT_ENOUGH_REPLICAS_AFTER_APPEND");
    assert_eq!(error_name(0), "NONE");
}
