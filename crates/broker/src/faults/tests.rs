//! The rule list on its own: triggers, order, matching, and the error plans.

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, MetadataResponse, ProduceRequest, RequestKind, ResponseKind, TopicName,
};
use timewheel::{Timer, TimerConfig};

use super::answer::{plan, ErrorPlan};
use super::*;
use crate::handlers::sb;

fn faults() -> Faults {
    Faults::new(Timer::manual(TimerConfig::default()))
}

fn produce(topics: &[(&str, &[i32])]) -> RequestKind {
    RequestKind::Produce(
        ProduceRequest::default().with_acks(-1).with_topic_data(
            topics
                .iter()
                .map(|(name, parts)| {
                    TopicProduceData::default()
                        .with_name(TopicName(sb(name)))
                        .with_partition_data(
                            parts
                                .iter()
                                .map(|&p| PartitionProduceData::default().with_index(p))
                                .collect(),
                        )
                })
                .collect(),
        ),
    )
}

/// Which of `n` produce requests to `t` from client `c` the rules fire on: the rule ids.
fn hits(f: &Faults, n: usize) -> Vec<Option<u64>> {
    let request = produce(&[("t", &[0])]);
    (0..n)
        .map(|_| {
            f.check(&RequestFacts::of(ApiKey::Produce, 9, "c", 1, &request))
                .map(|fired| fired.rule)
        })
        .collect()
}

#[test]
fn times_fires_the_first_n_and_nth_only_the_nth() {
    let f = faults();
    let id = f
        .add_json(r#"{"api": "Produce", "error": 6, "times": 2}"#)
        .unwrap();
    assert_eq!(hits(&f, 4), [Some(id), Some(id), None, None]);
    f.clear();
    let id = f
        .add_json(r#"{"api": "Produce", "error": 6, "nth": 3}"#)
        .unwrap();
    assert_eq!(hits(&f, 4), [None, None, Some(id), None]);
    let listed = &f.list()[0];
    assert_eq!(
        (listed["hits"].as_u64(), listed["matched"].as_u64()),
        (Some(1), Some(4))
    );
    assert_eq!(listed["id"].as_u64(), Some(id));
    assert_eq!(
        listed["api"], "Produce",
        "the rule is listed as it was given"
    );
}

#[test]
fn rules_are_checked_in_order_and_the_first_to_fire_wins() {
    let f = faults();
    let first = f
        .add_json(r#"{"api": "Produce", "error": 6, "times": 1}"#)
        .unwrap();
    let second = f.add_json(r#"{"api": "Produce", "delay_ms": 5}"#).unwrap();
    assert_eq!(hits(&f, 3), [Some(first), Some(second), Some(second)]);
    assert!(f.remove(second));
    assert!(!f.remove(second), "removed already");
    assert_eq!(hits(&f, 1), [None]);
    assert!(f.is_armed(), "the spent rule is still listed");
    assert_eq!(f.clear(), 1);
    assert!(!f.is_armed());
}

#[test]
fn a_seeded_probability_replays_exactly_and_another_seed_differs() {
    let run = |seed: u64| {
        let f = faults();
        f.add_json(&format!(
            r#"{{"api": "Produce", "error": 6, "probability": 0.5, "seed": {seed}}}"#
        ))
        .unwrap();
        hits(&f, 64)
            .iter()
            .map(Option::is_some)
            .collect::<Vec<bool>>()
    };
    let a = run(7);
    assert_eq!(a, run(7), "the same seed gives the same hits");
    assert_ne!(a, run(8), "another seed, another sequence");
    let fired = a.iter().filter(|h| **h).count();
    assert!(
        (10..=54).contains(&fired),
        "about half of 64 fire, got {fired}"
    );
}

#[test]
fn matching_on_client_broker_version_topic_partition_and_group() {
    let request = produce(&[("a", &[0, 1]), ("b", &[2])]);
    let facts = RequestFacts::of(ApiKey::Produce, 9, "app", 2, &request);
    let rule = |json: &str| RuleSpec::parse(json).unwrap().matches;
    assert!(facts.matches(&rule(r#"{"api": "Produce", "error": 6}"#)));
    assert!(!facts.matches(&rule(r#"{"api": "Fetch", "error": 6}"#)));
    assert!(facts.matches(&rule(
        r#"{"api": "Produce", "client_id": "app", "broker": 2, "error": 6}"#
    )));
    assert!(!facts.matches(&rule(
        r#"{"api": "Produce", "client_id": "other", "error": 6}"#
    )));
    assert!(!facts.matches(&rule(r#"{"api": "Produce", "broker": 1, "error": 6}"#)));
    assert!(!facts.matches(&rule(r#"{"api": "Produce", "max_version": 8, "error": 6}"#)));
    assert!(facts.matches(&rule(r#"{"api": "Produce", "topic": "b", "error": 6}"#)));
    assert!(facts.matches(&rule(
        r#"{"api": "Produce", "topic": "a", "partition": 1, "error": 6}"#
    )));
    assert!(!facts.matches(&rule(
        r#"{"api": "Produce", "topic": "b", "partition": 1, "error": 6}"#
    )));
    assert!(facts.matches(&rule(r#"{"api": "Produce", "partition": 2, "error": 6}"#)));
    assert!(!facts.matches(&rule(r#"{"api": "Produce", "group": "g", "error": 6}"#)));
}

#[test]
fn a_partition_error_takes_only_the_matched_partitions_out_of_a_produce() {
    let request = produce(&[("a", &[0, 1]), ("b", &[0])]);
    let rule =
        RuleSpec::parse(r#"{"api": "Produce", "topic": "a", "partition": 1, "error": 6}"#).unwrap();
    let (planned, failed) = plan(request, 9, &rule.matches, 6);
    assert_eq!(
        failed,
        [crate::partition::TopicPartition::new("a", 1)],
        "for the request log"
    );
    let ErrorPlan::Handle(RequestKind::Produce(rest), patch) = planned else {
        panic!("the other partitions are handled");
    };
    let left: Vec<(String, Vec<i32>)> = rest
        .topic_data
        .iter()
        .map(|t| {
            (
                t.name.0.to_string(),
                t.partition_data.iter().map(|p| p.index).collect(),
            )
        })
        .collect();
    assert_eq!(
        left,
        [("a".to_string(), vec![0]), ("b".to_string(), vec![0])]
    );
    let mut answer = ResponseKind::Produce(Default::default());
    patch(&mut answer);
    let ResponseKind::Produce(answer) = answer else {
        unreachable!()
    };
    let errors: Vec<(&str, i32, i16)> = answer
        .responses
        .iter()
        .flat_map(|t| {
            t.partition_responses
                .iter()
                .map(move |p| (t.name.0.as_str(), p.index, p.error_code))
        })
        .collect();
    assert_eq!(errors, [("a", 1, 6)]);
}

#[test]
fn a_fetch_with_error_partitions_answers_at_once_and_all_taken_needs_no_handler() {
    let fetch = |parts: &[i32]| {
        RequestKind::Fetch(FetchRequest::default().with_max_wait_ms(500).with_topics(
            vec![FetchTopic::default()
                    .with_topic(TopicName(sb("t")))
                    .with_partitions(
                        parts
                            .iter()
                            .map(|&p| FetchPartition::default().with_partition(p))
                            .collect(),
                    )],
        ))
    };
    let rule = RuleSpec::parse(r#"{"api": "Fetch", "partition": 0, "error": 6}"#).unwrap();
    match plan(fetch(&[0, 1]), 12, &rule.matches, 6).0 {
        ErrorPlan::Handle(RequestKind::Fetch(rest), _) => {
            assert_eq!(rest.max_wait_ms, 0, "no long poll with an error to report");
            assert_eq!(rest.topics[0].partitions.len(), 1);
        }
        _ => panic!("partition 1 is handled"),
    }
    match plan(fetch(&[0]), 12, &rule.matches, 6).0 {
        ErrorPlan::Answer(ResponseKind::Fetch(answer)) => {
            let p = &answer.responses[0].partitions[0];
            assert_eq!(
                (p.partition_index, p.error_code, p.high_watermark),
                (0, 6, -1)
            );
            assert_eq!(
                p.records.as_ref().map(|r| r.len()),
                Some(0),
                "empty, not null"
            );
        }
        _ => panic!("nothing left to handle"),
    }
}

#[test]
fn a_metadata_error_keeps_the_brokers_and_fails_the_covered_topics() {
    let rule =
        RuleSpec::parse(r#"{"api": "Metadata", "topic": "t", "error": "LEADER_NOT_AVAILABLE"}"#)
            .unwrap();
    let request = RequestKind::Metadata(Default::default());
    let ErrorPlan::Handle(RequestKind::Metadata(asked), patch) =
        plan(request, 12, &rule.matches, 5).0
    else {
        panic!("metadata is answered as usual, then patched");
    };
    assert!(!asked.allow_auto_topic_creation);
    let topic = |name: &str| {
        kafka_protocol::messages::metadata_response::MetadataResponseTopic::default()
            .with_name(Some(TopicName(sb(name))))
            .with_partitions(vec![Default::default()])
    };
    let mut answer = ResponseKind::Metadata(
        MetadataResponse::default()
            .with_brokers(vec![Default::default()])
            .with_topics(vec![topic("t"), topic("u")]),
    );
    patch(&mut answer);
    let ResponseKind::Metadata(answer) = answer else {
        unreachable!()
    };
    assert_eq!(answer.brokers.len(), 1);
    assert_eq!(
        (
            answer.topics[0].error_code,
            answer.topics[0].partitions.len()
        ),
        (5, 0)
    );
    assert_eq!(
        (
            answer.topics[1].error_code,
            answer.topics[1].partitions.len()
        ),
        (0, 1)
    );
}
