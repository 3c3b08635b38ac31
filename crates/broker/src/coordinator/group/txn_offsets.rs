//! A group's offsets written inside transactions (TxnOffsetCommit): in the log but not
//! yet committed, one set per producer id, until the transaction's marker in
//! `__consumer_offsets` commits or drops them (Kafka's `pendingTransactionalOffsetCommits`).
//! OffsetFetch does not show them, and with `require_stable` answers
//! UNSTABLE_OFFSET_COMMIT while one is held.

use std::collections::HashMap;

use super::{GroupMetadata, OffsetAndMetadata, OffsetKey};

impl GroupMetadata {
    /// A transaction of `producer_id` appended these offsets (TxnOffsetCommit); they wait
    /// for replication, then for the transaction's end.
    pub fn prepare_txn_offset_commit(
        &mut self,
        producer_id: i64,
        offsets: &[(OffsetKey, OffsetAndMetadata)],
    ) {
        let pending = self.pending_txn_offsets.entry(producer_id).or_default();
        for (key, offset) in offsets {
            pending.insert(
                key.clone(),
                PendingTxnOffset {
                    offset: offset.clone(),
                    replicated: false,
                },
            );
        }
    }

    /// The transaction's offset is replicated: its marker may now commit it. (If the
    /// transaction ended meanwhile, it is gone already and stays gone.)
    pub fn on_txn_offset_commit_append(
        &mut self,
        producer_id: i64,
        key: &OffsetKey,
        offset: &OffsetAndMetadata,
    ) {
        let entry = self
            .pending_txn_offsets
            .get_mut(&producer_id)
            .and_then(|pending| pending.get_mut(key));
        if let Some(entry) = entry.filter(|e| e.offset == *offset) {
            entry.replicated = true;
        }
    }

    /// A transaction's offset read back from `__consumer_offsets` (a load): in the log,
    /// so replicated as far as this coordinator can tell, and decided by a marker after it.
    pub fn load_txn_offset(&mut self, producer_id: i64, key: OffsetKey, offset: OffsetAndMetadata) {
        self.pending_txn_offsets
            .entry(producer_id)
            .or_default()
            .insert(
                key,
                PendingTxnOffset {
                    offset,
                    replicated: true,
                },
            );
    }

    /// The transaction's offset was not written: forget it.
    pub fn fail_pending_txn_offset_write(
        &mut self,
        producer_id: i64,
        key: &OffsetKey,
        offset: &OffsetAndMetadata,
    ) {
        let Some(pending) = self.pending_txn_offsets.get_mut(&producer_id) else {
            return;
        };
        if pending.get(key).is_some_and(|p| p.offset == *offset) {
            pending.remove(key);
        }
        if pending.is_empty() {
            self.pending_txn_offsets.remove(&producer_id);
        }
    }

    /// The transaction of `producer_id` ended: on commit its replicated offsets become
    /// the group's committed offsets; on abort they are dropped. Returns how many were
    /// committed.
    pub fn complete_pending_txn_offsets(&mut self, producer_id: i64, commit: bool) -> usize {
        let Some(pending) = self.pending_txn_offsets.remove(&producer_id) else {
            return 0;
        };
        if !commit {
            return 0;
        }
        let mut committed = 0;
        for (key, p) in pending.into_iter().filter(|(_, p)| p.replicated) {
            self.offsets.insert(key, p.offset);
            committed += 1;
        }
        committed
    }

    /// Whether a transaction of `producer_id` holds offsets of this group.
    pub fn has_pending_txn_offsets_of(&self, producer_id: i64) -> bool {
        self.pending_txn_offsets.contains_key(&producer_id)
    }

    /// Whether an open transaction holds an offset of this partition: OffsetFetch with
    /// `require_stable` answers it UNSTABLE_OFFSET_COMMIT.
    pub fn has_pending_txn_offset(&self, key: &OffsetKey) -> bool {
        self.pending_txn_offsets
            .values()
            .any(|p| p.contains_key(key))
    }

    /// How many offsets open transactions hold for this group.
    pub fn pending_txn_offset_count(&self) -> usize {
        self.pending_txn_offsets.values().map(HashMap::len).sum()
    }
}

/// An offset a transaction wrote, not yet committed by its marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PendingTxnOffset {
    offset: OffsetAndMetadata,
    /// Its record is replicated (only then may the marker commit it).
    replicated: bool,
}
