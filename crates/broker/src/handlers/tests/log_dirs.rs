//! What DescribeLogDirs answers: the one in-memory log directory, each hosted partition
//! with the bytes its log holds, the topics filter, and (v4) the memory cap and what is
//! left of it.

use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;

use super::*;

fn describe(
    apis: &KafkaApis,
    version: i16,
    topics: Option<Vec<(&str, Vec<i32>)>>,
) -> DescribeLogDirsResponse {
    let request = DescribeLogDirsRequest::default().with_topics(topics.map(|t| {
        t.into_iter()
            .map(|(topic, partitions)| {
                DescribableLogDirTopic::default()
                    .with_topic(name(topic))
                    .with_partitions(partitions)
            })
            .collect()
    }));
    let ResponseKind::DescribeLogDirs(response) =
        exchange(apis, version, RequestKind::DescribeLogDirs(request))
    else {
        panic!("not a DescribeLogDirs response");
    };
    response
}

/// (topic, partition, size, offset lag, is future) of every partition listed.
fn listed(response: &DescribeLogDirsResponse) -> Vec<(String, i32, i64, i64, bool)> {
    response.results[0]
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.name.0.to_string(),
                    p.partition_index,
                    p.partition_size,
                    p.offset_lag,
                    p.is_future_key,
                )
            })
        })
        .collect()
}

#[test]
fn every_hosted_partition_is_listed_with_the_bytes_its_log_holds() {
    let apis = KafkaApis::new(crate::test_util::manual_broker(
        |c| c.log_memory_max_bytes = 1 << 20,
        &[("sized", 2, 1)],
    ));
    let batch = one_record_batch();
    exchange(
        &apis,
        9,
        RequestKind::Produce(
            ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(1_000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(name("sized"))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch.clone()))])]),
        ),
    );
    let size = batch.len() as i64;
    for version in 1..=4 {
        let all = describe(&apis, version, None);
        assert_eq!(all.error_code, 0);
        assert_eq!(all.results.len(), 1, "one log directory");
        let dir = &all.results[0];
        assert_eq!((dir.error_code, dir.log_dir.as_str()), (0, "/memory"));
        assert_eq!(
            listed(&all),
            vec![
                ("sized".into(), 0, size, 0, false),
                ("sized".into(), 1, 0, 0, false),
            ],
            "v{version}"
        );
        if version >= 4 {
            assert_eq!(dir.total_bytes, 1 << 20, "log.memory.max.bytes");
            assert_eq!(dir.usable_bytes, (1 << 20) - size, "what is left of it");
        }
    }
    // Only what is asked for; partitions and topics that do not exist are left out.
    let some = describe(
        &apis,
        4,
        Some(vec![("sized", vec![1, 7]), ("nope", vec![0])]),
    );
    assert_eq!(listed(&some), vec![("sized".into(), 1, 0, 0, false)]);
    assert!(
        listed(&describe(&apis, 4, Some(vec![]))).is_empty(),
        "an empty filter asks for nothing"
    );
}
