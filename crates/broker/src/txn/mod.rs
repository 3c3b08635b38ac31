//! The transaction coordinator: exactly-once writes across partitions (Kafka's
//! `TransactionCoordinator`).
//!
//! A transactional producer names itself with a `transactional.id`. InitProducerId gives
//! the id a producer id and a new epoch, which fences every older instance of the same
//! id (a "zombie"), and aborts whatever transaction the old instance left open. Then, per
//! transaction:
//!
//! 1. **AddPartitionsToTxn** before the first write to a partition, and **AddOffsetsToTxn**
//!    before committing a consumer group's offsets in the transaction. The producer's
//!    batches carry the transactional bit; the partitions hold them back from
//!    `read_committed` readers (the last stable offset, [`replog::transactions`]).
//!    AddOffsetsToTxn adds the group's `__consumer_offsets` partition to the transaction.
//! 2. **TxnOffsetCommit**, at the group's coordinator: the offsets are appended to that
//!    partition as the transaction's own batch, and the group holds them as pending
//!    (OffsetFetch does not show them; with `require_stable` it answers
//!    UNSTABLE_OFFSET_COMMIT).
//! 3. **EndTxn**: commit or abort. The coordinator writes a COMMIT or ABORT marker into
//!    every partition of the transaction ([`ReplicaManager::append_txn_marker`]) and
//!    answers once every marker is replicated (a `DelayedProduce` of no records, in the
//!    produce purgatory, named `end-txn`). The marker in `__consumer_offsets` decides the
//!    group's pending offsets: committed, or dropped.
//!
//! A transaction open longer than its `transaction.timeout.ms` is aborted by the
//! coordinator itself, with the epoch bumped so that the producer that left it is fenced;
//! the check runs every `transaction.abort.timed.out.transaction.cleanup.interval.ms` on
//! the broker's timer, so a manual clock drives it.
//!
//! Every change of an id's state is written first to `__transaction_state` ([`log`]) with
//! acks=-1, and the request that made it is answered once the record is replicated.
//!
//! In a cluster the coordinator of an id is the leader of its `__transaction_state`
//! partition, each marker is written by its partition's leader, and a group's offsets by
//! the group's coordinator (`routing.rs`); a coordinator that takes over a partition loads
//! its ids from the log (`load.rs`).
//! Both logs are the truth: a group coordinator that takes over a `__consumer_offsets`
//! partition reads a transaction's offsets and its marker back from it.

mod load;
pub mod log;
mod markers;
pub mod metadata;
mod routing;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Weak};

use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use tracing::{info, warn};

use crate::coordinator::GroupCoordinator;
use crate::partition::TopicPartition;
use crate::replica_manager::ReplicaManager;
use crate::request::RequestContext;
use markers::Ending;
pub use metadata::{TxnMetadata, TxnState};

/// Tracing target of the coordinator's decisions.
pub const TRACE_TARGET: &str = "purgatory::txn";

/// Where an InitProducerId's answer goes: the producer id and epoch.
pub type InitCallback = Box<dyn FnOnce(Result<(i64, i16), ResponseError>) + Send>;

pub use log::WriteCallback;

/// Where the end of a transaction's markers is told.
pub type EndTxnCallback = Box<dyn FnOnce(Result<(), ResponseError>) + Send>;

/// Where an EndTxn's answer goes: the producer id and epoch the producer goes on with.
pub type EndTxnReply = Box<dyn FnOnce(Result<(i64, i16), ResponseError>) + Send>;

/// The transaction coordinator of one broker.
pub struct TransactionCoordinator {
    rm: Weak<ReplicaManager>,
    groups: Weak<GroupCoordinator>,
    txns: Mutex<HashMap<String, TxnMetadata>>,
    /// Producer id → transactional id, so a transactional produce finds its transaction
    /// without a scan. Taken after `txns` when both are held.
    by_producer: Mutex<HashMap<i64, String>>,
    max_timeout_ms: u64,
    max_transactional_ids: usize,
    /// `__transaction_state` partitions this broker has begun to lead and is still
    /// loading (`load.rs`): their ids are answered COORDINATOR_LOAD_IN_PROGRESS.
    loading: Mutex<BTreeSet<i32>>,
}

impl TransactionCoordinator {
    /// The coordinator over `rm` (markers) and `groups` (offsets committed with a
    /// transaction), with its timeout check on `rm`'s timer.
    pub fn new(rm: &Arc<ReplicaManager>, groups: &Arc<GroupCoordinator>) -> Arc<Self> {
        let coordinator = Arc::new(TransactionCoordinator {
            rm: Arc::downgrade(rm),
            groups: Arc::downgrade(groups),
            txns: Mutex::new(HashMap::new()),
            by_producer: Mutex::new(HashMap::new()),
            max_timeout_ms: rm.config.transaction_max_timeout_ms.max(1) as u64,
            max_transactional_ids: rm.config.transaction_coordinator_max_transactional_ids,
            loading: Mutex::new(BTreeSet::new()),
        });
        schedule_expiry(Arc::downgrade(&coordinator));
        coordinator
    }

    /// The broker clock, as the transactions' start times read it.
    pub fn now_ms(&self) -> u64 {
        self.rm.upgrade().map_or(0, |rm| rm.now_ms())
    }

    /// One transactional id's state, if the coordinator knows it.
    pub fn describe(&self, transactional_id: &str) -> Option<TxnMetadata> {
        self.txns.lock().get(transactional_id).cloned()
    }

    /// InitProducerId with a transactional id: the id's producer id and its next epoch.
    /// A transaction the previous instance left open is aborted first (the answer is
    /// CONCURRENT_TRANSACTIONS until its markers are written; the client retries).
    pub fn init_producer_id(
        self: &Arc<Self>,
        ctx: &RequestContext,
        transactional_id: &str,
        timeout_ms: i32,
        allocate: impl Fn() -> i64,
        reply: InitCallback,
    ) {
        if let Err(e) = self.check_coordinator(transactional_id) {
            return reply(Err(e));
        }
        match self.init_locked(ctx, transactional_id, timeout_ms, allocate) {
            Ok(meta) => {
                let Some(rm) = self.rm.upgrade() else {
                    return reply(Err(ResponseError::CoordinatorNotAvailable));
                };
                let (producer_id, epoch) = (meta.producer_id, meta.producer_epoch);
                log::write(
                    &rm,
                    ctx,
                    &meta,
                    Box::new(move |written| reply(written.map(|()| (producer_id, epoch)))),
                );
            }
            Err(e) => reply(Err(e)),
        }
    }

    /// InitProducerId's change of state, under the lock: the state to write.
    fn init_locked(
        self: &Arc<Self>,
        ctx: &RequestContext,
        transactional_id: &str,
        timeout_ms: i32,
        allocate: impl Fn() -> i64,
    ) -> Result<TxnMetadata, ResponseError> {
        let timeout_ms = match u64::try_from(timeout_ms) {
            Ok(ms) if (1..=self.max_timeout_ms).contains(&ms) => ms,
            _ => return Err(ResponseError::InvalidTransactionTimeout),
        };
        let now = self.now_ms();
        let mut txns = self.txns.lock();
        let is_new = !txns.contains_key(transactional_id);
        if is_new && txns.len() >= self.max_transactional_ids {
            warn!(target: TRACE_TARGET, limit = self.max_transactional_ids, "transactional id refused: transaction.coordinator.max.transactional.ids reached");
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        let meta = txns
            .entry(transactional_id.to_string())
            .or_insert_with(|| TxnMetadata::new(transactional_id, allocate(), timeout_ms, now));
        match meta.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                return Err(ResponseError::ConcurrentTransactions)
            }
            TxnState::Ongoing => {
                // The old instance's transaction: abort it under a new epoch.
                meta.bump_epoch();
                meta.prepare_end(false, now)?;
                let ending = Ending::of(meta);
                drop(txns);
                info!(target: TRACE_TARGET, transactional_id, "aborting the transaction a previous producer left open");
                self.write_markers(ctx, ending, Box::new(|_| {}));
                return Err(ResponseError::ConcurrentTransactions);
            }
            _ => {}
        }
        meta.timeout_ms = timeout_ms;
        // A new instance of a known id fences the one before it.
        if !is_new && meta.bump_epoch().is_none() {
            self.by_producer.lock().remove(&meta.producer_id);
            meta.producer_id = allocate();
            meta.producer_epoch = 0;
        }
        self.by_producer
            .lock()
            .insert(meta.producer_id, transactional_id.to_string());
        meta.state = TxnState::Empty;
        meta.ended_with = None;
        meta.updated_ms = now;
        info!(target: TRACE_TARGET, transactional_id, producer_id = meta.producer_id, epoch = meta.producer_epoch, "producer initialised");
        Ok(meta.clone())
    }

    /// AddPartitionsToTxn: `partitions` join the open transaction (opening one if none
    /// is). Every partition answers the same error if the request as a whole is refused.
    #[allow(clippy::too_many_arguments)]
    pub fn add_partitions(
        &self,
        ctx: &RequestContext,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
        reply: WriteCallback,
    ) {
        let now = self.now_ms();
        let changed = self.with_txn(transactional_id, producer_id, producer_epoch, |meta| {
            meta.add(partitions, now)
        });
        self.write_then(ctx, changed, reply);
    }

    /// AddOffsetsToTxn: the transaction will commit offsets of `group_id`, so the
    /// group's `__consumer_offsets` partition joins it (and gets its marker at the end).
    pub fn add_offsets(
        &self,
        ctx: &RequestContext,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        group_id: &str,
        reply: WriteCallback,
    ) {
        let tp = match self.offsets_partition_of(group_id) {
            Ok(tp) => tp,
            Err(e) => return reply(Err(e)),
        };
        let now = self.now_ms();
        let changed = self.with_txn(transactional_id, producer_id, producer_epoch, |meta| {
            meta.add(std::slice::from_ref(&tp), now)
        });
        self.write_then(ctx, changed, reply);
    }

    /// The `__consumer_offsets` partition of `group_id` (the topic is created if it is
    /// not there yet, as FindCoordinator would).
    fn offsets_partition_of(&self, group_id: &str) -> Result<TopicPartition, ResponseError> {
        let groups = self
            .groups
            .upgrade()
            .ok_or(ResponseError::CoordinatorNotAvailable)?;
        groups
            .manager
            .ensure_offsets_topic()
            .map_err(|_| ResponseError::CoordinatorNotAvailable)?;
        Ok(groups.manager.topic_partition_for(group_id))
    }

    /// Writes the state `changed` left (if it succeeded) to `__transaction_state`, then
    /// tells `reply`.
    fn write_then(
        &self,
        ctx: &RequestContext,
        changed: Result<TxnMetadata, ResponseError>,
        reply: WriteCallback,
    ) {
        match (changed, self.rm.upgrade()) {
            (Ok(meta), Some(rm)) => log::write(&rm, ctx, &meta, reply),
            (Ok(_), None) => reply(Err(ResponseError::CoordinatorNotAvailable)),
            (Err(e), _) => reply(Err(e)),
        }
    }

    /// Whether a TxnOffsetCommit of `group_id` may be written for the transaction of
    /// (`producer_id`, `producer_epoch`): it must be open and hold the group's partition
    /// (AddOffsetsToTxn first). INVALID_TXN_STATE otherwise; PRODUCER_FENCED for an old
    /// epoch, INVALID_PRODUCER_ID_MAPPING for another producer id.
    pub fn verify_offsets(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        group_id: &str,
    ) -> Result<(), ResponseError> {
        let tp = self.offsets_partition_of(group_id)?;
        let missing =
            self.verify_partitions(transactional_id, producer_id, producer_epoch, &[tp])?;
        if missing.is_empty() {
            Ok(())
        } else {
            Err(ResponseError::InvalidTxnState)
        }
    }

    /// The partitions of `partitions` that the open transaction of (`producer_id`,
    /// `producer_epoch`) does not hold (all of them when none is open): AddPartitionsToTxn
    /// v4+ with `verify_only`. The errors refuse them all: NOT_COORDINATOR,
    /// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, ...
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
    ) -> Result<Vec<TopicPartition>, ResponseError> {
        self.check_coordinator(transactional_id)?;
        let txns = self.txns.lock();
        let meta = txns
            .get(transactional_id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        meta.check_producer(producer_id, producer_epoch)?;
        let open = meta.state == TxnState::Ongoing;
        Ok(partitions
            .iter()
            .filter(|tp| !(open && meta.partitions.contains(tp)))
            .cloned()
            .collect())
    }

    /// Whether a transactional batch of (`producer_id`, `producer_epoch`) may go to
    /// `tp`: its transaction must be open and hold the partition (Kafka's KIP-890
    /// verification). INVALID_TXN_STATE otherwise; INVALID_PRODUCER_EPOCH for an old epoch.
    /// In a cluster the producer's coordinator may be another broker's: the one that
    /// knows the producer id answers.
    pub fn verify(
        self: &Arc<Self>,
        producer_id: i64,
        producer_epoch: i16,
        tp: &TopicPartition,
    ) -> Result<(), ResponseError> {
        if let Some(answer) = self.verify_here(producer_id, producer_epoch, tp) {
            return answer;
        }
        self.all_coordinators()
            .iter()
            .filter(|c| !Arc::ptr_eq(c, self))
            .find_map(|c| c.verify_here(producer_id, producer_epoch, tp))
            .unwrap_or(Err(ResponseError::InvalidTxnState))
    }

    /// [`verify`](Self::verify) by this coordinator; `None` if it does not know the
    /// producer id.
    fn verify_here(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        tp: &TopicPartition,
    ) -> Option<Result<(), ResponseError>> {
        let id = self.by_producer.lock().get(&producer_id).cloned()?;
        Some(self.verify_txn(&id, producer_id, producer_epoch, tp))
    }

    fn verify_txn(
        &self,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        tp: &TopicPartition,
    ) -> Result<(), ResponseError> {
        let txns = self.txns.lock();
        let meta = txns
            .get(id)
            .filter(|m| m.producer_id == producer_id)
            .ok_or(ResponseError::InvalidTxnState)?;
        if producer_epoch < meta.producer_epoch {
            // A zombie's produce: Kafka 4.4 answers it INVALID_PRODUCER_EPOCH (the
            // transaction APIs answer the same zombie PRODUCER_FENCED).
            return Err(ResponseError::InvalidProducerEpoch);
        }
        if meta.state == TxnState::Ongoing && meta.partitions.contains(tp) {
            Ok(())
        } else {
            Err(ResponseError::InvalidTxnState)
        }
    }

    /// EndTxn: commit or abort the open transaction; `reply` is told, with the producer
    /// id and epoch the producer goes on with, once its markers are replicated (at once
    /// for a retry of an EndTxn already done). With `bump_epoch` (EndTxn v5+, transaction
    /// version 2) every transaction ends with a new epoch, which the markers carry.
    #[allow(clippy::too_many_arguments)]
    pub fn end_txn(
        self: &Arc<Self>,
        ctx: &RequestContext,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        bump_epoch: bool,
        allocate: impl FnOnce() -> i64,
        reply: EndTxnReply,
    ) {
        if let Err(e) = self.check_coordinator(transactional_id) {
            return reply(Err(e));
        }
        let now = self.now_ms();
        let mut txns = self.txns.lock();
        let Some(meta) = txns.get_mut(transactional_id) else {
            drop(txns);
            return reply(Err(ResponseError::InvalidProducerIdMapping));
        };
        let decided = if bump_epoch {
            meta.prepare_end_bumping(producer_id, producer_epoch, commit, now, allocate)
                .map(|old| old.map(|old| Ending::bumped_from(meta, old)))
        } else {
            meta.check_producer(producer_id, producer_epoch)
                .and_then(|()| meta.prepare_end(commit, now))
                .map(|start| start.then(|| Ending::of(meta)))
        };
        let now_producer = (meta.producer_id, meta.producer_epoch);
        if let Ok(Some(ending)) = &decided {
            if ending.producer_id != now_producer.0 {
                // The epoch was spent: the id goes on with a new producer id.
                let mut by_producer = self.by_producer.lock();
                by_producer.remove(&ending.producer_id);
                by_producer.insert(now_producer.0, transactional_id.to_string());
            }
        }
        drop(txns);
        match decided {
            Ok(Some(ending)) => self.write_markers(
                ctx,
                ending,
                Box::new(move |done| reply(done.map(|()| now_producer))),
            ),
            Ok(None) => reply(Ok(now_producer)),
            Err(e) => reply(Err(e)),
        }
    }

    /// Every transactional id, for the state API and the live view.
    pub fn snapshot(&self) -> Vec<TxnMetadata> {
        let mut all: Vec<TxnMetadata> = self.txns.lock().values().cloned().collect();
        all.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        all
    }

    /// Runs `change` on the transaction of `transactional_id` after checking the
    /// producer's id and epoch.
    fn with_txn(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        change: impl FnOnce(&mut TxnMetadata) -> Result<(), ResponseError>,
    ) -> Result<TxnMetadata, ResponseError> {
        self.check_coordinator(transactional_id)?;
        let mut txns = self.txns.lock();
        let meta = txns
            .get_mut(transactional_id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        meta.check_producer(producer_id, producer_epoch)?;
        change(meta)?;
        Ok(meta.clone())
    }

    /// Aborts every transaction past its timeout, with its epoch bumped.
    fn abort_expired(self: &Arc<Self>) {
        let now = self.now_ms();
        let mut expired = Vec::new();
        {
            let mut txns = self.txns.lock();
            for meta in txns.values_mut().filter(|m| m.expired(now)) {
                if meta.bump_epoch().is_none() {
                    continue;
                }
                meta.ended_with = None;
                if meta.prepare_end(false, now).is_ok() {
                    info!(target: TRACE_TARGET, transactional_id = %meta.transactional_id, timeout_ms = meta.timeout_ms, epoch = meta.producer_epoch, "aborting a transaction past its transaction.timeout.ms");
                    expired.push(Ending::of(meta));
                }
            }
        }
        let ctx = RequestContext::internal("transaction-coordinator");
        for ending in expired {
            self.write_markers(&ctx, ending, Box::new(|_| {}));
        }
    }
}

/// Runs the timeout check every `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
fn schedule_expiry(coordinator: Weak<TransactionCoordinator>) {
    let Some(strong) = coordinator.upgrade() else {
        return;
    };
    let Some(rm) = strong.rm.upgrade() else {
        return;
    };
    let interval = i64::from(
        rm.config
            .transaction_abort_timed_out_transaction_cleanup_interval_ms
            .max(1),
    );
    let timer = rm.timer.clone();
    drop((strong, rm));
    timer.schedule(interval, move || {
        if let Some(strong) = coordinator.upgrade() {
            strong.abort_expired();
            drop(strong);
            schedule_expiry(coordinator);
        }
    });
}
