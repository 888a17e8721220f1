//! Damaged copies of test inputs, the same on every run: the unit tests of
//! the readers and rewriters feed them in and expect a clean error or an
//! output that passes the rewriter's own check.

/// `rounds` copies of `data` (not empty), copy `r` with `1 + r % 3` bytes
/// overwritten at places an xorshift generator started at `seed` picks;
/// the generator runs on from copy to copy. Yields `(r, copy)`.
pub fn damaged_copies(data: &[u8], seed: u64, rounds: usize) -> impl Iterator<Item = (usize, Vec<u8>)> + '_ {
    let mut seed = seed;
    (0..rounds).map(move |round| {
        let mut d = data.to_vec();
        for _ in 0..1 + round % 3 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = (seed % d.len() as u64) as usize;
            d[at] = (seed >> 40) as u8;
        }
        (round, d)
    })
}
