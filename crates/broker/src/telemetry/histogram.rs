//! A lock-free latency histogram for the request path.
//!
//! Kafka's request metrics are Yammer histograms, read over JMX as percentiles. Here each
//! request adds its phase times with one relaxed atomic increment per phase into
//! log-linear buckets (8 per power of two, so any quantile read back is within about 6%
//! of the true value), and nothing else: no lock, no allocation. Quantiles are computed
//! only when someone reads them (a `/metrics` scrape, the live view).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Sub-buckets per power of two.
const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
/// Nanosecond values up to 2^42 ns (about 73 minutes) are told apart; larger ones land in
/// the last bucket.
const MAX_BITS: usize = 42;
const BUCKETS: usize = (MAX_BITS - SUB_BITS as usize + 1) * SUB;

/// Counts of durations in log-linear nanosecond buckets, plus their sum.
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    sum_ns: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum_ns: AtomicU64::new(0),
        }
    }
}

/// The bucket of a value: exact below `SUB`, then `SUB` buckets per power of two.
fn index(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let msb = 63 - ns.leading_zeros() as usize; // >= SUB_BITS
    if msb >= MAX_BITS {
        return BUCKETS - 1;
    }
    let sub = ((ns >> (msb - SUB_BITS as usize)) as usize) & (SUB - 1);
    (msb - SUB_BITS as usize + 1) * SUB + sub
}

/// The smallest value of a bucket.
fn lower_bound(index: usize) -> u64 {
    if index < SUB {
        return index as u64;
    }
    let octave = index / SUB - 1 + SUB_BITS as usize; // the msb
    let sub = (index % SUB) as u64;
    (1u64 << octave) | (sub << (octave - SUB_BITS as usize))
}

impl Histogram {
    /// Adds one duration.
    pub fn record(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.buckets[index(ns)].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// How many durations were added.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// The sum of every duration added, in milliseconds.
    pub fn sum_ms(&self) -> f64 {
        self.sum_ns.load(Ordering::Relaxed) as f64 / 1e6
    }

    /// The values at each quantile of `qs` (each in 0..=1, ascending), in milliseconds:
    /// the middle of the bucket holding that rank. All zero when empty.
    pub fn quantiles_ms(&self, qs: &[f64]) -> Vec<f64> {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return vec![0.0; qs.len()];
        }
        let mut out = Vec::with_capacity(qs.len());
        let mut seen = 0u64;
        let mut i = 0usize;
        for &q in qs {
            // The rank (1-based) of the q-quantile.
            let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
            while seen + counts[i] < rank {
                seen += counts[i];
                i += 1;
            }
            let lo = lower_bound(i);
            let hi = if i + 1 < BUCKETS {
                lower_bound(i + 1)
            } else {
                lo
            };
            out.push((lo + hi.saturating_sub(lo) / 2) as f64 / 1e6);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_cover_every_value() {
        let mut last = 0;
        for i in 1..BUCKETS {
            let lo = lower_bound(i);
            assert!(lo > last, "bucket {i} starts at {lo}, not after {last}");
            assert_eq!(index(lo), i);
            assert_eq!(index(lo - 1), i - 1);
            last = lo;
        }
        assert_eq!(index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_are_within_the_bucket_precision() {
        let h = Histogram::default();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        assert_eq!(h.count(), 1000);
        let q = h.quantiles_ms(&[0.5, 0.99, 1.0]);
        for (got, want) in q.iter().zip([0.5, 0.99, 1.0]) {
            assert!(
                (got - want).abs() / want < 0.07,
                "quantile {got} ms, expected about {want} ms"
            );
        }
        assert!((h.sum_ms() - 500.5).abs() < 1e-6);
        assert_eq!(Histogram::default().quantiles_ms(&[0.5]), vec![0.0]);
    }
}
