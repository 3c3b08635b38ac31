//! # The controller: the one writer of the metadata image
//!
//! [`Controller`] owns a [`MetadataImage`] and is the only thing that changes it. Its
//! calls are grouped by subject:
//!
//! * [`topics`]: create and delete topics, add partitions, switch unclean election;
//! * [`brokers`]: registration, failure, restart, controlled shutdown;
//! * [`alter_partition`]: a leader's request to change its ISR;
//! * [`preferred`]: moving leadership back to the first replica.
//!
//! Every call that changes something returns the [`Change`]s it made, in order; a
//! refused call returns an [`crate::Error`] and changes nothing. There is no I/O, no
//! clock and no thread: the caller serialises calls (a `Mutex` in the broker), and
//! what happens when is entirely decided by the order of calls.

pub mod alter_partition;
pub mod brokers;
pub mod preferred;
pub mod topics;

use crate::assignment::AssignmentParams;
use crate::change::Change;
use crate::image::MetadataImage;
use crate::partition::{Election, PartitionState, TopicPartition};
use crate::snapshot::MetadataSnapshot;

pub use alter_partition::AlterPartitionOutcome;

/// The in-process controller. See the [module documentation](self).
#[derive(Debug, Clone, Default)]
pub struct Controller {
    image: MetadataImage,
    assignment: AssignmentParams,
}

/// What one step of [`Controller::update_partitions`] decides for a partition.
struct Decision {
    leader: i32,
    isr: Vec<i32>,
    how: Election,
}

/// What [`Controller::update_partitions`] lets a step see besides the partition.
struct Context<'a> {
    tp: &'a TopicPartition,
    unclean_leader_election: bool,
    alive: &'a dyn Fn(i32) -> bool,
}

impl Controller {
    /// A controller with no brokers and no topics, and the default assignment
    /// parameters (start index 0, shift 0).
    pub fn new() -> Self {
        Controller::default()
    }

    /// A controller whose topics will be laid out with `params`.
    pub fn with_assignment_params(params: AssignmentParams) -> Self {
        Controller {
            assignment: params,
            ..Controller::default()
        }
    }

    /// The assignment parameters for topics and partitions created from now on.
    pub fn assignment_params(&self) -> AssignmentParams {
        self.assignment
    }

    /// Changes the assignment parameters for topics and partitions created from now on.
    pub fn set_assignment_params(&mut self, params: AssignmentParams) {
        self.assignment = params;
    }

    /// The current image, read-only.
    pub fn image(&self) -> &MetadataImage {
        &self.image
    }

    /// A serializable copy of the image.
    pub fn snapshot(&self) -> MetadataSnapshot {
        MetadataSnapshot::of(&self.image, self.assignment)
    }

    /// Runs `step` over every partition (of `topic` only, if given) in topic then index
    /// order, applying each decision through [`PartitionState::transition`].
    fn update_partitions(
        &mut self,
        topic: Option<&str>,
        mut step: impl FnMut(&PartitionState, &Context<'_>) -> Option<Decision>,
    ) -> Vec<Change> {
        let MetadataImage { brokers, topics } = &mut self.image;
        let alive = |id: i32| brokers.get(&id).is_some_and(|b| b.alive);
        let mut changes = Vec::new();
        for t in topics.values_mut() {
            if topic.is_some_and(|name| name != t.name) {
                continue;
            }
            for (i, state) in t.partitions.iter_mut().enumerate() {
                let tp = TopicPartition::new(t.name.clone(), i as i32);
                let ctx = Context {
                    tp: &tp,
                    unclean_leader_election: t.unclean_leader_election,
                    alive: &alive,
                };
                if let Some(d) = step(state, &ctx) {
                    changes.extend(state.transition(&tp, d.leader, &d.isr, d.how));
                }
            }
        }
        changes
    }

    /// Checks the image's invariants (debug builds only).
    fn debug_check(&self) {
        if cfg!(debug_assertions) {
            let violation = self.image.invariant_violation();
            debug_assert!(violation.is_none(), "broken invariant: {violation:?}");
        }
    }
}
