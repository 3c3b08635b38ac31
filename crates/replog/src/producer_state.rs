//! # Producer state: how idempotent producers get exactly-once appends
//!
//! A producer that retries a produce request after a timeout cannot know whether
//! the first attempt was written. Without help, the retry writes the records twice.
//! Kafka's **idempotent producer** fixes this: the broker hands the producer a
//! *producer id* (InitProducerId) and an *epoch*, and the producer numbers its
//! records per partition with a **sequence number** starting at 0. Each batch carries
//! `producerId`, `producerEpoch` and `baseSequence` in its header; the batch covers
//! sequences `baseSequence ..= baseSequence + lastOffsetDelta` (wrapping from
//! `i32::MAX` to 0).
//!
//! Per partition, the leader keeps for every producer id its current epoch and the
//! metadata of the last five batches it appended (a producer has at most five
//! requests in flight, so a retry always targets one of them). For a new batch:
//!
//! | batch epoch vs known | sequence                               | outcome |
//! |----------------------|----------------------------------------|---------|
//! | same                 | same first and last seq as a cached batch | **duplicate**: acknowledged with the cached offsets, not appended |
//! | same                 | first seq = newest last seq + 1        | appended |
//! | same                 | anything else                          | `OUT_OF_ORDER_SEQUENCE_NUMBER` |
//! | higher (new epoch)   | 0                                      | appended; the producer's entry restarts |
//! | higher               | not 0                                  | `OUT_OF_ORDER_SEQUENCE_NUMBER` |
//! | lower                | any                                    | `INVALID_PRODUCER_EPOCH` (a newer instance fenced this one) |
//! | unknown producer     | any                                    | appended; the entry starts at that sequence |
//!
//! These are Kafka's rules (`ProducerAppendInfo.checkSequence`), measured against Kafka
//! 4.4. The last row is Kafka's since 2.5: a partition that has no state for a producer
//! id accepts whatever sequence it starts with, because the state may have been lost
//! (retention deleted the producer's batches, or `producer.id.expiration.ms` passed)
//! while the producer lived on. From that first batch on, the usual rules apply.
//!
//! **Bounded memory.** The state is capped at [`MAX_PRODUCER_IDS_PER_PARTITION`] producer
//! ids per partition. When a new producer id arrives at the cap, the least recently
//! appending producer is forgotten (LRU). A forgotten producer that writes again is an
//! unknown producer (last row above): its batch is appended, but a retry of a batch it
//! wrote before it was forgotten is no longer recognised as a duplicate; with 10,000 ids
//! per partition this only happens to producers idle while thousands of others wrote.
//!
//! **Followers and truncation.** A follower appends what the leader already accepted, so
//! it checks no sequence: it records each idempotent batch as the leader did
//! ([`PendingProducerUpdates::stage_replicated`]). Its state is then the leader's, and
//! once promoted it goes on recognising the retries of batches the old leader acked.
//! Truncating a log removes batches the state may remember, so the state is rebuilt from
//! the headers of the batches that remain ([`ProducerStateManager::rebuilt_from`]): a
//! retry of a truncated batch is then appended again, as it must be, since the log no
//! longer holds it.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::Serialize;

use crate::batch::{increment_sequence, BatchHeader};
use crate::error::AppendError;

/// How many recent batches are remembered per producer (Kafka's
/// `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`, matching the client's
/// `max.in.flight.requests.per.connection <= 5` for idempotence).
pub const PRODUCER_BATCH_CACHE_SIZE: usize = 5;

/// Upper bound on producer ids remembered per partition; beyond it the least
/// recently used producer's state is evicted.
pub const MAX_PRODUCER_IDS_PER_PARTITION: usize = 10_000;

/// What the log remembers about one appended idempotent batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BatchMetadata {
    /// `baseSequence` of the batch.
    pub first_sequence: i32,
    /// Sequence of its last record.
    pub last_sequence: i32,
    /// Offset the log gave its first record.
    pub base_offset: i64,
    /// Offset the log gave its last record.
    pub last_offset: i64,
}

/// The state of one producer id on one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProducerStateEntry {
    /// The producer id.
    pub producer_id: i64,
    /// The newest epoch seen for this id.
    pub producer_epoch: i16,
    /// The last (at most [`PRODUCER_BATCH_CACHE_SIZE`]) batches appended in this
    /// epoch, oldest first.
    pub batches: VecDeque<BatchMetadata>,
    /// `now_ms` of the last append from this producer.
    pub last_append_time_ms: u64,
    /// The largest record timestamp of its last batch (-1 before one): what
    /// DescribeProducers calls its last timestamp.
    pub last_timestamp: i64,
}

/// What the sequence check decided for one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// The batch is the next one in sequence (or starts a new epoch): append it.
    Append,
    /// The batch was already appended: acknowledge it with these original offsets.
    Duplicate(BatchMetadata),
}

impl ProducerStateEntry {
    fn new(producer_id: i64, producer_epoch: i16) -> Self {
        ProducerStateEntry {
            producer_id,
            producer_epoch,
            batches: VecDeque::with_capacity(PRODUCER_BATCH_CACHE_SIZE),
            last_append_time_ms: 0,
            last_timestamp: -1,
        }
    }

    /// The sequence number this producer must use next in its current epoch.
    pub fn next_sequence(&self) -> i32 {
        self.batches
            .back()
            .map_or(0, |newest| increment_sequence(newest.last_sequence, 1))
    }

    /// Finds a cached batch with exactly this sequence range.
    fn find_duplicate(&self, first_sequence: i32, last_sequence: i32) -> Option<BatchMetadata> {
        self.batches
            .iter()
            .find(|b| b.first_sequence == first_sequence && b.last_sequence == last_sequence)
            .copied()
    }

    /// Records an appended batch; a higher epoch starts the entry afresh.
    fn record(&mut self, epoch: i16, batch: BatchMetadata, now_ms: u64) {
        if epoch != self.producer_epoch {
            self.producer_epoch = epoch;
            self.batches.clear();
        }
        if self.batches.len() == PRODUCER_BATCH_CACHE_SIZE {
            self.batches.pop_front();
        }
        self.batches.push_back(batch);
        self.last_append_time_ms = now_ms;
    }
}

/// Applies the rules in the module documentation to one idempotent batch, given the
/// producer's current entry (`None` for a producer this partition does not know).
pub fn check_sequence(
    entry: Option<&ProducerStateEntry>,
    header: &BatchHeader,
) -> Result<SequenceCheck, AppendError> {
    let first = header.base_sequence;
    let out_of_order = |expected_sequence: i32| AppendError::OutOfOrderSequence {
        producer_id: header.producer_id,
        producer_epoch: header.producer_epoch,
        expected_sequence,
        first_sequence: first,
    };
    let Some(entry) = entry else {
        return Ok(SequenceCheck::Append);
    };
    if header.producer_epoch < entry.producer_epoch {
        return Err(AppendError::InvalidProducerEpoch {
            producer_id: header.producer_id,
            producer_epoch: header.producer_epoch,
            current_epoch: entry.producer_epoch,
        });
    }
    if header.producer_epoch > entry.producer_epoch {
        return if first == 0 {
            Ok(SequenceCheck::Append)
        } else {
            Err(out_of_order(0))
        };
    }
    if let Some(original) = entry.find_duplicate(first, header.last_sequence()) {
        return Ok(SequenceCheck::Duplicate(original));
    }
    let expected = entry.next_sequence();
    if first == expected {
        Ok(SequenceCheck::Append)
    } else {
        Err(out_of_order(expected))
    }
}

/// Producer state changes staged while a multi-batch `records` blob is validated.
/// Nothing reaches the [`ProducerStateManager`] until the whole blob has passed, so a
/// rejected append leaves the producer state untouched (Kafka's `ProducerAppendInfo`).
#[derive(Debug, Default)]
pub struct PendingProducerUpdates {
    staged: HashMap<i64, ProducerStateEntry>,
}

impl PendingProducerUpdates {
    /// Checks one idempotent batch against the state as it would be after the batches
    /// staged so far, and stages it if it is to be appended at
    /// `base_offset..=last_offset`.
    pub fn check_and_stage(
        &mut self,
        manager: &ProducerStateManager,
        header: &BatchHeader,
        base_offset: i64,
        last_offset: i64,
        now_ms: u64,
    ) -> Result<SequenceCheck, AppendError> {
        let pid = header.producer_id;
        let current = self.staged.get(&pid).or_else(|| manager.producer(pid));
        let outcome = check_sequence(current, header)?;
        if outcome == SequenceCheck::Append {
            let mut entry = current
                .cloned()
                .unwrap_or_else(|| ProducerStateEntry::new(pid, header.producer_epoch));
            let metadata = BatchMetadata {
                first_sequence: header.base_sequence,
                last_sequence: header.last_sequence(),
                base_offset,
                last_offset,
            };
            entry.record(header.producer_epoch, metadata, now_ms);
            entry.last_timestamp = header.max_timestamp;
            self.staged.insert(pid, entry);
        }
        Ok(outcome)
    }
}

impl PendingProducerUpdates {
    /// Stages an idempotent batch that a leader already appended at
    /// `base_offset..=last_offset` (a follower's append, or replaying a log): no sequence
    /// is checked, the log is the truth. A batch of an epoch older than the producer's
    /// known one is not recorded, as it cannot change what the producer may send next.
    pub fn stage_replicated(
        &mut self,
        manager: &ProducerStateManager,
        header: &BatchHeader,
        base_offset: i64,
        last_offset: i64,
        now_ms: u64,
    ) {
        let pid = header.producer_id;
        let current = self.staged.get(&pid).or_else(|| manager.producer(pid));
        if current.is_some_and(|entry| header.producer_epoch < entry.producer_epoch) {
            return;
        }
        let mut entry = current
            .cloned()
            .unwrap_or_else(|| ProducerStateEntry::new(pid, header.producer_epoch));
        let metadata = BatchMetadata {
            first_sequence: header.base_sequence,
            last_sequence: header.last_sequence(),
            base_offset,
            last_offset,
        };
        entry.record(header.producer_epoch, metadata, now_ms);
        entry.last_timestamp = header.max_timestamp;
        self.staged.insert(pid, entry);
    }
}

/// All producer state of one partition, bounded by an LRU cap on producer ids.
#[derive(Debug)]
pub struct ProducerStateManager {
    producers: HashMap<i64, (ProducerStateEntry, u64)>,
    /// Use stamp -> producer id, oldest first: the eviction order.
    lru: BTreeMap<u64, i64>,
    next_stamp: u64,
    max_producer_ids: usize,
}

impl Default for ProducerStateManager {
    fn default() -> Self {
        ProducerStateManager::new(MAX_PRODUCER_IDS_PER_PARTITION)
    }
}

impl ProducerStateManager {
    /// An empty manager remembering at most `max_producer_ids` producers (at least 1).
    pub fn new(max_producer_ids: usize) -> Self {
        ProducerStateManager {
            producers: HashMap::new(),
            lru: BTreeMap::new(),
            next_stamp: 0,
            max_producer_ids: max_producer_ids.max(1),
        }
    }

    /// The state of one producer id, if known.
    pub fn producer(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.producers.get(&producer_id).map(|(entry, _)| entry)
    }

    /// Every producer remembered, in no particular order.
    pub fn producers(&self) -> impl Iterator<Item = &ProducerStateEntry> {
        self.producers.values().map(|(entry, _)| entry)
    }

    /// Number of producer ids remembered.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Whether no producer is remembered.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// The state a log's batches imply, replayed in offset order from their headers (as
    /// stored: with their real base offsets), with the same cap as `self`. Each
    /// producer keeps the last append time `self` knew for it (0 if none), so a rebuild
    /// changes what is remembered, not when it was written.
    pub fn rebuilt_from(
        &self,
        headers: impl IntoIterator<Item = BatchHeader>,
    ) -> ProducerStateManager {
        let mut rebuilt = ProducerStateManager::new(self.max_producer_ids);
        for header in headers {
            if !header.is_idempotent() {
                continue;
            }
            let then = self
                .producer(header.producer_id)
                .map_or(0, |entry| entry.last_append_time_ms);
            let mut pending = PendingProducerUpdates::default();
            let (base_offset, last_offset) = (header.base_offset, header.last_offset());
            pending.stage_replicated(&rebuilt, &header, base_offset, last_offset, then);
            rebuilt.commit(pending);
        }
        rebuilt
    }

    /// A transaction marker of `producer_epoch` for `producer_id` was appended: from now
    /// on the producer's epoch here is at least that one, so an older one is fenced, and
    /// a newer epoch's batches start again at sequence 0. A producer this partition does
    /// not know is left unknown.
    pub fn on_marker(&mut self, producer_id: i64, producer_epoch: i16) {
        if let Some((entry, _)) = self.producers.get_mut(&producer_id) {
            if producer_epoch > entry.producer_epoch {
                entry.producer_epoch = producer_epoch;
                entry.batches.clear();
            }
        }
    }

    /// Makes the staged changes of a successful append permanent, evicting the least
    /// recently used producers if the cap is exceeded.
    pub fn commit(&mut self, pending: PendingProducerUpdates) {
        for (pid, entry) in pending.staged {
            let stamp = self.next_stamp;
            self.next_stamp += 1;
            if let Some((_, old_stamp)) = self.producers.insert(pid, (entry, stamp)) {
                self.lru.remove(&old_stamp);
            }
            self.lru.insert(stamp, pid);
        }
        while self.producers.len() > self.max_producer_ids {
            let Some((_, victim)) = self.lru.pop_first() else {
                break;
            };
            self.producers.remove(&victim);
        }
    }
}
