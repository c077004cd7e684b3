//! The mutators' random numbers: a small xorshift generator seeded by
//! libFuzzer, so that a mutation is deterministic in its seed.

/// A xorshift32 generator; the seed must be non-zero (callers pass `seed | 1`).
pub struct Rng(pub u32);

impl Rng {
    /// A number in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0 as usize % n.max(1)
    }
}
