//! DescribeLogDirs: where this broker keeps its partitions and how big each is
//! (`kafka-log-dirs --describe`, AdminClient `describe_log_dirs`), the question an
//! operator asks before moving partitions or when a disk fills up.
//!
//! This broker keeps its logs in memory, so it has one log directory, named
//! [`LOG_DIR`] (`/memory`: absolute, as Kafka's tools expect a log directory to be, but no
//! place on disk). Parse: the topics and partitions asked for, or null for all. Apply:
//! the replica manager lists the hosted partitions, leading or following, with the bytes
//! each log holds ([`crate::replica_manager::ReplicaManager::describe_log_dir`]).
//! Respond: the directory with its topics; each partition's size, its offset lag
//! (Kafka's: the local high watermark past the local log end, 0 here for leaders and
//! followers alike) and `is_future_key` false (no partition is ever being moved between
//! directories). From v4 the directory's total and usable bytes are
//! `log.memory.max.bytes` and what is left of it.

use std::sync::Arc;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{
    DescribeLogDirsRequest, DescribeLogDirsResponse, ResponseKind, TopicName,
};

use super::{sb, RequestContext};
use crate::replica_manager::log_memory::LOG_DIR;
use crate::replica_manager::ReplicaManager;

/// Handles a DescribeLogDirs request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    ctx: &RequestContext,
    req: DescribeLogDirsRequest,
) -> ResponseKind {
    let filter: Option<Vec<(String, Vec<i32>)>> = req.topics.map(|topics| {
        topics
            .into_iter()
            .map(|t| (t.topic.0.to_string(), t.partitions))
            .collect()
    });
    let described = rm.describe_log_dir(filter.as_deref());
    let topics = described
        .topics
        .into_iter()
        .map(|(name, partitions)| {
            DescribeLogDirsTopic::default()
                .with_name(TopicName(sb(&name)))
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|p| {
                            DescribeLogDirsPartition::default()
                                .with_partition_index(p.partition)
                                .with_partition_size(p.size_bytes)
                                .with_offset_lag(p.offset_lag)
                                .with_is_future_key(false)
                        })
                        .collect(),
                )
        })
        .collect();
    let mut dir = DescribeLogDirsResult::default()
        .with_log_dir(sb(LOG_DIR))
        .with_topics(topics);
    if ctx.api_version >= 4 {
        dir = dir
            .with_total_bytes(described.total_bytes)
            .with_usable_bytes(described.usable_bytes);
    }
    ResponseKind::DescribeLogDirs(DescribeLogDirsResponse::default().with_results(vec![dir]))
}
