//! # A serializable picture of the image, for the state API and the live view
//!
//! Plain data with every partition's index spelled out, so a JSON reader needs no
//! knowledge of how the image stores things. Building one copies the image; it does
//! not borrow the controller.

use serde::{Deserialize, Serialize};

use crate::assignment::AssignmentParams;
use crate::broker::Broker;
use crate::image::MetadataImage;
use crate::partition::PartitionState;

/// One partition in a [`TopicSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionSnapshot {
    /// Partition index.
    pub partition: i32,
    /// Its state: replicas, ISR, leader and the two epochs.
    #[serde(flatten)]
    pub state: PartitionState,
}

/// One topic in a [`MetadataSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicSnapshot {
    /// Topic name.
    pub name: String,
    /// `unclean.leader.election.enable`.
    pub unclean_leader_election: bool,
    /// Its partitions, by index.
    pub partitions: Vec<PartitionSnapshot>,
}

/// Every broker and topic the controller knows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataSnapshot {
    /// Brokers by id, dead ones included.
    pub brokers: Vec<Broker>,
    /// Topics by name.
    pub topics: Vec<TopicSnapshot>,
    /// The assignment parameters new topics get.
    pub assignment: AssignmentParams,
}

impl MetadataSnapshot {
    pub(crate) fn of(image: &MetadataImage, assignment: AssignmentParams) -> Self {
        MetadataSnapshot {
            brokers: image.brokers().cloned().collect(),
            topics: image
                .topics()
                .map(|t| TopicSnapshot {
                    name: t.name.clone(),
                    unclean_leader_election: t.unclean_leader_election,
                    partitions: t
                        .partitions
                        .iter()
                        .enumerate()
                        .map(|(i, state)| PartitionSnapshot {
                            partition: i as i32,
                            state: state.clone(),
                        })
                        .collect(),
                })
                .collect(),
            assignment,
        }
    }
}
