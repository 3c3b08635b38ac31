//! The cascade: what happens when a bucket's expiration comes.
//!
//! Kafka's reaper polls the earliest bucket, advances the wheel's clock to its expiration
//! and *flushes* it: every entry is added to the wheel again, which puts it in a finer
//! level, or fires it once it is due. Here a flush does the same, with two differences:
//!
//! * **Incremental**: a bucket of level 1 and up places only its *head* (entries within
//!   the first tick of the level below, the only ones that can be due soon) at once; the
//!   rest is moved [`CHUNK`] entries at a time by the following advances, between firings,
//!   and finished outright by an advance that reaches the first time one of them could be
//!   due (`due_by`). So flushing a 400 ms bucket that holds a third of all timers does not
//!   make the timers due at that instant wait.
//! * **Observable**: every level counts the entries its flushes moved down a level and the
//!   ones they fired, and the last [`RECENT`] flushes are kept (level, slot, expiration,
//!   moved down, fired, when) for the state API's picture of the cascade.

use std::collections::VecDeque;

use crate::list::{Item, ListId};
use crate::snapshot::FlushSnapshot;

use super::TimingWheel;

/// How many entries of a pending cascade one advance moves when nothing else is due.
pub(super) const CHUNK: usize = 2048;

/// How many recent flushes a snapshot shows.
pub(crate) const RECENT: usize = 64;

/// An expired bucket whose *rest* list is being cascaded a chunk at a time; none of its
/// entries is due before `due_by`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Cascade {
    pub(super) bucket: usize,
    pub(super) due_by: u64,
    /// The number of the flush that started it, to add the later chunks to its record.
    flush: u64,
}

/// Entries a flush (or a cascade chunk) moved.
#[derive(Clone, Copy, Debug, Default)]
struct Moved {
    down: u64,
    fired: u64,
}

/// Per-level counters and the ring of recent flushes.
#[derive(Debug, Default)]
pub(super) struct CascadeStats {
    /// Per level: entries its flushes moved to a finer level.
    cascaded: Vec<u64>,
    /// Per level: entries its flushes put in the due list.
    fired: Vec<u64>,
    /// The last [`RECENT`] flushes, oldest first.
    recent: VecDeque<FlushSnapshot>,
    /// Flushes since the wheel was created.
    total: u64,
}

impl CascadeStats {
    pub(super) fn add_level(&mut self) {
        self.cascaded.push(0);
        self.fired.push(0);
    }

    pub(super) fn cascaded(&self, level: usize) -> u64 {
        self.cascaded[level]
    }

    pub(super) fn fired(&self, level: usize) -> u64 {
        self.fired[level]
    }

    pub(super) fn total(&self) -> u64 {
        self.total
    }

    pub(super) fn recent(&self) -> Vec<FlushSnapshot> {
        self.recent.iter().cloned().collect()
    }

    /// Record a flush; returns its number.
    fn record(&mut self, mut flush: FlushSnapshot, moved: Moved) -> u64 {
        self.count(flush.level, None, moved);
        flush.number = self.total;
        flush.moved_down = moved.down;
        flush.fired = moved.fired;
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(flush);
        self.total += 1;
        flush.number
    }

    /// Count entries moved by `level`, adding them to flush `number`'s record if it is
    /// still among the recent ones.
    fn count(&mut self, level: usize, number: Option<u64>, moved: Moved) {
        self.cascaded[level] += moved.down;
        self.fired[level] += moved.fired;
        let Some(number) = number else { return };
        let back = self.total - number;
        if let Some(at) = self.recent.len().checked_sub(back as usize) {
            let flush = &mut self.recent[at];
            debug_assert_eq!(flush.number, number);
            flush.moved_down += moved.down;
            flush.fired += moved.fired;
        }
    }
}

impl<T> TimingWheel<T> {
    /// Flush bucket `b`, whose expiration has come (the wheel's time is at it): place its
    /// entries again (level 0: all of them; coarser levels: the head now and the rest as a
    /// pending cascade).
    pub(super) fn flush(&mut self, b: usize) {
        let level = b / self.wheel_size as usize;
        let expiration = self.expirations[b];
        let mut moved = Moved::default();
        self.place_list(ListId::head(b), &mut moved);
        if level == 0 {
            self.place_list(ListId::rest(b), &mut moved);
        }
        let number = self.stats.record(
            FlushSnapshot {
                number: 0,
                level,
                slot: b % self.wheel_size as usize,
                expiration_ms: expiration,
                moved_down: 0,
                fired: 0,
                at_ms: self.now,
            },
            moved,
        );
        if level > 0 {
            if self.list(ListId::rest(b)).live() > 0 {
                self.cascading.push(Cascade {
                    bucket: b,
                    due_by: expiration.saturating_add(self.levels[level - 1].tick),
                    flush: number,
                });
            } else {
                // Tombstones only: nothing to cascade.
                self.list_mut(ListId::rest(b)).clear();
            }
        }
    }

    /// Take every entry out of list `id` and place it again, keeping the list's buffer.
    fn place_list(&mut self, id: ListId, moved: &mut Moved) {
        let items = self.list_mut(id).take();
        self.place_all(&items, moved);
        let used = items.len();
        self.list_mut(id).recycle(items, used);
    }

    /// Move up to `max` entries of a cascading bucket's rest list to finer levels. True if
    /// the list is now empty (the cascade is over).
    pub(super) fn cascade_chunk(&mut self, cascade: Cascade, max: usize) -> bool {
        let id = ListId::rest(cascade.bucket);
        let mut moved = Moved::default();
        if max >= self.list(id).len() {
            let items = self.list_mut(id).take();
            self.place_all(&items, &mut moved);
        } else {
            // Through a buffer kept between chunks (`TimingWheel::chunk`), so that a chunk
            // does not allocate and free one of its own on the driver's path (measured in
            // docs/performance.md).
            let mut items = std::mem::take(&mut self.chunk);
            self.list_mut(id).take_tail(max, &mut items);
            let dead = self.place_all(&items, &mut moved);
            self.list_mut(id).forget_dead(dead);
            items.clear();
            self.chunk = items;
        }
        let level = cascade.bucket / self.wheel_size as usize;
        self.stats.count(level, Some(cascade.flush), moved);
        let rest = self.list_mut(id);
        if rest.live() == 0 {
            // Only tombstones left (or nothing): the cascade is over.
            rest.clear();
        }
        rest.is_empty()
    }

    /// Place every listed entry of `items` (taken out of their list) again, counting where
    /// they went. Returns how many were tombstones.
    fn place_all(&mut self, items: &[Item], moved: &mut Moved) -> usize {
        let mut dead = 0;
        for &item in items {
            if !self.slab.is_current(item.index, item.generation) {
                dead += 1;
            } else if self.place(item) == ListId::DUE {
                moved.fired += 1;
            } else {
                moved.down += 1;
            }
        }
        dead
    }
}
