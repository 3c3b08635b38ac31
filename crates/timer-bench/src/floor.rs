//! The floor: the least that any timer whose stale keys cancel nothing must do.
//!
//! `slots-only` is not a timer. It keeps each value in a slot of a table, with the slot's
//! generation, and hands out (slot, generation) as the key; a cancel compares the key's
//! generation with the slot's and takes the value. Slots are reused last in, first out. No
//! deadline is kept and nothing is ordered, so nothing can ever fire.
//!
//! It is in the churn and scale workloads as a floor under the real implementations. A
//! churn step reads a random key from the benchmark's array of keys, then the slot that key
//! names: two reads at random addresses, the second waiting for the first. While all the
//! pending timers fit in the processor's caches both are cheap; with millions, both miss.
//! Every implementation pays those two, the wheel and the heap included, so how this line
//! grows with the pending count is what the memory hierarchy alone does, before any
//! algorithm.

/// The key of a slot: its index and the generation it had when the value went in.
#[derive(Clone, Copy, Debug)]
pub struct SlotKey {
    index: u32,
    generation: u32,
}

/// One slot: 8 bytes for a `NonZeroU32`, as small as the heap's.
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// A table of generation-checked slots with a free list.
pub struct SlotsOnly<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
}

impl<T> SlotsOnly<T> {
    /// An empty table with room for `capacity` values.
    pub fn with_capacity(capacity: usize) -> Self {
        SlotsOnly {
            slots: Vec::with_capacity(capacity),
            free: Vec::with_capacity(capacity),
        }
    }

    /// Store `value` in the most recently freed slot (or a new one).
    #[inline]
    pub fn add(&mut self, value: T) -> SlotKey {
        if let Some(index) = self.free.pop() {
            let slot = &mut self.slots[index as usize];
            slot.value = Some(value);
            return SlotKey {
                index,
                generation: slot.generation,
            };
        }
        let index = self.slots.len() as u32;
        self.slots.push(Slot {
            generation: 0,
            value: Some(value),
        });
        SlotKey {
            index,
            generation: 0,
        }
    }

    /// Take the value back if the key is current; a stale key takes nothing.
    #[inline]
    pub fn cancel(&mut self, key: SlotKey) -> Option<T> {
        let slot = self.slots.get_mut(key.index as usize)?;
        if slot.generation != key.generation {
            return None;
        }
        let value = slot.value.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(key.index);
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_key_takes_nothing_from_the_slot_reused_after_it() {
        let mut table = SlotsOnly::with_capacity(2);
        let a = table.add('a');
        assert_eq!(table.cancel(a), Some('a'));
        let b = table.add('b');
        assert_eq!(b.index, a.index, "the freed slot is reused");
        assert_eq!(table.cancel(a), None);
        assert_eq!(table.cancel(b), Some('b'));
    }
}
