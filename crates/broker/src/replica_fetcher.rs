//! The replica fetcher: how a broker follows a leader (Kafka's `ReplicaFetcherThread`).
//!
//! The fetch loop is the `followersim` one, unchanged: it connects to the leader, sends
//! Fetch requests with this broker's id as `replica_id`, checks the batches and appends
//! them. What is different is where they go. A simulated follower keeps its own copy; a
//! broker keeps them in its own partition log, the one it would serve from if it were
//! elected leader. [`BrokerLogs`] is that seam: for each partition the fetcher starts
//! following, it opens this broker's log, if this broker hosts the partition as a follower,
//! and every append, truncation and high watermark goes through the replica manager
//! ([`crate::replica_manager::ReplicaManager::append_as_follower`] and its neighbours), so
//! that the broker's log memory counts its follower copies too.

use std::sync::{Arc, Weak};

use bytes::BytesMut;
use followersim::batch::{BatchError, CheckedBatches};
use followersim::log::AppendOutcome;
use followersim::{ReplicaLog, ReplicaLogs};
use replog::{FollowerAppendError, UNDEFINED_EPOCH};

use crate::partition::PartitionHandle;
use crate::replica_manager::ReplicaManager;

/// A broker's partitions, as its replica fetchers see them.
pub struct BrokerLogs {
    rm: Weak<ReplicaManager>,
}

impl BrokerLogs {
    /// The logs of `rm`'s broker.
    pub fn new(rm: &Arc<ReplicaManager>) -> Arc<Self> {
        Arc::new(BrokerLogs {
            rm: Arc::downgrade(rm),
        })
    }
}

impl ReplicaLogs for BrokerLogs {
    fn open(&self, topic: &str, partition: i32) -> Option<Box<dyn ReplicaLog>> {
        let rm = self.rm.upgrade()?;
        let handle = rm.partition(topic, partition)?;
        if handle.lock().is_leader() {
            return None; // led here: nothing to fetch
        }
        Some(Box::new(BrokerLog {
            rm: self.rm.clone(),
            handle,
        }))
    }
}

/// One partition this broker follows.
struct BrokerLog {
    rm: Weak<ReplicaManager>,
    handle: Arc<PartitionHandle>,
}

impl std::fmt::Debug for BrokerLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BrokerLog({})", self.handle.tp)
    }
}

impl ReplicaLog for BrokerLog {
    fn log_start_offset(&self) -> i64 {
        self.handle.lock().log_start_offset()
    }

    fn log_end_offset(&self) -> i64 {
        self.handle.lock().log_end_offset()
    }

    fn commit(
        &mut self,
        checked: CheckedBatches,
        _shared: bool,
    ) -> Result<AppendOutcome, BatchError> {
        // The log itself refuses batches that do not continue it (UnexpectedOffset).
        let old = self.log_end_offset();
        let Some(rm) = self.rm.upgrade() else {
            return Err(BatchError::Refused {
                reason: "the broker has shut down".into(),
            });
        };
        // The log copies each batch into its own buffer, so one slice of the response
        // goes in as it is; several are joined first.
        let records = match checked.batches.as_slice() {
            [one] => one.clone(),
            many => {
                let mut joined = BytesMut::with_capacity(checked.batch_bytes);
                for b in many {
                    joined.extend_from_slice(b);
                }
                joined.freeze()
            }
        };
        match rm.append_as_follower(&self.handle, records) {
            Ok(_) => Ok(AppendOutcome {
                batches: checked.batches.len(),
                bytes: checked.batch_bytes,
                partial_tail_bytes: checked.partial_tail_bytes,
                old_log_end_offset: old,
                new_log_end_offset: self.log_end_offset(),
            }),
            Err(FollowerAppendError::UnexpectedOffset { expected, got }) => Err(BatchError::Gap {
                expected,
                found: got,
            }),
            // Led here meanwhile, or a batch the log refuses: the fetcher logs it and
            // fetches again from the log end.
            Err(e) => Err(BatchError::Refused {
                reason: e.to_string(),
            }),
        }
    }

    fn reset_to(&mut self, offset: i64) {
        if let Some(rm) = self.rm.upgrade() {
            let _ = rm.truncate_fully_and_start_at(&self.handle, offset);
        }
    }

    fn retained_bytes(&self) -> usize {
        self.handle.lock().size_bytes()
    }

    fn last_fetched_epoch(&self) -> i32 {
        self.handle.lock().latest_epoch().unwrap_or(-1)
    }

    fn end_offset_for_epoch(&self, epoch: i32) -> Option<i64> {
        let (found, end_offset) = self.handle.lock().end_offset_for_leader_epoch(epoch);
        (found != UNDEFINED_EPOCH).then_some(end_offset)
    }

    fn truncate_to(&mut self, offset: i64) -> i64 {
        if let Some(rm) = self.rm.upgrade() {
            let _ = rm.truncate(&self.handle, offset);
        }
        self.log_end_offset()
    }

    fn leader_progress(&mut self, high_watermark: i64, log_start_offset: i64) {
        if let Some(rm) = self.rm.upgrade() {
            rm.follow_leader_progress(&self.handle, high_watermark, log_start_offset);
        }
    }
}
