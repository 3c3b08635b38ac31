//! Baseline: a `std::collections::BinaryHeap` timer with lazy cancellation.
//!
//! This is the textbook alternative to a timing wheel, and roughly what Java's
//! `DelayQueue` / `ScheduledThreadPoolExecutor` do: a min-heap ordered by deadline. A heap
//! cannot remove an arbitrary element cheaply, so cancelling only marks the timer dead (a
//! *tombstone*): each timer owns a slot in a side table with a generation counter, the heap
//! entry remembers the generation, and a popped entry whose generation no longer matches is
//! skipped. When tombstones outnumber live entries the heap is rebuilt without them, so
//! memory stays bounded under endless churn (amortised O(1) per cancel).
//!
//! Costs: add O(log n) (O(1) on average for random deadlines), cancel O(1) plus the
//! amortised rebuild, pop O(log n).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Handle of a heap timer: its slot and the slot's generation.
#[derive(Clone, Copy, Debug)]
pub struct HeapHandle {
    slot: u32,
    generation: u32,
}

struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// A binary-heap timer with tombstones.
pub struct HeapTimer<T> {
    /// (deadline, slot, generation), smallest deadline on top.
    heap: BinaryHeap<Reverse<(u64, u32, u32)>>,
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    tombstones: usize,
}

impl<T> HeapTimer<T> {
    /// An empty timer with room for `capacity` timers.
    pub fn with_capacity(capacity: usize) -> Self {
        HeapTimer {
            heap: BinaryHeap::with_capacity(capacity),
            slots: Vec::with_capacity(capacity),
            free: Vec::with_capacity(capacity),
            tombstones: 0,
        }
    }

    /// Add a timer due at `deadline`.
    pub fn add(&mut self, deadline: u64, value: T) -> HeapHandle {
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize].value = Some(value);
                slot
            }
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    value: Some(value),
                });
                (self.slots.len() - 1) as u32
            }
        };
        let generation = self.slots[slot as usize].generation;
        self.heap.push(Reverse((deadline, slot, generation)));
        HeapHandle { slot, generation }
    }

    /// Cancel a timer: mark its heap entry dead. True if it was pending.
    pub fn cancel(&mut self, handle: HeapHandle) -> bool {
        let slot = &mut self.slots[handle.slot as usize];
        if slot.generation != handle.generation || slot.value.is_none() {
            return false;
        }
        slot.value = None;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(handle.slot);
        self.tombstones += 1;
        if self.tombstones > 1024 && self.tombstones > self.heap.len() / 2 {
            let slots = &self.slots;
            self.heap
                .retain(|Reverse((_, s, g))| slots[*s as usize].generation == *g);
            self.tombstones = 0;
        }
        true
    }

    /// The earliest live deadline, dropping dead entries found on top.
    pub fn next_deadline(&mut self) -> Option<u64> {
        while let Some(&Reverse((deadline, slot, generation))) = self.heap.peek() {
            if self.slots[slot as usize].generation == generation {
                return Some(deadline);
            }
            self.heap.pop();
            self.tombstones -= 1;
        }
        None
    }

    /// Pop one live timer due at or before `now`.
    pub fn pop_due(&mut self, now: u64) -> Option<(u64, T)> {
        let deadline = self.next_deadline()?;
        if deadline > now {
            return None;
        }
        let Reverse((_, slot, _)) = self.heap.pop()?;
        let s = &mut self.slots[slot as usize];
        s.generation = s.generation.wrapping_add(1);
        self.free.push(slot);
        s.value.take().map(|v| (deadline, v))
    }
}
