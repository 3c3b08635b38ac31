//! Reading a Fetch response: what the leader answered for each partition, and what the
//! follower does about it.
//!
//! [`Session::examine`] reads the answer without touching the log: batches to append, a
//! diverged log to truncate, an offset out of range, or an error that asks for fresh
//! metadata. [`Session::commit`] then appends, and [`Session::truncate_diverged`] and
//! [`Session::reset_partition`] handle the two ways a follower's log must shrink: its end
//! holds records the new leader never had, or its offset is outside the leader's log.

use super::{check_epoch, error_name, Session, EARLIEST_TIMESTAMP, SHARE_RECORDS_FROM_BYTES};
use crate::batch::CheckedBatches;
use crate::state::TopicPartition;
use anyhow::{anyhow, Context, Result};
use kafka_protocol::error::ParseResponseErrorCode;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, FetchResponse, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tokio::time::timeout;
use tracing::{debug, error, info, warn};

impl Session<'_> {
    /// Reads a Fetch response: per partition, records the leader's HW, checks the batches
    /// against our LEO, and sorts out errors. Changes no log.
    ///
    /// `frame_len` is the size of the response frame: a partition whose records fill most of
    /// a large frame is kept without a copy (see [`SHARE_RECORDS_FROM_BYTES`]).
    pub(super) fn examine(&self, resp: &FetchResponse, frame_len: usize) -> Result<Examined> {
        let mut out = Examined::default();
        let mut st = self.shared.replica.lock();
        check_epoch(&st, self.epoch)?;
        if resp.error_code != 0 {
            let msg = format!("Fetch failed: {}", error_name(resp.error_code));
            warn!("{msg}");
            st.last_error = Some(msg);
            out.back_off = true;
            out.refresh_metadata = true;
            return Ok(out);
        }
        let mut fetched = 0u64;
        let mut rejected = 0u64;
        let mut last_error = None;
        for topic in &resp.responses {
            for pd in &topic.partitions {
                let tp = TopicPartition {
                    topic: topic.topic.0.to_string(),
                    partition: pd.partition_index,
                };
                let Some(p) = st.partitions.get_mut(&tp) else {
                    continue; // not ours (any more)
                };
                if pd.high_watermark >= 0 {
                    p.leader_high_watermark_seen = pd.high_watermark;
                }
                if pd.log_start_offset >= 0 {
                    p.leader_log_start_seen = pd.log_start_offset;
                }
                p.log
                    .leader_progress(pd.high_watermark, pd.log_start_offset);
                let code = pd.error_code;
                let error = code.err();
                if code != 0
                    && code != p.last_error_code
                    && error != Some(ResponseError::OffsetOutOfRange)
                {
                    warn!(
                        "fetching {tp} from offset {} failed: {}",
                        p.log.log_end_offset(),
                        error_name(code)
                    );
                    last_error = Some(format!("{tp}: {}", error_name(code)));
                } else if code == 0 && p.last_error_code != 0 {
                    info!("fetching {tp} works again");
                }
                p.last_error_code = code;
                match error {
                    None => {}
                    Some(ResponseError::OffsetOutOfRange) => {
                        out.out_of_range.push((tp, pd.log_start_offset));
                        out.back_off = true;
                        continue;
                    }
                    Some(
                        ResponseError::UnknownTopicOrPartition
                        | ResponseError::NotLeaderOrFollower
                        | ResponseError::LeaderNotAvailable
                        | ResponseError::FencedLeaderEpoch
                        | ResponseError::UnknownLeaderEpoch
                        | ResponseError::UnknownTopicId,
                    ) => {
                        out.refresh_metadata = true;
                        out.back_off = true;
                        continue;
                    }
                    _ => {
                        out.back_off = true;
                        continue;
                    }
                }
                if pd.diverging_epoch.epoch >= 0 {
                    // Our log holds records the leader's does not: truncate first.
                    out.diverged.push((
                        tp,
                        pd.diverging_epoch.epoch,
                        pd.diverging_epoch.end_offset,
                    ));
                    continue;
                }
                let Some(records) = pd.records.as_ref().filter(|r| !r.is_empty()) else {
                    continue;
                };
                fetched += records.len() as u64;
                match p.log.check(records) {
                    Ok(c) if c.batches.is_empty() => {
                        warn!(
                            "{tp}: the response held only {} bytes of a partial batch at offset {}; nothing to append (is max_bytes smaller than a batch?)",
                            c.partial_tail_bytes,
                            p.log.log_end_offset()
                        );
                        out.back_off = true;
                    }
                    Ok(c) => {
                        let share = records.len() >= SHARE_RECORDS_FROM_BYTES
                            && records.len() * 2 >= frame_len;
                        out.checked.push((tp, c, share))
                    }
                    Err(e) => {
                        error!(
                            "rejected the data for {tp}: {e}; our log end stays at {} and we fetch from there again",
                            p.log.log_end_offset()
                        );
                        last_error = Some(format!("{tp}: {e}"));
                        rejected += 1;
                        out.back_off = true;
                    }
                }
            }
        }
        st.counters.bytes_fetched += fetched;
        st.counters.rejected_responses += rejected;
        if last_error.is_some() {
            st.last_error = last_error;
        }
        Ok(out)
    }

    /// Appends checked batches (unless a crash wiped the state meanwhile).
    pub(super) fn commit(
        &self,
        checked: Vec<(TopicPartition, CheckedBatches, bool)>,
    ) -> Result<()> {
        let mut st = self.shared.replica.lock();
        check_epoch(&st, self.epoch)?;
        let mut appended = 0u64;
        for (tp, c, share) in checked {
            let Some(p) = st.partitions.get_mut(&tp) else {
                continue;
            };
            let committed = p.log.commit(c, share);
            match committed {
                Ok(o) => {
                    appended += o.batches as u64;
                    debug!(
                        "{tp}: appended {} batch(es), {} bytes: log end offset {} -> {} (the leader learns this from our next fetch; leader HW was {})",
                        o.batches, o.bytes, o.old_log_end_offset, o.new_log_end_offset, p.leader_high_watermark_seen
                    );
                }
                Err(e) => warn!("{tp}: dropped stale data: {e}"),
            }
            // The HW a follower keeps is the leader's, capped at its own log end.
            p.log
                .leader_progress(p.leader_high_watermark_seen, p.leader_log_start_seen);
        }
        st.counters.batches_appended += appended;
        Ok(())
    }

    /// Handles a `diverging_epoch` answer: the leader's log ends epoch `epoch` at
    /// `leader_end_offset`, and ours has records past that point. Truncate to the lower of
    /// that offset and our own end of the same epoch (or of the latest epoch below it),
    /// then fetch from there; if the logs still differ the next answer says so again.
    pub(super) fn truncate_diverged(
        &self,
        tp: &TopicPartition,
        epoch: i32,
        leader_end_offset: i64,
    ) -> Result<()> {
        let mut st = self.shared.replica.lock();
        check_epoch(&st, self.epoch)?;
        if let Some(p) = st.partitions.get_mut(tp) {
            let ours = p
                .log
                .end_offset_for_epoch(epoch)
                .unwrap_or(leader_end_offset);
            let before = p.log.log_end_offset();
            let after = p.log.truncate_to(leader_end_offset.min(ours));
            info!(
                "{tp}: our log diverged from the leader's after epoch {epoch} (which ends at offset {leader_end_offset} on the leader): truncated offsets {after}..{before}, fetching again from {after}"
            );
        }
        Ok(())
    }

    /// Handles `OFFSET_OUT_OF_RANGE`: truncate fully and restart at the leader's log start.
    pub(super) async fn reset_partition(
        &mut self,
        tp: &TopicPartition,
        leader_log_start: i64,
    ) -> Result<()> {
        let start = if leader_log_start >= 0 {
            leader_log_start
        } else {
            match self.earliest_offset(tp).await? {
                Some(o) => o,
                None => {
                    warn!(
                        "{tp}: offset out of range and the leader's log start is unknown; retrying"
                    );
                    return Ok(());
                }
            }
        };
        let mut st = self.shared.replica.lock();
        check_epoch(&st, self.epoch)?;
        if let Some(p) = st.partitions.get_mut(tp) {
            info!(
                "{tp}: our fetch offset {} is outside the leader's log (leader log start {start}); truncating our copy and replicating again from offset {start}",
                p.log.log_end_offset()
            );
            p.log.reset_to(start);
            p.last_error_code = 0;
        }
        Ok(())
    }

    /// Asks the leader for a partition's log start offset (ListOffsets, timestamp -2).
    async fn earliest_offset(&mut self, tp: &TopicPartition) -> Result<Option<i64>> {
        let Some(version) = self.versions.list_offsets else {
            return Ok(None);
        };
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(self.replica_id()))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(tp.topic.clone())))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(tp.partition)
                    .with_timestamp(EARLIEST_TIMESTAMP)])]);
        let resp = timeout(self.request_timeout, self.conn.send(&req, version))
            .await
            .map_err(|_| anyhow!("ListOffsets timed out"))?
            .context("ListOffsets")?;
        Ok(resp
            .topics
            .iter()
            .filter(|t| t.name.0.as_str() == tp.topic)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == tp.partition && p.error_code == 0 && p.offset >= 0)
            .map(|p| p.offset))
    }
}

/// What [`Session::examine`] found in a Fetch response.
#[derive(Default)]
pub(super) struct Examined {
    /// Checked batches, and whether they may be kept without a copy.
    pub(super) checked: Vec<(TopicPartition, CheckedBatches, bool)>,
    pub(super) out_of_range: Vec<(TopicPartition, i64)>,
    /// Partitions the leader says diverged: (partition, epoch, the leader's end offset).
    pub(super) diverged: Vec<(TopicPartition, i32, i64)>,
    pub(super) refresh_metadata: bool,
    pub(super) back_off: bool,
}
