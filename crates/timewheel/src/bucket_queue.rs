//! The bucket queue: which non-empty bucket is due next.
//!
//! Kafka's `SystemTimer` keeps its buckets (`TimerTaskList`s) in a
//! `java.util.concurrent.DelayQueue` ordered by bucket expiration; the reaper thread polls
//! it, advances the wheel clock to the polled bucket's expiration and flushes the bucket.
//! Timers themselves never enter that queue, only buckets do, which is why adding a timer
//! is O(1) while the queue stays tiny.
//!
//! This is the same idea as an *indexed* binary min-heap over bucket ids, keyed by the
//! bucket's expiration. Being indexed (every bucket remembers its position in the heap)
//! lets a bucket leave the queue the moment its last timer is cancelled, so the queue holds
//! exactly the non-empty buckets: the driver never wakes for an empty bucket, and the
//! queue never fills with stale entries. Kafka's queue, by contrast, keeps a bucket whose
//! timers were all cancelled until its expiration comes round.
//!
//! Size: at most `levels * wheel_size` entries (a few hundred), so every operation is
//! O(log B) with a tiny B. Ties between equal expirations are broken by bucket id, which
//! makes the order deterministic.

/// `position` of a bucket that is not queued.
const NIL: u32 = u32::MAX;

/// An indexed min-heap of `(expiration, bucket id)`.
#[derive(Debug, Default)]
pub(crate) struct BucketQueue {
    /// The heap proper, ordered by `(expiration, bucket)`.
    heap: Vec<(u64, u32)>,
    /// For every bucket id, its position in `heap`, or `NIL` if it is not queued.
    position: Vec<u32>,
}

impl BucketQueue {
    /// Make room for bucket ids `0..buckets`.
    pub(crate) fn reserve_buckets(&mut self, buckets: usize) {
        if self.position.len() < buckets {
            self.position.resize(buckets, NIL);
        }
    }

    /// The earliest `(expiration, bucket)`, if any.
    pub(crate) fn peek(&self) -> Option<(u64, u32)> {
        self.heap.first().copied()
    }

    /// Queue a bucket that is not queued yet.
    pub(crate) fn push(&mut self, bucket: u32, expiration: u64) {
        debug_assert_eq!(self.position[bucket as usize], NIL, "bucket queued twice");
        let at = self.heap.len();
        self.heap.push((expiration, bucket));
        self.position[bucket as usize] = at as u32;
        self.sift_up(at);
    }

    /// Remove and return the earliest `(expiration, bucket)`.
    pub(crate) fn pop(&mut self) -> Option<(u64, u32)> {
        let top = *self.heap.first()?;
        self.remove_at(0);
        Some(top)
    }

    /// Remove a bucket if it is queued; a no-op otherwise.
    pub(crate) fn remove(&mut self, bucket: u32) {
        let at = self.position[bucket as usize];
        if at != NIL {
            self.remove_at(at as usize);
        }
    }

    /// All queued `(expiration, bucket)` pairs, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.heap.iter().copied()
    }

    fn remove_at(&mut self, at: usize) {
        let (_, bucket) = self.heap.swap_remove(at);
        self.position[bucket as usize] = NIL;
        if at < self.heap.len() {
            self.position[self.heap[at].1 as usize] = at as u32;
            // The element moved into `at` may need to go either way.
            let at = self.sift_up(at);
            self.sift_down(at);
        }
    }

    fn sift_up(&mut self, mut at: usize) -> usize {
        while at > 0 {
            let parent = (at - 1) / 2;
            if self.heap[at] >= self.heap[parent] {
                break;
            }
            self.swap(at, parent);
            at = parent;
        }
        at
    }

    fn sift_down(&mut self, mut at: usize) {
        loop {
            let left = 2 * at + 1;
            if left >= self.heap.len() {
                return;
            }
            let right = left + 1;
            let child = if right < self.heap.len() && self.heap[right] < self.heap[left] {
                right
            } else {
                left
            };
            if self.heap[at] <= self.heap[child] {
                return;
            }
            self.swap(at, child);
            at = child;
        }
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.position[self.heap[a].1 as usize] = a as u32;
        self.position[self.heap[b].1 as usize] = b as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_expiration_order_and_removes_from_the_middle() {
        let mut q = BucketQueue::default();
        q.reserve_buckets(10);
        for (bucket, exp) in [(0, 50), (1, 10), (2, 40), (3, 20), (4, 30), (5, 10)] {
            q.push(bucket, exp);
        }
        q.remove(2);
        q.remove(2); // not queued any more: no-op
        assert_eq!(q.iter().count(), 5);
        let mut popped = Vec::new();
        while let Some(p) = q.pop() {
            popped.push(p);
        }
        assert_eq!(popped, vec![(10, 1), (10, 5), (20, 3), (30, 4), (50, 0)]);
        // Every bucket can be queued again.
        q.push(2, 7);
        assert_eq!(q.peek(), Some((7, 2)));
    }
}
