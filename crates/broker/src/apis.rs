//! What the request handlers can reach: Kafka's `KafkaApis` layer.
//!
//! In Kafka, `KafkaApis` turns each request into calls on the components below it — the
//! `ReplicaManager` for logs, replication and the Produce/Fetch purgatories, the
//! `GroupCoordinator` for consumer groups, the `TransactionCoordinator` for transactions —
//! and turns their answers back into responses.
//! The layers only point downwards: the coordinator appends to `__consumer_offsets`
//! through the replica manager's `append_records`, and the replica manager knows nothing
//! of groups. A connection holds one [`KafkaApis`] and gives it each request
//! ([`KafkaApis::handle`], with the routing table in `handlers/`), which passes each handler
//! only the component its API needs.

use std::sync::Arc;

use crate::coordinator::GroupCoordinator;
use crate::replica_manager::ReplicaManager;
use crate::txn::TransactionCoordinator;

/// The broker's components, as the request handlers see them.
pub struct KafkaApis {
    /// Topics, partition logs, replication, and the Produce and Fetch purgatories.
    pub replica_manager: Arc<ReplicaManager>,
    /// Consumer groups, their offsets, and the Rebalance and Heartbeat purgatories.
    pub group_coordinator: Arc<GroupCoordinator>,
    /// Transactional ids, their transactions, and the markers that end them.
    pub txn_coordinator: Arc<TransactionCoordinator>,
}

impl KafkaApis {
    /// The layer over `replica_manager`, with a group coordinator that appends through it
    /// and runs on its timer. `__consumer_offsets` is created when a group first needs it.
    pub fn new(replica_manager: Arc<ReplicaManager>) -> Arc<KafkaApis> {
        let group_coordinator = GroupCoordinator::new(&replica_manager);
        let txn_coordinator = TransactionCoordinator::new(&replica_manager, &group_coordinator);
        Arc::new(KafkaApis {
            replica_manager,
            group_coordinator,
            txn_coordinator,
        })
    }
}
