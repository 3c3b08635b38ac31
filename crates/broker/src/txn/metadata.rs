//! One transactional id's state, and the moves the transaction APIs make on it (Kafka's
//! `TransactionMetadata` and `TransactionState`). Pure: the coordinator
//! ([`super::TransactionCoordinator`]) holds the lock, the clock and the side effects.
//!
//! ```text
//!            AddPartitionsToTxn / AddOffsetsToTxn
//!   Empty ───────────────────────────────────────► Ongoing ──EndTxn(commit)──► PrepareCommit ──markers replicated──► CompleteCommit
//!     ▲                                               │  ╲                                                                  │
//!     │                                               │   ╲─EndTxn(abort), or timeout──► PrepareAbort ──markers──► CompleteAbort
//!     └────── InitProducerId (epoch + 1) ◄────────────┴──────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! A Complete state is where the next transaction starts from, as Empty is. While a
//! Prepare state waits for its markers, every request but a retry of the same EndTxn is
//! CONCURRENT_TRANSACTIONS: the client retries until the transaction is complete.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;

use crate::partition::TopicPartition;

/// Where a transactional id's current transaction stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnState {
    /// No transaction yet for the current epoch.
    Empty,
    /// A transaction is open: partitions or offsets were added to it.
    Ongoing,
    /// EndTxn(commit) was accepted; the COMMIT markers are being written.
    PrepareCommit,
    /// EndTxn(abort), a timeout or a new producer instance is aborting it; the ABORT
    /// markers are being written.
    PrepareAbort,
    /// The last transaction committed.
    CompleteCommit,
    /// The last transaction aborted.
    CompleteAbort,
}

impl TxnState {
    /// Whether a transaction is open or ending.
    pub fn in_flight(self) -> bool {
        matches!(
            self,
            TxnState::Ongoing | TxnState::PrepareCommit | TxnState::PrepareAbort
        )
    }

    /// Kafka's name for it, as DescribeTransactions and the live view say it.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
        }
    }
}

/// One transactional id's state.
#[derive(Debug, Clone)]
pub struct TxnMetadata {
    /// The transactional id.
    pub transactional_id: String,
    /// Its producer id.
    pub producer_id: i64,
    /// Its current epoch: an older one is fenced.
    pub producer_epoch: i16,
    /// `transaction.timeout.ms` as the producer gave it.
    pub timeout_ms: u64,
    /// Where it stands.
    pub state: TxnState,
    /// The partitions of the open transaction: those it wrote to, and the
    /// `__consumer_offsets` partition of each group whose offsets it commits.
    pub partitions: BTreeSet<TopicPartition>,
    /// When the open transaction started (broker clock, ms): its timeout counts from here.
    pub started_ms: u64,
    /// The same moment on the wall clock (ms since the epoch), as DescribeTransactions
    /// reports it.
    pub started_wall_ms: i64,
    /// When its state last changed.
    pub updated_ms: u64,
    /// The producer id and epoch that the last EndTxn v5+ came with, before it bumped the
    /// epoch (transaction version 2): a retry of that EndTxn still carries them.
    pub ended_with: Option<(i64, i16)>,
}

impl TxnMetadata {
    /// A new transactional id at epoch 0, no transaction.
    pub fn new(transactional_id: &str, producer_id: i64, timeout_ms: u64, now_ms: u64) -> Self {
        TxnMetadata {
            transactional_id: transactional_id.to_string(),
            producer_id,
            producer_epoch: 0,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            started_ms: now_ms,
            started_wall_ms: -1,
            updated_ms: now_ms,
            ended_with: None,
        }
    }

    /// Checks that a request from (`producer_id`, `producer_epoch`) may act on this
    /// transactional id: another producer id is INVALID_PRODUCER_ID_MAPPING, an older
    /// epoch PRODUCER_FENCED (a newer instance took the id over).
    pub fn check_producer(
        &self,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<(), ResponseError> {
        if producer_id != self.producer_id {
            Err(ResponseError::InvalidProducerIdMapping)
        } else if producer_epoch < self.producer_epoch {
            Err(ResponseError::ProducerFenced)
        } else if producer_epoch > self.producer_epoch {
            Err(ResponseError::InvalidProducerEpoch)
        } else {
            Ok(())
        }
    }

    /// The open transaction takes more partitions (AddPartitionsToTxn, or AddOffsetsToTxn
    /// with the group's `__consumer_offsets` partition): from Empty or Complete, that
    /// opens a new one. CONCURRENT_TRANSACTIONS while the last one is still ending.
    pub fn add(&mut self, partitions: &[TopicPartition], now_ms: u64) -> Result<(), ResponseError> {
        match self.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                return Err(ResponseError::ConcurrentTransactions)
            }
            TxnState::Ongoing => {}
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                self.state = TxnState::Ongoing;
                self.partitions.clear();
                self.started_ms = now_ms;
                self.started_wall_ms = crate::record_batch::wall_clock_ms();
            }
        }
        self.partitions.extend(partitions.iter().cloned());
        self.updated_ms = now_ms;
        Ok(())
    }

    /// EndTxn: what it does from here. `Ok(true)` starts the markers (the state is now
    /// PrepareCommit or PrepareAbort); `Ok(false)` is a retry of an EndTxn already done,
    /// answered at once; the errors are Kafka's.
    pub fn prepare_end(&mut self, commit: bool, now_ms: u64) -> Result<bool, ResponseError> {
        match (self.state, commit) {
            (TxnState::Ongoing, _) => {
                self.state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                self.updated_ms = now_ms;
                Ok(true)
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(false),
            (TxnState::PrepareCommit | TxnState::PrepareAbort, _) => {
                Err(ResponseError::ConcurrentTransactions)
            }
            _ => Err(ResponseError::InvalidTxnState),
        }
    }

    /// EndTxn v5+ (transaction version 2, KIP-890 part 2): like
    /// [`prepare_end`](Self::prepare_end), and the epoch moves on with every transaction,
    /// so that nothing the producer sent with the old one can join the next. The markers
    /// and the producer's next transaction carry the new epoch; the answer gives it.
    ///
    /// `Ok(Some(old))`: the markers go out, `old` is the (producer id, epoch) the request
    /// came with. `Ok(None)`: a retry of the EndTxn that ended the last transaction (it
    /// still carries the epoch from before the bump), answered at once with the current
    /// ones. When the epoch is spent, `new_producer_id` gives the id a fresh producer id at
    /// epoch 0.
    pub fn prepare_end_bumping(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        now_ms: u64,
        new_producer_id: impl FnOnce() -> i64,
    ) -> Result<Option<(i64, i16)>, ResponseError> {
        if self.ended_with == Some((producer_id, producer_epoch)) {
            return match (self.state, commit) {
                (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(None),
                (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                    Err(ResponseError::ConcurrentTransactions)
                }
                _ => Err(ResponseError::InvalidTxnState),
            };
        }
        self.check_producer(producer_id, producer_epoch)?;
        match self.state {
            TxnState::Ongoing => {}
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                return Err(ResponseError::ConcurrentTransactions)
            }
            _ => return Err(ResponseError::InvalidTxnState),
        }
        self.prepare_end(commit, now_ms)?;
        if self.bump_epoch().is_none() {
            self.producer_id = new_producer_id();
            self.producer_epoch = 0;
        }
        self.ended_with = Some((producer_id, producer_epoch));
        Ok(Some((producer_id, producer_epoch)))
    }

    /// The markers of the ending transaction are written: it is complete.
    pub fn complete(&mut self, now_ms: u64) {
        self.state = match self.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            other => other,
        };
        self.partitions.clear();
        self.updated_ms = now_ms;
    }

    /// Whether the open transaction has outlived its timeout at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.state == TxnState::Ongoing && now_ms.saturating_sub(self.started_ms) > self.timeout_ms
    }

    /// Moves to the next epoch, fencing the current producer (a new instance's
    /// InitProducerId, or a timeout). `None` when the epoch would overflow: the id then
    /// needs a new producer id, at epoch 0.
    pub fn bump_epoch(&mut self) -> Option<i16> {
        let next = self
            .producer_epoch
            .checked_add(1)
            .filter(|&e| e < i16::MAX)?;
        self.producer_epoch = next;
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(producer_id: i64, epoch: i16) -> TxnMetadata {
        let mut meta = TxnMetadata::new("id", producer_id, 60_000, 0);
        meta.producer_epoch = epoch;
        meta.add(&[TopicPartition::new("t", 0)], 1)
            .expect("opens a transaction");
        meta
    }

    #[test]
    fn an_end_that_bumps_the_epoch_is_recognised_when_retried_with_the_old_one() {
        let mut meta = open(7, 3);
        assert_eq!(
            meta.prepare_end_bumping(7, 3, true, 2, || 99),
            Ok(Some((7, 3)))
        );
        assert_eq!(
            (meta.state, meta.producer_id, meta.producer_epoch),
            (TxnState::PrepareCommit, 7, 4)
        );
        // Retried while the markers are on their way, then after.
        assert_eq!(
            meta.prepare_end_bumping(7, 3, true, 3, || 99),
            Err(ResponseError::ConcurrentTransactions)
        );
        meta.complete(4);
        assert_eq!(meta.prepare_end_bumping(7, 3, true, 5, || 99), Ok(None));
        // The other decision with the old epoch, or nothing open at the new one.
        assert_eq!(
            meta.prepare_end_bumping(7, 3, false, 5, || 99),
            Err(ResponseError::InvalidTxnState)
        );
        assert_eq!(
            meta.prepare_end_bumping(7, 4, true, 5, || 99),
            Err(ResponseError::InvalidTxnState)
        );
        // Older than the retry's epoch: a zombie.
        assert_eq!(
            meta.prepare_end_bumping(7, 2, true, 5, || 99),
            Err(ResponseError::ProducerFenced)
        );
    }

    #[test]
    fn a_spent_epoch_moves_the_id_to_a_new_producer_id_at_epoch_0() {
        let mut meta = open(7, i16::MAX - 1);
        assert_eq!(
            meta.prepare_end_bumping(7, i16::MAX - 1, false, 2, || 99),
            Ok(Some((7, i16::MAX - 1)))
        );
        assert_eq!((meta.producer_id, meta.producer_epoch), (99, 0));
        meta.complete(3);
        // The retry names the old producer id.
        assert_eq!(
            meta.prepare_end_bumping(7, i16::MAX - 1, false, 4, || 100),
            Ok(None)
        );
    }
}
