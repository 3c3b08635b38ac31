//! Adding partitions to a topic of the cluster (CreatePartitions).
//!
//! As Kafka's KRaft controller does it: the controller checks the request and assigns the
//! new partitions' replicas (continuing the round robin the topic was created with, from
//! the current partition count, or taking the manual assignment), then every broker
//! learns of the new partitions, creates their logs and takes its role: the first live
//! replica `make_leader`s, the others `make_follower`. The fetchers are then told to
//! re-read Metadata, so each follower's fetcher starts replicating the partitions it was
//! given at once rather than on its next periodic refresh.
//!
//! The broker-side caps (`max.partitions`, the per-topic cap) are checked on the asking
//! broker first, before the controller allocates anything; `validate_only` runs the
//! controller's checks on a copy of it, so nothing changes.

use std::sync::Arc;

use controller::{Change, PartitionState, TopicPartition as ControllerTp};
use kafka_protocol::ResponseError;
use tracing::{info, warn};

use super::{topic_error, Cluster};
use crate::topics::{Topic, TopicError};

impl Cluster {
    /// See [`super::ClusterLink::create_partitions`].
    pub(super) fn add_partitions(
        &self,
        from: i32,
        name: &str,
        new_total: i32,
        assignment: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<Arc<Topic>, TopicError> {
        let asking = self
            .rm(from)
            .ok_or_else(|| TopicError::new(ResponseError::UnknownServerError, "no such broker"))?;
        // The counts and this broker's caps, before anything is allocated.
        let unchanged = asking.add_local_partitions(name, new_total, None, true)?;
        let created: Vec<(i32, PartitionState)> = {
            let mut controller = self.controller.lock();
            let mut dry_run;
            let target = if validate_only {
                dry_run = controller.clone();
                &mut dry_run
            } else {
                &mut *controller
            };
            let changes = match &assignment {
                Some(a) => target.create_partitions_with_assignment(name, a),
                None => target.create_partitions(name, new_total),
            }
            .map_err(topic_error)?;
            changes
                .into_iter()
                .filter_map(|change| match change {
                    Change::PartitionCreated { tp, state } => Some((tp.partition, state)),
                    _ => None,
                })
                .collect()
        };
        if validate_only {
            return Ok(unchanged);
        }
        info!(topic = name, new_total, "the controller added partitions");
        let mut asked = None;
        for (&id, node) in &self.nodes {
            let rm = node.broker.replica_manager();
            let topic = match rm.add_local_partitions(name, new_total, None, false) {
                Ok(topic) => topic,
                Err(e) => {
                    warn!(
                        topic = name,
                        broker = id,
                        "cannot add the partitions: {}",
                        e.message
                    );
                    continue;
                }
            };
            // A dead broker takes its roles when it restarts.
            if self.is_alive(id) {
                for (index, state) in &created {
                    self.take_role(id, &ControllerTp::new(name, *index), state);
                }
            }
            if id == from {
                asked = Some(topic);
            }
        }
        self.nudge_fetchers();
        asked.ok_or_else(|| TopicError::new(ResponseError::UnknownServerError, "no such broker"))
    }
}
