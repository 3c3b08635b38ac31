//! A fixed-size ring of recent records, numbered from 1.
//!
//! Writers claim the next number with one atomic add and then fill the record in its
//! slot under that slot's own lock, so two requests never wait on each other unless the
//! ring has wrapped all the way round between them. A record is later found again by its
//! number (one lock, one comparison); once the ring has wrapped past it, it is gone and
//! lookups answer `None`. Slots are allocated once and reused: their strings and vectors
//! keep their capacity, so a steady stream of records allocates nothing.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// A record that knows its number (0: never written).
pub trait Numbered: Default {
    /// The record's number.
    fn seq(&self) -> u64;
}

/// The ring.
pub struct Ring<T> {
    next: AtomicU64,
    slots: Box<[Mutex<T>]>,
    mask: u64,
}

impl<T: Numbered> Ring<T> {
    /// A ring of `capacity` slots, rounded up to a power of two.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(2).next_power_of_two();
        Ring {
            next: AtomicU64::new(1),
            slots: (0..capacity).map(|_| Mutex::new(T::default())).collect(),
            mask: capacity as u64 - 1,
        }
    }

    /// How many records the ring keeps.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// The number the next record will get (so the last one written is this minus 1).
    pub fn next_seq(&self) -> u64 {
        self.next.load(Ordering::Acquire)
    }

    /// Claims the next number and fills its slot with `fill(seq, slot)`.
    pub fn push(&self, fill: impl FnOnce(u64, &mut T)) -> u64 {
        let seq = self.next.fetch_add(1, Ordering::AcqRel);
        let mut slot = self.slots[(seq & self.mask) as usize].lock();
        fill(seq, &mut slot);
        seq
    }

    /// Runs `f` on record `seq` if the ring still holds it.
    pub fn with<R>(&self, seq: u64, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        if seq == 0 {
            return None;
        }
        let mut slot = self.slots[(seq & self.mask) as usize].lock();
        (slot.seq() == seq).then(|| f(&mut slot))
    }

    /// Maps the records numbered above `after` that the ring still holds, newest first,
    /// keeping at most `limit` for which `f` returns `Some`.
    pub fn newest<R>(
        &self,
        after: u64,
        limit: usize,
        mut f: impl FnMut(&T) -> Option<R>,
    ) -> Vec<R> {
        let next = self.next_seq();
        let oldest = next
            .saturating_sub(self.slots.len() as u64)
            .max(after + 1)
            .max(1);
        let mut out = Vec::new();
        let mut seq = next;
        while seq > oldest && out.len() < limit {
            seq -= 1;
            let slot = self.slots[(seq & self.mask) as usize].lock();
            if slot.seq() == seq {
                if let Some(r) = f(&slot) {
                    out.push(r);
                }
            }
        }
        out
    }

    /// Maps the records numbered in `from..to` that the ring still holds, oldest first.
    pub fn range<R>(&self, from: u64, to: u64, mut f: impl FnMut(&T) -> Option<R>) -> Vec<R> {
        let next = self.next_seq();
        let start = from
            .max(next.saturating_sub(self.slots.len() as u64))
            .max(1);
        let end = to.min(next);
        let mut out = Vec::new();
        for seq in start..end {
            let slot = self.slots[(seq & self.mask) as usize].lock();
            if slot.seq() == seq {
                if let Some(r) = f(&slot) {
                    out.push(r);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Rec {
        seq: u64,
        value: u64,
    }

    impl Numbered for Rec {
        fn seq(&self) -> u64 {
            self.seq
        }
    }

    #[test]
    fn records_are_found_by_number_until_the_ring_wraps_past_them() {
        let ring: Ring<Rec> = Ring::new(4);
        let first = ring.push(|seq, r| {
            r.seq = seq;
            r.value = 10;
        });
        assert_eq!(first, 1);
        assert_eq!(ring.with(1, |r| r.value), Some(10));
        for v in 0..4 {
            ring.push(|seq, r| {
                r.seq = seq;
                r.value = v;
            });
        }
        assert_eq!(ring.with(1, |r| r.value), None, "overwritten by record 5");
        assert_eq!(ring.newest(0, 10, |r| Some(r.seq)), vec![5, 4, 3, 2]);
        assert_eq!(ring.newest(3, 10, |r| Some(r.seq)), vec![5, 4]);
        assert_eq!(ring.newest(0, 1, |r| Some(r.seq)), vec![5]);
        assert_eq!(ring.range(0, 100, |r| Some(r.seq)), vec![2, 3, 4, 5]);
        assert_eq!(ring.range(3, 5, |r| Some(r.seq)), vec![3, 4]);
    }
}
