//! Loading transactional ids from `__transaction_state` (Kafka's
//! `TransactionStateManager`, when it becomes the leader of a partition of that topic).
//!
//! In a cluster the coordinator of an id is the leader of the id's partition. When that
//! leadership moves (its broker is killed or shut down, or an election picks another
//! replica), the new leader's coordinator knows nothing of the id in memory, but its copy of
//! the partition holds every state the old coordinator wrote, each replicated before the
//! request that made it was answered. Replaying the partition in offset order, the last
//! record of each id is its state:
//!
//! - **Empty, Ongoing, Complete**: taken as is. An Ongoing transaction's timeout counts from
//!   the load (the broker clock's start time is not in the record).
//! - **PrepareCommit, PrepareAbort**: the old coordinator had decided, and maybe written
//!   some markers. The new one writes them all again and completes the transaction, as
//!   Kafka's does: a marker written twice closes nothing the second time.
//!
//! From the moment the broker is told it leads the partition until the replay is done,
//! the ids of that partition are answered COORDINATOR_LOAD_IN_PROGRESS, as Kafka answers
//! while it loads, and the client retries: a request served from the half-known state
//! could hand out a new producer id for an id the log knows.
//!
//! The other way, a coordinator that stops leading a partition forgets its ids; their next
//! requests here are answered NOT_COORDINATOR. The offsets a transaction wrote for a group
//! are in `__consumer_offsets`, and its group coordinator loads them from there.

use std::sync::Arc;

use kafka_protocol::records::RecordBatchDecoder;
use replog::ReadBound;
use tracing::{info, warn};

use super::markers::Ending;
use super::{log, TransactionCoordinator, TxnMetadata, TxnState, TRACE_TARGET};
use crate::partition::PartitionHandle;
use crate::request::RequestContext;

impl TransactionCoordinator {
    /// The broker is about to lead `__transaction_state` partition `partition`: its ids
    /// are COORDINATOR_LOAD_IN_PROGRESS until [`load_transactions`](Self::load_transactions)
    /// has replayed it.
    pub fn start_loading(&self, partition: i32) {
        self.loading.lock().insert(partition);
    }

    /// The broker did not become the leader of `partition` after all: nothing to load.
    pub fn cancel_loading(&self, partition: i32) {
        self.loading.lock().remove(&partition);
    }

    /// Replays `partition` (a `__transaction_state` partition this broker now leads) into
    /// the ids it holds, and finishes the transactions it finds deciding; its ids are
    /// served from then on. Returns how many ids it loaded.
    pub fn load_transactions(self: &Arc<Self>, partition: &PartitionHandle) -> usize {
        let loaded = self.replay(partition);
        self.loading.lock().remove(&partition.tp.partition);
        loaded
    }

    fn replay(self: &Arc<Self>, partition: &PartitionHandle) -> usize {
        let bytes = {
            let log = partition.lock();
            match log.read(log.log_start_offset(), usize::MAX, ReadBound::LogEnd) {
                Ok(read) => read.records,
                Err(_) => return 0,
            }
        };
        let now = self.now_ms();
        let mut buf = bytes;
        let sets = match RecordBatchDecoder::decode_all(&mut buf) {
            Ok(sets) => sets,
            Err(e) => {
                warn!(target: TRACE_TARGET, tp = %partition.tp, "cannot read the partition's batches: {e}");
                return 0;
            }
        };
        // Offset order: the last record of an id wins; a null value deletes it.
        let mut latest: std::collections::BTreeMap<String, Option<TxnMetadata>> =
            Default::default();
        let mut unreadable = 0usize;
        for record in sets.into_iter().flat_map(|set| set.records) {
            let Some(id) = record.key.and_then(|k| log::read_key(k).ok()) else {
                unreadable += 1;
                continue;
            };
            match record.value.map(|v| log::read_value(&id, v, now)) {
                Some(Ok(meta)) => {
                    latest.insert(id, Some(meta));
                }
                Some(Err(_)) => unreadable += 1,
                None => {
                    latest.insert(id, None);
                }
            }
        }
        let mut deciding = Vec::new();
        let mut loaded = 0;
        {
            let mut txns = self.txns.lock();
            let mut by_producer = self.by_producer.lock();
            for (id, meta) in latest {
                let Some(meta) = meta else {
                    if let Some(old) = txns.remove(&id) {
                        by_producer.remove(&old.producer_id);
                    }
                    continue;
                };
                if matches!(meta.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
                    deciding.push(Ending::of(&meta));
                }
                by_producer.insert(meta.producer_id, id.clone());
                txns.insert(id, meta);
                loaded += 1;
            }
        }
        info!(target: TRACE_TARGET, tp = %partition.tp, loaded, unreadable, deciding = deciding.len(), "transactional ids loaded");
        let ctx = RequestContext::internal("transaction-coordinator");
        for ending in deciding {
            self.markers_after_prepare(&ctx, ending, Box::new(|_| {}));
        }
        loaded
    }

    /// Forgets the ids of `__transaction_state` partition `partition`: this broker no
    /// longer leads it.
    pub fn unload_transactions(&self, partition: i32) {
        let Some(rm) = self.rm.upgrade() else {
            return;
        };
        let mut txns = self.txns.lock();
        let mut by_producer = self.by_producer.lock();
        txns.retain(|id, meta| {
            let stays = log::partition_for(&rm, id).partition != partition;
            if !stays {
                by_producer.remove(&meta.producer_id);
            }
            stays
        });
    }
}
