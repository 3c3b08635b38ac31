//! # A replicated partition, as its leader keeps it
//!
//! A Kafka partition is an append-only log of record batches, numbered by **offset**.
//! On the leader, a few offsets describe where things stand:
//!
//! ```text
//!   log start offset          high watermark (HW)           log end offset (LEO)
//!         |                          |                               |
//!         v                          v                               v
//!         [ batch ][ batch ][ batch ][ batch ][ batch ][ batch ]
//!         <-- replicated to the whole ISR --><-- only on some replicas -->
//!         <---- consumers may read ---------->
//! ```
//!
//! * **Log start offset**: the first offset still stored. Retention moves it forward;
//!   fetching below it is `OFFSET_OUT_OF_RANGE`.
//! * **Log end offset (LEO)**: the offset the next appended record will get.
//! * **In-sync replicas (ISR)**: the leader plus the followers that keep up (see
//!   [`crate::replica`]). A follower leaves the ISR when it has not been caught up for
//!   `replica.lag.time.max.ms`, and rejoins as soon as its LEO reaches the HW.
//! * **High watermark (HW)**: the minimum LEO over the ISR, leader included: every
//!   offset below it is on every in-sync replica, so it survives the loss of the leader.
//!   Consumers only see records below the HW, and an `acks=all` produce is answered
//!   once the HW has passed its records. The HW never moves backwards and, as in
//!   KIP-966, does not advance while the ISR is smaller than the minimum in force.
//! * **Minimum ISR in force**: `min(min.insync.replicas, replication factor)`, as
//!   Kafka's `effectiveMinIsr`. A topic with one replica takes `acks=all` writes even
//!   though the broker's `min.insync.replicas` is 2: no ISR could ever be larger.
//!
//! Everything here is synchronous and takes the current time as an argument, so the
//! broker can drive it from its clock and tests from a manual one.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use serde::Serialize;

use crate::batch::{record_offsets_and_timestamps, set_offset_and_epoch, split_and_validate};
use crate::config::LogConfig;
use crate::error::{AppendError, FollowerError, ReadError};
use crate::producer_state::{
    PendingProducerUpdates, ProducerStateEntry, ProducerStateManager, SequenceCheck,
};
use crate::replica::FollowerState;

/// `UNDEFINED_EPOCH` of the OffsetForLeaderEpoch API.
pub const UNDEFINED_EPOCH: i32 = -1;
/// `UNDEFINED_EPOCH_OFFSET` of the OffsetForLeaderEpoch API.
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// Up to which offset a read may return data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ReadBound {
    /// Consumers: only batches entirely below the high watermark.
    HighWatermark,
    /// Followers: everything up to the log end offset.
    LogEnd,
}

/// How far an `acks=all` write has got: Kafka's `checkEnoughReplicasReachOffset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ReplicationState {
    /// The high watermark is still below the required offset: keep waiting.
    Pending,
    /// The high watermark reached the required offset and the ISR has at least the
    /// minimum in force: every in-sync replica holds the records.
    Replicated,
    /// The high watermark reached the required offset, but by the time it was checked
    /// the ISR had shrunk below the minimum in force (`NOT_ENOUGH_REPLICAS_AFTER_APPEND`):
    /// the records are on every replica that *is* in sync, just not on enough of them.
    ReplicatedBelowMinIsr,
}

/// Where an append landed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AppendInfo {
    /// Offset of the first appended record (for a duplicate: of the original batch).
    pub base_offset: i64,
    /// Offset of the last appended record (for a duplicate: of the original batch).
    pub last_offset: i64,
    /// The log start offset after the append.
    pub log_start_offset: i64,
    /// True if this was an idempotent producer's retry of a batch the log already
    /// holds: nothing was appended and the offsets are the original batch's.
    pub duplicate: bool,
    /// Number of records appended (for a duplicate: in the original batch).
    pub record_count: usize,
    /// Bytes appended to the log (0 for a duplicate).
    pub bytes: usize,
    /// The high watermark after the append.
    pub high_watermark: i64,
    /// Whether the append moved the HW (possible when the ISR is the leader alone
    /// and `min.insync.replicas <= 1`): consumer fetches waiting on it may complete.
    pub high_watermark_advanced: bool,
}

/// The outcome of a read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    /// Whole stored batches, concatenated (possibly empty).
    pub records: Bytes,
    /// The partition's high watermark.
    pub high_watermark: i64,
    /// The partition's log start offset.
    pub log_start_offset: i64,
    /// The partition's log end offset.
    pub log_end_offset: i64,
    /// Last stable offset; equal to the HW because this log has no open transactions.
    pub last_stable_offset: i64,
}

/// What a follower fetch changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FollowerUpdate {
    /// The HW moved forward: waiting `acks=all` produces and consumer fetches may
    /// now complete.
    pub high_watermark_advanced: bool,
    /// The follower rejoined the ISR.
    pub isr_changed: bool,
    /// The HW after the update.
    pub high_watermark: i64,
}

/// One follower in a [`PartitionSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FollowerSnapshot {
    /// Broker id.
    pub id: i32,
    /// The follower's LEO.
    pub log_end_offset: i64,
    /// How many offsets it is behind: leader LEO minus its LEO.
    pub lag: i64,
    /// When it last fetched.
    pub last_fetch_time_ms: Option<u64>,
    /// Kafka's `lastCaughtUpTimeMs`.
    pub last_caught_up_time_ms: u64,
    /// Whether it is in the ISR.
    pub in_isr: bool,
}

/// A serializable picture of a partition, for the state API and the web view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionSnapshot {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Broker id of the leader.
    pub leader: i32,
    /// Current leader epoch.
    pub leader_epoch: i32,
    /// All replicas, leader first.
    pub replicas: Vec<i32>,
    /// The in-sync replicas, leader first.
    pub isr: Vec<i32>,
    /// `min.insync.replicas` as configured.
    pub min_insync_replicas: usize,
    /// The minimum in force: `min(min.insync.replicas, replication factor)`.
    pub effective_min_isr: usize,
    /// First offset still stored.
    pub log_start_offset: i64,
    /// Next offset to be assigned.
    pub log_end_offset: i64,
    /// Offset below which every record is on the whole ISR.
    pub high_watermark: i64,
    /// Bytes of stored batches.
    pub size_bytes: usize,
    /// Number of stored batches.
    pub batch_count: usize,
    /// Number of idempotent producers with state on this partition.
    pub producer_count: usize,
    /// The followers, in replica order.
    pub followers: Vec<FollowerSnapshot>,
}

/// A batch as stored: its bytes (with offset and epoch set) and what reads need.
#[derive(Debug, Clone)]
struct StoredBatch {
    base_offset: i64,
    last_offset: i64,
    max_timestamp: i64,
    /// Bytes appended to this partition before this batch, ever (like a file
    /// position): the bytes between two batches are a subtraction away.
    position: u64,
    data: Bytes,
}

/// The leader's copy of one replicated partition: its log, the followers' progress,
/// the ISR, the high watermark and the idempotent producers' state.
#[derive(Debug)]
pub struct Partition {
    topic: String,
    partition: i32,
    leader_id: i32,
    leader_epoch: i32,
    replicas: Vec<i32>,
    config: LogConfig,
    batches: VecDeque<StoredBatch>,
    log_start_offset: i64,
    log_end_offset: i64,
    high_watermark: i64,
    size_bytes: usize,
    next_position: u64,
    followers: Vec<FollowerState>,
    producers: ProducerStateManager,
}

impl Partition {
    /// Creates an empty partition led by `leader_id`. `replicas` lists every replica,
    /// leader first; the leader is put first if it is elsewhere or missing, and repeated
    /// ids are ignored. All replicas start in the ISR with LEO 0 and caught up at
    /// `now_ms`; the leader epoch is 0.
    ///
    /// A `min_insync_replicas` above the number of replicas is capped by it (see
    /// [`Partition::effective_min_isr`]).
    pub fn new(
        topic: &str,
        partition: i32,
        leader_id: i32,
        replicas: Vec<i32>,
        config: LogConfig,
        now_ms: u64,
    ) -> Self {
        let mut all = vec![leader_id];
        for id in replicas {
            if !all.contains(&id) {
                all.push(id);
            }
        }
        let followers = all[1..]
            .iter()
            .map(|&id| FollowerState::new(id, now_ms))
            .collect();
        let mut partition = Partition {
            topic: topic.to_string(),
            partition,
            leader_id,
            leader_epoch: 0,
            replicas: all,
            config,
            batches: VecDeque::new(),
            log_start_offset: 0,
            log_end_offset: 0,
            high_watermark: 0,
            size_bytes: 0,
            next_position: 0,
            followers,
            producers: ProducerStateManager::default(),
        };
        partition.maybe_advance_high_watermark();
        partition
    }

    /// Appends a producer's `records` as the leader, Kafka's `appendRecordsToLeader`:
    /// with `required_acks == -1` (`acks=all`) the write is refused with
    /// [`AppendError::NotEnoughReplicas`] if the ISR is already smaller than the minimum
    /// in force, and nothing is appended; otherwise it is [`Partition::append`].
    pub fn append_as_leader(
        &mut self,
        records: Bytes,
        required_acks: i16,
        now_ms: u64,
    ) -> Result<AppendInfo, AppendError> {
        if required_acks == -1 && !self.has_min_insync_replicas() {
            return Err(AppendError::NotEnoughReplicas {
                isr_size: self.isr_len(),
                min_isr: self.effective_min_isr(),
            });
        }
        self.append(records, now_ms)
    }

    /// Appends the `records` of one produce partition: one or more v2 record batches.
    ///
    /// Every batch is validated first (complete, magic 2, CRC, size, consistent header,
    /// producer sequence); if any fails, nothing is appended. Each batch is then stored
    /// as received except for its `baseOffset` (set to the next offset) and
    /// `partitionLeaderEpoch`, both outside the CRC. The LEO advances past the new
    /// records; the HW moves only if the ISR is the leader alone (and
    /// `min.insync.replicas <= 1`), otherwise it waits for follower fetches.
    ///
    /// If an idempotent batch is a retry of one already appended, nothing is appended
    /// and the original offsets are returned with `duplicate: true`. A retry must come
    /// alone: a duplicate among several batches is refused as `INVALID_RECORD`, so the
    /// batches beside it are never acknowledged without being appended.
    ///
    /// Each batch is copied into its own buffer, so the log never keeps alive the
    /// request buffer `records` was cut from and [`Partition::size_bytes`] is the
    /// memory really held.
    pub fn append(&mut self, records: Bytes, now_ms: u64) -> Result<AppendInfo, AppendError> {
        let spans = split_and_validate(&records, self.config.max_batch_bytes)?;

        // Pass 1: assign offsets and check producer sequences, changing nothing.
        let mut pending = PendingProducerUpdates::default();
        let mut next_offset = self.log_end_offset;
        let mut placed = Vec::with_capacity(spans.len());
        for span in &spans {
            let header = &span.header;
            let base_offset = next_offset;
            let last_offset = base_offset
                .checked_add(i64::from(header.last_offset_delta))
                .filter(|last| *last < i64::MAX)
                .ok_or_else(|| AppendError::InvalidRecord {
                    reason: "offsets would overflow".to_string(),
                })?;
            next_offset = last_offset + 1;
            if header.is_idempotent() {
                let check = pending.check_and_stage(
                    &self.producers,
                    header,
                    base_offset,
                    last_offset,
                    now_ms,
                )?;
                if let SequenceCheck::Duplicate(original) = check {
                    if spans.len() > 1 {
                        return Err(AppendError::InvalidRecord {
                            reason: format!(
                                "batch {} of {} is a retry of offsets {}..={} and a retry must come alone",
                                placed.len() + 1,
                                spans.len(),
                                original.base_offset,
                                original.last_offset
                            ),
                        });
                    }
                    return Ok(AppendInfo {
                        base_offset: original.base_offset,
                        last_offset: original.last_offset,
                        log_start_offset: self.log_start_offset,
                        duplicate: true,
                        record_count: usize::try_from(
                            original.last_offset - original.base_offset + 1,
                        )
                        .unwrap_or(0),
                        bytes: 0,
                        high_watermark: self.high_watermark,
                        high_watermark_advanced: false,
                    });
                }
            }
            placed.push((span, base_offset, last_offset));
        }

        // Pass 2: everything is valid; store the batches.
        let mut appended_bytes = 0usize;
        for (span, base_offset, last_offset) in placed {
            let mut data = BytesMut::with_capacity(span.len);
            data.extend_from_slice(&records[span.start..span.start + span.len]);
            set_offset_and_epoch(&mut data, base_offset, self.leader_epoch);
            self.batches.push_back(StoredBatch {
                base_offset,
                last_offset,
                max_timestamp: span.header.max_timestamp,
                position: self.next_position,
                data: data.freeze(),
            });
            self.next_position += span.len as u64;
            self.size_bytes += span.len;
            appended_bytes += span.len;
        }
        self.producers.commit(pending);
        let base_offset = self.log_end_offset;
        self.log_end_offset = next_offset;
        let high_watermark_advanced = self.maybe_advance_high_watermark();
        Ok(AppendInfo {
            base_offset,
            last_offset: next_offset - 1,
            log_start_offset: self.log_start_offset,
            duplicate: false,
            record_count: usize::try_from(next_offset - base_offset).unwrap_or(0),
            bytes: appended_bytes,
            high_watermark: self.high_watermark,
            high_watermark_advanced,
        })
    }

    /// The offset up to which `bound` lets a reader see.
    fn bound_offset(&self, bound: ReadBound) -> i64 {
        match bound {
            ReadBound::HighWatermark => self.high_watermark,
            ReadBound::LogEnd => self.log_end_offset,
        }
    }

    /// Index range of the stored batches a read at `fetch_offset` may return: from the
    /// batch containing `fetch_offset` up to the last batch entirely below `bound`.
    /// Empty if there is nothing to read or the offset is out of range.
    fn readable_batches(&self, fetch_offset: i64, bound: ReadBound) -> std::ops::Range<usize> {
        if fetch_offset < self.log_start_offset || fetch_offset > self.log_end_offset {
            return 0..0;
        }
        let bound_offset = self.bound_offset(bound);
        if fetch_offset >= bound_offset {
            // A reader that has caught up (the common case for a parked fetch being
            // re-checked): nothing to search for.
            return 0..0;
        }
        let first = self
            .batches
            .partition_point(|b| b.last_offset < fetch_offset);
        let end = self
            .batches
            .partition_point(|b| b.last_offset < bound_offset);
        if first >= end {
            0..0
        } else {
            first..end
        }
    }

    /// Reads whole batches starting with the one that contains `fetch_offset`.
    ///
    /// Returns batches up to `max_bytes` in total, but always at least one if any is
    /// readable, even if larger (KIP-74: a consumer must always make progress). With
    /// [`ReadBound::HighWatermark`] only batches entirely below the HW are returned, and
    /// a fetch offset in `[HW, LEO]` gets no records and no error; with
    /// [`ReadBound::LogEnd`] (followers) the whole log is readable. A fetch offset below
    /// the log start offset or above the LEO is [`ReadError::OffsetOutOfRange`].
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        isolation: ReadBound,
    ) -> Result<ReadResult, ReadError> {
        if fetch_offset < self.log_start_offset || fetch_offset > self.log_end_offset {
            return Err(ReadError::OffsetOutOfRange {
                fetch_offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        let range = self.readable_batches(fetch_offset, isolation);
        let mut taken = range.start..range.start;
        let mut total = 0usize;
        for index in range {
            let len = self.batches[index].data.len();
            if taken.is_empty() || total + len <= max_bytes {
                total += len;
                taken.end = index + 1;
            } else {
                break;
            }
        }
        let records = match taken.len() {
            0 => Bytes::new(),
            1 => self.batches[taken.start].data.clone(),
            _ => {
                let mut joined = BytesMut::with_capacity(total);
                for index in taken {
                    joined.extend_from_slice(&self.batches[index].data);
                }
                joined.freeze()
            }
        };
        Ok(ReadResult {
            records,
            high_watermark: self.high_watermark,
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
            last_stable_offset: self.high_watermark,
        })
    }

    /// How many bytes a read at `fetch_offset` with this bound could return, ignoring
    /// `max_bytes`: what `DelayedFetch` compares with `min_bytes`. O(log n). Zero if the
    /// offset is out of range.
    pub fn bytes_available(&self, fetch_offset: i64, bound: ReadBound) -> usize {
        let range = self.readable_batches(fetch_offset, bound);
        if range.is_empty() {
            return 0;
        }
        let first = &self.batches[range.start];
        let last = &self.batches[range.end - 1];
        let end_position = last.position + last.data.len() as u64;
        usize::try_from(end_position - first.position).unwrap_or(usize::MAX)
    }

    /// Records a fetch by follower `replica_id` at `fetch_offset` (its LEO), made at
    /// `now_ms`.
    ///
    /// Updates the follower's LEO and last caught-up time (Kafka's rule, see
    /// [`crate::replica`]), lets it rejoin the ISR if it is out and its LEO has reached
    /// the HW, then recomputes the HW. Errors leave everything unchanged: an id that is
    /// not a follower of this partition, or a fetch offset outside
    /// `[log start, leader LEO]`.
    pub fn update_follower_fetch(
        &mut self,
        replica_id: i32,
        fetch_offset: i64,
        now_ms: u64,
    ) -> Result<FollowerUpdate, FollowerError> {
        let leader_log_end_offset = self.log_end_offset;
        let log_start_offset = self.log_start_offset;
        let high_watermark = self.high_watermark;
        let follower = self
            .followers
            .iter_mut()
            .find(|f| f.replica_id == replica_id)
            .ok_or(FollowerError::NotAReplica { replica_id })?;
        if fetch_offset < log_start_offset || fetch_offset > leader_log_end_offset {
            return Err(FollowerError::OffsetOutOfRange {
                fetch_offset,
                log_start_offset,
                log_end_offset: leader_log_end_offset,
            });
        }
        follower.record_fetch(fetch_offset, leader_log_end_offset, now_ms);
        let mut isr_changed = false;
        if !follower.in_isr && follower.log_end_offset >= high_watermark {
            follower.in_isr = true;
            isr_changed = true;
        }
        let high_watermark_advanced = self.maybe_advance_high_watermark();
        Ok(FollowerUpdate {
            high_watermark_advanced,
            isr_changed,
            high_watermark: self.high_watermark,
        })
    }

    /// Kafka's periodic ISR shrink check (the broker runs it every
    /// `replica.lag.time.max.ms / 2`): every in-sync follower that is not caught up —
    /// its LEO differs from the leader's and it was last caught up more than
    /// `replica.lag.time.max.ms` ago — leaves the ISR. The leader never leaves. The HW
    /// is then recomputed (a smaller ISR may let it advance). Returns the removed ids.
    pub fn maybe_shrink_isr(&mut self, now_ms: u64) -> Vec<i32> {
        let leader_log_end_offset = self.log_end_offset;
        let max_lag = self.config.replica_lag_time_max_ms;
        let mut removed = Vec::new();
        for follower in &mut self.followers {
            if follower.in_isr && !follower.is_caught_up(leader_log_end_offset, now_ms, max_lag) {
                follower.in_isr = false;
                removed.push(follower.replica_id);
            }
        }
        if !removed.is_empty() {
            self.maybe_advance_high_watermark();
        }
        removed
    }

    /// Recomputes the HW as the minimum LEO over the ISR; moves it only forward, and
    /// only while the ISR has at least the minimum in force (KIP-966). Returns whether
    /// it moved.
    fn maybe_advance_high_watermark(&mut self) -> bool {
        if !self.has_min_insync_replicas() {
            return false;
        }
        let candidate = self
            .followers
            .iter()
            .filter(|f| f.in_isr)
            .map(|f| f.log_end_offset)
            .fold(self.log_end_offset, i64::min);
        if candidate > self.high_watermark {
            self.high_watermark = candidate;
            true
        } else {
            false
        }
    }

    /// The high watermark: records below it are on every in-sync replica.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// The log end offset (the leader's LEO): the offset of the next record.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// The first offset still stored.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    /// The last stable offset; equal to the HW (no transactions here).
    pub fn last_stable_offset(&self) -> i64 {
        self.high_watermark
    }

    /// The current leader epoch (always 0: leadership never moves in this model).
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    /// Broker id of the leader.
    pub fn leader_id(&self) -> i32 {
        self.leader_id
    }

    /// Topic name.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Partition index.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// The log configuration.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// All replicas, leader first.
    pub fn replicas(&self) -> &[i32] {
        &self.replicas
    }

    /// The in-sync replicas: the leader first, then the in-sync followers by id.
    pub fn isr(&self) -> Vec<i32> {
        let mut followers: Vec<i32> = self
            .followers
            .iter()
            .filter(|f| f.in_isr)
            .map(|f| f.replica_id)
            .collect();
        followers.sort_unstable();
        let mut isr = Vec::with_capacity(followers.len() + 1);
        isr.push(self.leader_id);
        isr.extend(followers);
        isr
    }

    /// Number of in-sync replicas, leader included.
    pub fn isr_len(&self) -> usize {
        1 + self.followers.iter().filter(|f| f.in_isr).count()
    }

    /// `min.insync.replicas` as configured for this partition's topic.
    pub fn min_insync_replicas(&self) -> usize {
        self.config.min_insync_replicas
    }

    /// The minimum ISR in force: `min(min.insync.replicas, replication factor)`, Kafka's
    /// `effectiveMinIsr`. A configured minimum above the replica count would make the
    /// partition unwritable with `acks=all` forever, so the replica count caps it.
    pub fn effective_min_isr(&self) -> usize {
        self.config
            .min_insync_replicas
            .min(self.replicas.len())
            .max(1)
    }

    /// Whether the ISR has at least the minimum in force, i.e. whether an `acks=all`
    /// produce may be appended (else `NOT_ENOUGH_REPLICAS`) and the HW may move.
    pub fn has_min_insync_replicas(&self) -> bool {
        self.isr_len() >= self.effective_min_isr()
    }

    /// Whether an `acks=all` write that needs the HW at `required_offset` (the offset
    /// after its last record) is done, Kafka's `checkEnoughReplicasReachOffset`.
    pub fn replication_state(&self, required_offset: i64) -> ReplicationState {
        if self.high_watermark < required_offset {
            ReplicationState::Pending
        } else if self.has_min_insync_replicas() {
            ReplicationState::Replicated
        } else {
            ReplicationState::ReplicatedBelowMinIsr
        }
    }

    /// The leader's view of follower `id`, or `None` if `id` is not a follower.
    pub fn follower(&self, id: i32) -> Option<&FollowerState> {
        self.followers.iter().find(|f| f.replica_id == id)
    }

    /// All followers, in replica order.
    pub fn followers(&self) -> &[FollowerState] {
        &self.followers
    }

    /// The state of an idempotent producer on this partition, if known.
    pub fn producer_state(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.producers.producer(producer_id)
    }

    /// Number of idempotent producers with state on this partition.
    pub fn producer_count(&self) -> usize {
        self.producers.len()
    }

    /// Bytes of stored batches.
    pub fn size_bytes(&self) -> usize {
        self.size_bytes
    }

    /// Number of stored batches.
    pub fn batch_count(&self) -> usize {
        self.batches.len()
    }

    /// Drops the oldest batch if it lies entirely below the HW, advancing the log start
    /// offset past it. Returns the bytes freed.
    fn drop_oldest_replicated_batch(&mut self) -> usize {
        match self.batches.front() {
            Some(oldest) if oldest.last_offset < self.high_watermark => {}
            _ => return 0,
        }
        let Some(oldest) = self.batches.pop_front() else {
            return 0;
        };
        self.log_start_offset = oldest.last_offset + 1;
        self.size_bytes -= oldest.data.len();
        oldest.data.len()
    }

    /// Applies `retention.bytes`: while the partition holds more bytes than allowed,
    /// deletes its oldest batch, but only batches entirely below the HW, so data not
    /// yet on every in-sync replica is never lost. (Kafka deletes whole segments, also
    /// only below the HW.) Moves the log start offset. Returns the bytes freed.
    pub fn enforce_retention(&mut self) -> usize {
        let Ok(limit) = usize::try_from(self.config.retention_bytes) else {
            return 0; // negative: unlimited
        };
        let mut freed = 0;
        while self.size_bytes > limit {
            let dropped = self.drop_oldest_replicated_batch();
            if dropped == 0 {
                break;
            }
            freed += dropped;
        }
        freed
    }

    /// For a broker-wide memory cap: drops the oldest batch if it lies entirely below
    /// the HW. Returns the bytes freed, 0 if there was no such batch.
    pub fn evict_oldest_batch(&mut self) -> usize {
        self.drop_oldest_replicated_batch()
    }

    /// The batches a consumer may see: those entirely below the HW.
    fn committed_batches(&self) -> impl Iterator<Item = &StoredBatch> + '_ {
        self.batches
            .iter()
            .take_while(move |b| b.last_offset < self.high_watermark)
    }

    /// ListOffsets by timestamp: the first committed record (below the HW) whose
    /// timestamp is at least `timestamp`, as `(offset, its timestamp)`; `None` if there
    /// is none (Kafka then answers offset -1).
    ///
    /// The batch is found from its `maxTimestamp`. Inside an uncompressed batch the
    /// exact record is found; a compressed batch is not decompressed, so the answer is
    /// its base offset and max timestamp, and the consumer skips the older records
    /// itself. The special timestamps -1 (latest) and -2 (earliest) are the broker's
    /// business: [`Partition::high_watermark`] and [`Partition::log_start_offset`].
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Option<(i64, i64)> {
        let batch = self
            .committed_batches()
            .find(|b| b.max_timestamp >= timestamp)?;
        let exact = record_offsets_and_timestamps(&batch.data)
            .and_then(|records| records.into_iter().find(|&(_, t)| t >= timestamp));
        Some(exact.unwrap_or((batch.base_offset, batch.max_timestamp)))
    }

    /// ListOffsets with timestamp -3 (KIP-734): the committed record with the largest
    /// timestamp (the first one, on ties), as `(offset, timestamp)`; `None` if nothing
    /// is committed. Record-exact for uncompressed batches, the batch's base offset for
    /// compressed ones.
    pub fn offset_for_max_timestamp(&self) -> Option<(i64, i64)> {
        // `reduce` keeps the earlier batch on ties.
        let batch = self.committed_batches().reduce(|best, batch| {
            if batch.max_timestamp > best.max_timestamp {
                batch
            } else {
                best
            }
        })?;
        let exact = record_offsets_and_timestamps(&batch.data)
            .and_then(|records| records.into_iter().find(|&(_, t)| t == batch.max_timestamp));
        Some(exact.unwrap_or((batch.base_offset, batch.max_timestamp)))
    }

    /// OffsetForLeaderEpoch: the end offset of leader epoch `epoch`, as
    /// `(epoch, end offset)`. For the current epoch that is `(current, LEO)`. Only epoch 0
    /// ever exists here, so any other epoch, older or newer, is unknown and answers
    /// `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)` = `(-1, -1)`, as Kafka's leader-epoch
    /// cache does for an epoch above its latest.
    pub fn end_offset_for_leader_epoch(&self, epoch: i32) -> (i32, i64) {
        if epoch == self.leader_epoch {
            (self.leader_epoch, self.log_end_offset)
        } else {
            (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        }
    }

    /// A serializable picture of the partition.
    pub fn snapshot(&self) -> PartitionSnapshot {
        PartitionSnapshot {
            topic: self.topic.clone(),
            partition: self.partition,
            leader: self.leader_id,
            leader_epoch: self.leader_epoch,
            replicas: self.replicas.clone(),
            isr: self.isr(),
            min_insync_replicas: self.config.min_insync_replicas,
            effective_min_isr: self.effective_min_isr(),
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
            high_watermark: self.high_watermark,
            size_bytes: self.size_bytes,
            batch_count: self.batches.len(),
            producer_count: self.producers.len(),
            followers: self
                .followers
                .iter()
                .map(|f| FollowerSnapshot {
                    id: f.replica_id,
                    log_end_offset: f.log_end_offset,
                    lag: self.log_end_offset - f.log_end_offset,
                    last_fetch_time_ms: f.last_fetch_time_ms,
                    last_caught_up_time_ms: f.last_caught_up_time_ms,
                    in_isr: f.in_isr,
                })
                .collect(),
        }
    }
}
