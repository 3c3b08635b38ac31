//! Producer ids for idempotent producers (InitProducerId without a transactional id).
//!
//! Kafka hands out blocks of ids from the controller and remembers each producer's epoch
//! in the logs' producer state. Here one counter hands out ids, and a bounded table keeps
//! the current epoch of recent ids so that KIP-360 epoch bumps can be checked: a producer
//! that hit an error presents its id and epoch and gets the epoch bumped, unless another
//! instance already bumped it (PRODUCER_FENCED) or the id is unknown
//! (INVALID_PRODUCER_ID_MAPPING). The table forgets the oldest ids past its capacity, so
//! a client calling InitProducerId in a loop cannot grow the broker's memory.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use parking_lot::Mutex;

/// How many producer ids keep their epoch on record.
pub const REMEMBERED_PRODUCER_IDS: usize = 100_000;

/// The first id handed out (as a fresh Kafka cluster's first block starts at 0; any
/// non-negative value works, this one is easy to spot in logs).
const FIRST_PRODUCER_ID: i64 = 1000;

/// Hands out producer ids and tracks their epochs.
pub struct ProducerIdManager {
    state: Mutex<State>,
}

struct State {
    next_id: i64,
    /// Ids grow, so the smallest key is the oldest producer.
    epochs: BTreeMap<i64, i16>,
}

impl Default for ProducerIdManager {
    fn default() -> Self {
        ProducerIdManager {
            state: Mutex::new(State {
                next_id: FIRST_PRODUCER_ID,
                epochs: BTreeMap::new(),
            }),
        }
    }
}

impl ProducerIdManager {
    /// A new producer id, at epoch 0.
    pub fn allocate(&self) -> (i64, i16) {
        let mut state = self.state.lock();
        Self::allocate_locked(&mut state)
    }

    fn allocate_locked(state: &mut State) -> (i64, i16) {
        let id = state.next_id;
        state.next_id += 1;
        state.epochs.insert(id, 0);
        while state.epochs.len() > REMEMBERED_PRODUCER_IDS {
            state.epochs.pop_first();
        }
        (id, 0)
    }

    /// KIP-360: bumps the epoch of `id`, which must be at `epoch`. An epoch that would
    /// overflow gets a fresh id instead, as Kafka does.
    pub fn bump_epoch(&self, id: i64, epoch: i16) -> Result<(i64, i16), ResponseError> {
        let mut state = self.state.lock();
        match state.epochs.get_mut(&id) {
            Some(current) if *current == epoch => {
                if *current == i16::MAX {
                    return Ok(Self::allocate_locked(&mut state));
                }
                *current += 1;
                Ok((id, *current))
            }
            Some(_) => Err(ResponseError::ProducerFenced),
            None => Err(ResponseError::InvalidProducerIdMapping),
        }
    }

    /// Ids with an epoch on record.
    pub fn remembered(&self) -> usize {
        self.state.lock().epochs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_bump_once_per_holder_and_old_ids_are_forgotten() {
        let ids = ProducerIdManager::default();
        let (id, epoch) = ids.allocate();
        assert_eq!(ids.bump_epoch(id, epoch), Ok((id, 1)));
        // A second instance still at epoch 0 is fenced.
        assert_eq!(ids.bump_epoch(id, 0), Err(ResponseError::ProducerFenced));
        assert_eq!(
            ids.bump_epoch(id + 99, 0),
            Err(ResponseError::InvalidProducerIdMapping)
        );
        for _ in 0..REMEMBERED_PRODUCER_IDS {
            ids.allocate();
        }
        assert_eq!(ids.remembered(), REMEMBERED_PRODUCER_IDS);
        assert_eq!(
            ids.bump_epoch(id, 1),
            Err(ResponseError::InvalidProducerIdMapping),
            "the oldest id was forgotten"
        );
    }
}
