//! Transaction markers on the partitions this broker leads (Kafka's `WriteTxnMarkers`,
//! which a transaction coordinator sends each partition leader): the COMMIT or ABORT is
//! appended to the partition's log, its high watermark and last stable offset follow as
//! the followers fetch it, and whatever waits on the partition is woken.

use kafka_protocol::ResponseError;
use replog::{AppendError, AppendInfo, ControlType};

use super::ReplicaManager;
use crate::partition::TopicPartition;
use crate::request::Cause;

impl ReplicaManager {
    /// Appends a marker ending `producer_id`'s transaction on `tp`, committed or aborted,
    /// as the leader. Kafka's errors: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
    /// INVALID_PRODUCER_EPOCH for an epoch older than the partition knows (a fenced
    /// coordinator). The marker is not refused for `log.memory.max.bytes`: it is one small
    /// batch that must land for the transaction to end, and it is counted like any append.
    pub fn append_txn_marker(
        &self,
        tp: &TopicPartition,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        control: ControlType,
    ) -> Result<AppendInfo, ResponseError> {
        let handle = self
            .partition(&tp.topic, tp.partition)
            .ok_or(ResponseError::UnknownTopicOrPartition)?;
        let now = self.now_ms();
        let appended = self.update_partition(&handle, |log| {
            log.ensure_leader().map_err(|e| e.error())?;
            log.append_marker(producer_id, producer_epoch, coordinator_epoch, control, now)
                .map_err(|e| match e {
                    AppendError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
                    AppendError::NotLeaderOrFollower(_) => ResponseError::NotLeaderOrFollower,
                    _ => ResponseError::UnknownServerError,
                })
        })?;
        self.log_memory.add(appended.bytes);
        self.complete_waiting(tp, &appended.change, Cause::Unknown);
        Ok(appended)
    }
}
