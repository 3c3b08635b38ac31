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

/// The bucket of `levels[level]` for `expiration`, which that level is the finest to
/// cover. `below` is the level underneath (for the head/rest split), if any.
#[inline]
pub(super) fn place_in(
    level: usize,
    levels: &[Level],
    wheel_size: u64,
    expiration: u64,
) -> Placement {
    let l = &levels[level];
    let virtual_bucket = expiration / l.tick;
    let bucket = level * wheel_size as usize + (virtual_bucket % wheel_size) as usize;
    let start = virtual_bucket * l.tick;
    let list = match level.checked_sub(1) {
        Some(below) if expiration < start.saturating_add(levels[below].tick) => {
            ListId::head(bucket)
        }
        _ => ListId::rest(bucket),
    };
    Placement {
        bucket,
        expiration: start,
        list,
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
        assert_eq!(
            place_in(0, &levels, ws, 7),
            Placement {
                bucket: 7,
                expiration: 7,
                list: ListId::rest(7)
            }
        );
        // 25 ms: level 1, slot 1 (20..40), not in its first millisecond: the rest.
        assert_eq!(
            place_in(1, &levels, ws, 25),
            Placement {
                bucket: 21,
                expiration: 20,
                list: ListId::rest(21)
            }
        );
        // 400 ms: level 2, slot 1, within its first 20 ms: the head.
        assert_eq!(place_in(2, &levels, ws, 419).list, ListId::head(41));
        assert_eq!(place_in(2, &levels, ws, 420).list, ListId::rest(41));
    }
}
