//! Levels and buckets: Kafka's `TimingWheel` layout, and where a timer goes.
//!
//! Level 0 has `wheel_size` buckets, each `tick_ms` wide, so it covers
//! `interval = tick_ms * wheel_size` milliseconds from its current time. Level `n + 1`
//! (an *overflow wheel* in Kafka's words) has the same number of buckets, each as wide as
//! the whole of level `n`. Bucket `b` of the wheel is slot `b % wheel_size` of level
//! `b / wheel_size`.

use crate::list::{List, ListId};

/// One level of the wheel.
#[derive(Clone, Copy, Debug)]
pub(super) struct Level {
    /// Width of one bucket.
    pub(super) tick: u64,
    /// Width of the whole level, `tick * wheel_size`, saturating at `u64::MAX`.
    pub(super) interval: u64,
    /// The wheel's time rounded down to a multiple of `tick`.
    pub(super) current: u64,
}

impl Level {
    pub(super) fn new(tick: u64, wheel_size: u64, now: u64) -> Level {
        Level {
            tick,
            interval: tick.saturating_mul(wheel_size),
            current: now / tick * tick,
        }
    }

    /// Move the level's time to `now` (rounded down to its tick).
    pub(super) fn set_time(&mut self, now: u64) {
        self.current = now / self.tick * self.tick;
    }

    /// True if an expiration (a multiple of the wheel's tick, after the current time)
    /// falls within this level's span.
    #[inline]
    pub(super) fn covers(&self, expiration: u64) -> bool {
        expiration < self.current.saturating_add(self.interval)
    }
}

/// A bucket: Kafka's `TimerTaskList`, split in two lists (see "Incremental cascades" in
/// the module docs), with its expiration while it holds timers.
#[derive(Debug, Default)]
pub(super) struct Bucket {
    /// Entries not in `head`.
    pub(super) rest: List,
    /// Level 1 and up: entries within the first tick of the level below, placed as soon
    /// as the bucket expires. Always empty on level 0.
    pub(super) head: List,
    /// The start of the span the bucket covers, when it is flushed.
    pub(super) expiration: u64,
}

impl Bucket {
    pub(super) fn is_empty(&self) -> bool {
        self.rest.is_empty() && self.head.is_empty()
    }

    /// Number of live entries.
    pub(super) fn live(&self) -> usize {
        self.rest.live() + self.head.live()
    }
}

/// Where a timer goes: its bucket, the bucket's expiration and which of its lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Placement {
    pub(super) bucket: usize,
    pub(super) expiration: u64,
    pub(super) list: ListId,
}

/// A placement and every expiration that gets the same one while the wheel's time stands
/// still: `first..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Span {
    pub(super) first: u64,
    pub(super) end: u64,
    pub(super) placement: Placement,
}

impl Span {
    /// Matches nothing.
    pub(super) const EMPTY: Span = Span {
        first: 1,
        end: 0,
        placement: Placement {
            bucket: 0,
            expiration: 0,
            list: ListId::DUE,
        },
    };

    #[inline]
    pub(super) fn contains(&self, expiration: u64) -> bool {
        self.first <= expiration && expiration < self.end
    }
}

/// The bucket of `levels[level]` for `expiration`, which that level is the finest to
/// cover, and the span of expirations that go to the same list.
#[inline]
pub(super) fn place_in(level: usize, levels: &[Level], wheel_size: u64, expiration: u64) -> Span {
    let l = &levels[level];
    let virtual_bucket = expiration / l.tick;
    let bucket = level * wheel_size as usize + (virtual_bucket % wheel_size) as usize;
    let start = virtual_bucket * l.tick;
    // The bucket's span, within what this level covers and no finer level does.
    let mut first = start;
    let mut end = start
        .saturating_add(l.tick)
        .min(l.current.saturating_add(l.interval));
    let mut list = ListId::rest(bucket);
    if let Some(below) = level.checked_sub(1).map(|b| &levels[b]) {
        first = first.max(below.current.saturating_add(below.interval));
        let head_end = start.saturating_add(below.tick);
        if expiration < head_end {
            list = ListId::head(bucket);
            end = end.min(head_end);
        } else {
            first = first.max(head_end);
        }
    }
    Span {
        first,
        end,
        placement: Placement {
            bucket,
            expiration: start,
            list,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_default_levels_and_placements() {
        let ws = 20;
        let levels = [
            Level::new(1, ws, 0),
            Level::new(20, ws, 0),
            Level::new(400, ws, 0),
        ];
        assert_eq!(levels[1].interval, 400);
        assert!(levels[0].covers(19) && !levels[0].covers(20));
        let span = place_in(0, &levels, ws, 7);
        assert_eq!(
            span.placement,
            Placement {
                bucket: 7,
                expiration: 7,
                list: ListId::rest(7)
            }
        );
        assert_eq!((span.first, span.end), (7, 8));
        // 25 ms: level 1, slot 1 (20..40), not in its first millisecond: the rest.
        let span = place_in(1, &levels, ws, 25);
        assert_eq!(
            span.placement,
            Placement {
                bucket: 21,
                expiration: 20,
                list: ListId::rest(21)
            }
        );
        assert_eq!((span.first, span.end), (21, 40));
        // 400 ms: level 2, slot 1, within its first 20 ms: the head.
        let head = place_in(2, &levels, ws, 419);
        assert_eq!(head.placement.list, ListId::head(41));
        assert_eq!((head.first, head.end), (400, 420));
        let rest = place_in(2, &levels, ws, 420);
        assert_eq!(rest.placement.list, ListId::rest(41));
        assert_eq!((rest.first, rest.end), (420, 800));
    }
}
