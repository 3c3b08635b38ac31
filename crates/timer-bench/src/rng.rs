//! A tiny, fast, seeded random number generator for the benchmark loops.
//!
//! SplitMix64: one multiply-xorshift chain per number, so the generator costs little
//! beside the timer operations it drives. It implements `rand::RngCore`, so the
//! `rand` / `rand_distr` helpers (ranges, shuffles, exponential and log-normal samples)
//! work on it. Every workload uses a fixed seed, so runs are repeatable.

use rand::RngCore;

/// SplitMix64 state.
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator with the given seed.
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }

    /// A uniform number in `0..n` (multiply-shift; the bias is below 2^-32 for our n).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// A uniform number in `lo..hi`.
    #[inline]
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo)
    }
}

impl RngCore for SplitMix {
    #[inline]
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}
