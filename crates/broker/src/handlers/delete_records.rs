//! DeleteRecords: move partitions' log start offsets forward, as `kafka-delete-records`
//! and `Admin.deleteRecords` ask.
//!
//! Parse: the partitions and their offsets (-1: up to the high watermark), and how long
//! the client will wait. Apply: [`ReplicaManager::delete_records`] deletes on each leader
//! at once and parks a `DelayedDeleteRecords` until every follower has dropped the records
//! too. Respond: each partition's low watermark, or its error, in request order.

use std::sync::Arc;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse, ResponseKind};
use tokio::sync::oneshot;

use super::{Reply, RequestContext};
use crate::partition::TopicPartition;
use crate::replica_manager::ReplicaManager;

/// Handles a DeleteRecords request.
pub fn handle(rm: &Arc<ReplicaManager>, ctx: &RequestContext, req: DeleteRecordsRequest) -> Reply {
    let mut layout = Vec::with_capacity(req.topics.len());
    let mut partitions = Vec::new();
    for topic in req.topics {
        let name: Arc<str> = Arc::from(topic.name.0.as_str());
        layout.push((topic.name, topic.partitions.len()));
        partitions.extend(topic.partitions.into_iter().map(|p| {
            let tp = TopicPartition {
                topic: name.clone(),
                partition: p.partition_index,
            };
            (tp, p.offset)
        }));
    }
    let (tx, rx) = oneshot::channel();
    rm.delete_records(
        ctx,
        req.timeout_ms.max(0) as u64,
        partitions,
        Box::new(move |results| {
            let mut results = results.into_iter();
            let topics = layout
                .into_iter()
                .map(|(name, count)| {
                    let partitions = results
                        .by_ref()
                        .take(count)
                        .map(|(tp, r)| {
                            DeleteRecordsPartitionResult::default()
                                .with_partition_index(tp.partition)
                                .with_low_watermark(r.low_watermark)
                                .with_error_code(r.error.map_or(0, |e| e.code()))
                        })
                        .collect();
                    DeleteRecordsTopicResult::default()
                        .with_name(name)
                        .with_partitions(partitions)
                })
                .collect();
            let _ = tx.send(ResponseKind::DeleteRecords(
                DeleteRecordsResponse::default().with_topics(topics),
            ));
        }),
    );
    Reply::from_callback(rx)
}
