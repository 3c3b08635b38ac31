//! A small, fast, non-cryptographic hasher for the purgatory's watcher maps.
//!
//! Every `try_complete_else_watch` hashes each of its keys twice (to pick a shard, then
//! inside that shard's `HashMap`). The standard library's SipHash is built to resist
//! hash-flooding by untrusted input, which costs tens of nanoseconds per key; watch keys
//! are the broker's own values (topic-partitions, group ids), so the purgatory uses this
//! multiply-rotate hash instead (the one rustc uses internally, "FxHash"), a few
//! nanoseconds per key.

use std::hash::{BuildHasherDefault, Hasher};

/// The multiply-rotate hasher. Not resistant to deliberately colliding keys.
#[derive(Clone, Copy, Default)]
pub(crate) struct FxHasher {
    hash: u64,
}

/// `BuildHasher` for [`FxHasher`].
pub(crate) type FxBuildHasher = BuildHasherDefault<FxHasher>;

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // Mix the high bits down: shard selection uses the low bits.
        self.hash ^ (self.hash >> 29)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn equal_keys_hash_equal_and_shards_spread() {
        let b = FxBuildHasher::default();
        assert_eq!(b.hash_one("topic-0"), b.hash_one("topic-0"));
        assert_ne!(b.hash_one("topic-0"), b.hash_one("topic-1"));
        let mut shards = [0usize; 16];
        for k in 0u64..1600 {
            shards[(b.hash_one(k) & 15) as usize] += 1;
        }
        assert!(shards.iter().all(|&n| n > 50), "{shards:?}");
    }
}
