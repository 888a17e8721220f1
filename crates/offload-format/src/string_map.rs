//! The iteration order of LLVM's `StringMap`.
//!
//! LLVM's bundler keeps bundle entries and requested targets in a
//! `StringMap`, and both `-list` and unbundling walk that map in bucket
//! order: neither file order nor sorted. Reproducing LLVM's output therefore
//! means simulating the table: 16 initial buckets, bucket = hash & (n - 1),
//! quadratic probing (+1, +2, +3, ...), and after an insertion that leaves
//! the table more than 3/4 full, doubling it and re-inserting the entries in
//! old bucket order with their stored hashes.

/// The key hash a `StringMap` uses, which depends on the LLVM version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StringHash {
    /// `xxh3_64bits` truncated to 32 bits (LLVM 19 and later).
    Xxh3,
    /// Bernstein's hash with seed 0 (`h = h * 33 + byte`), LLVM 14 and 16.
    /// No tool of ours follows those releases' bundler; the unit tests
    /// check the table against LLVM 14's orders with it.
    #[cfg_attr(not(test), allow(dead_code))]
    Djb,
}

impl StringHash {
    /// The 32-bit hash of `key` that picks its bucket.
    pub fn hash(self, key: &[u8]) -> u32 {
        match self {
            StringHash::Xxh3 => xxhash_rust::xxh3::xxh3_64(key) as u32,
            StringHash::Djb => key.iter().fold(0u32, |h, &b| h.wrapping_mul(33).wrapping_add(u32::from(b))),
        }
    }
}

/// Simulates insertions into a `StringMap` to learn its iteration order.
#[derive(Clone, Debug)]
pub struct StringMapOrder<'k> {
    hash: StringHash,
    /// Each bucket holds (full hash, key, insertion index of the first insert).
    buckets: Vec<Option<(u32, &'k [u8], usize)>>,
    items: usize,
    /// Probe steps taken so far (see [`string_map_order`]'s budget).
    probes: u64,
}

impl<'k> StringMapOrder<'k> {
    /// An empty map (16 buckets, as LLVM starts) using `hash`.
    pub fn new(hash: StringHash) -> Self {
        StringMapOrder { hash, buckets: vec![None; 16], items: 0, probes: 0 }
    }

    fn probe(buckets: &[Option<(u32, &[u8], usize)>], full: u32, key: &[u8], probes: &mut u64) -> usize {
        let mask = buckets.len() - 1;
        let mut b = full as usize & mask;
        let mut step = 1;
        while let Some((h, k, _)) = buckets[b] {
            if h == full && k == key {
                break;
            }
            b = (b + step) & mask;
            step += 1;
        }
        *probes += step as u64;
        b
    }

    /// Probe steps taken so far.
    pub fn probes(&self) -> u64 {
        self.probes
    }

    /// Inserts `key`; returns false if it was already present (LLVM keeps the
    /// bucket of the first insertion and overwrites the value).
    pub fn insert(&mut self, key: &'k [u8], index: usize) -> bool {
        let full = self.hash.hash(key);
        let b = Self::probe(&self.buckets, full, key, &mut self.probes);
        if self.buckets[b].is_some() {
            return false;
        }
        self.buckets[b] = Some((full, key, index));
        self.items += 1;
        if self.items * 4 > self.buckets.len() * 3 {
            let mut grown = vec![None; self.buckets.len() * 2];
            let mask = grown.len() - 1;
            for (full, key, index) in self.buckets.iter().flatten().copied() {
                let mut nb = full as usize & mask;
                let mut step = 1;
                while grown[nb].is_some() {
                    nb = (nb + step) & mask;
                    step += 1;
                }
                self.probes += step as u64;
                grown[nb] = Some((full, key, index));
            }
            self.buckets = grown;
        }
        true
    }

    /// Insertion indices (of first insertions) in iteration order.
    pub fn order(&self) -> Vec<usize> {
        self.buckets.iter().flatten().map(|&(_, _, i)| i).collect()
    }
}

/// The iteration order of a `StringMap` built by inserting `keys` in order:
/// indices into `keys`, one per distinct key, at the position of its first
/// insertion.
///
/// Keys crafted so that their hashes agree in the low bits all probe the
/// same buckets, and the table takes quadratic time (as LLVM's does: a
/// bundle of a million such IDs would keep it busy for hours). Real keys
/// take a few probes each; past a budget of 64 probes per key (plus a
/// million), the simulation stops and the distinct keys are returned in
/// insertion order instead of LLVM's order.
pub fn string_map_order<K: AsRef<[u8]>>(keys: &[K], hash: StringHash) -> Vec<usize> {
    let budget = 64 * keys.len() as u64 + (1 << 20);
    let mut map = StringMapOrder::new(hash);
    for (i, k) in keys.iter().enumerate() {
        map.insert(k.as_ref(), i);
        if map.probes() > budget {
            let mut seen = std::collections::HashSet::with_capacity(keys.len());
            return (0..keys.len()).filter(|&i| seen.insert(keys[i].as_ref())).collect();
        }
    }
    map.order()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn djb_hash_matches_the_textbook_definition() {
        assert_eq!(StringHash::Djb.hash(b""), 0);
        assert_eq!(StringHash::Djb.hash(b"a"), 97);
        assert_eq!(StringHash::Djb.hash(b"ab"), 97 * 33 + 98);
    }

    #[test]
    fn xxh3_is_the_64_bit_hash_truncated() {
        // XXH3_64bits("") is 0x2D06800538D394C2 by the algorithm's definition.
        assert_eq!(StringHash::Xxh3.hash(b""), 0x38D3_94C2);
    }

    /// docs/formats/bundle.md §3.2: LLVM 19 lists {host, gfx906, gfx908} as gfx906,
    /// gfx908, host, and {host, gfx906, gfx90a:xnack+, openmp gfx1030} as
    /// openmp-gfx1030, gfx906, gfx90a:xnack+, host.
    #[test]
    fn llvm19_orders_from_the_spec() {
        let keys = ["host-x86_64-unknown-linux-gnu-", "hip-amdgcn-amd-amdhsa--gfx906", "hip-amdgcn-amd-amdhsa--gfx908"];
        assert_eq!(string_map_order(&keys, StringHash::Xxh3), [1, 2, 0]);
        let keys = [
            "host-x86_64-unknown-linux-gnu-",
            "hip-amdgcn-amd-amdhsa--gfx906",
            "hip-amdgcn-amd-amdhsa--gfx90a:xnack+",
            "openmp-amdgcn-amd-amdhsa--gfx1030",
        ];
        assert_eq!(string_map_order(&keys, StringHash::Xxh3), [3, 1, 2, 0]);
    }

    #[test]
    fn duplicates_keep_their_first_position() {
        let keys = ["a", "b", "a"];
        let order = string_map_order(&keys, StringHash::Xxh3);
        assert_eq!(order.len(), 2);
        assert!(order.contains(&0) && order.contains(&1));
    }

    /// 2^14 keys with one Bernstein hash ("Aa" and "B@" hash alike, and so
    /// do all their concatenations): every insertion walks the same probe
    /// sequence. The simulation gives up on the budget and keeps insertion
    /// order; ordinary keys never come near it.
    #[test]
    fn colliding_keys_fall_back_to_insertion_order() {
        let keys: Vec<Vec<u8>> = (0u32..1 << 14)
            .map(|n| (0..14).flat_map(|bit| if n >> bit & 1 == 1 { *b"Aa" } else { *b"B@" }).collect())
            .collect();
        assert!(keys.iter().all(|k| StringHash::Djb.hash(k) == StringHash::Djb.hash(&keys[0])));
        assert_eq!(string_map_order(&keys, StringHash::Djb), (0..keys.len()).collect::<Vec<_>>());
        let normal: Vec<String> = (0..200_000).map(|i| format!("hip-amdgcn-amd-amdhsa--gfx{i}")).collect();
        let mut map = StringMapOrder::new(StringHash::Xxh3);
        for (i, k) in normal.iter().enumerate() {
            map.insert(k.as_bytes(), i);
        }
        assert!(map.probes() < 8 * normal.len() as u64, "{} probes", map.probes());
    }

    #[test]
    fn growth_keeps_every_key() {
        let keys: Vec<String> = (0..1000).map(|i| format!("key{i}")).collect();
        for hash in [StringHash::Xxh3, StringHash::Djb] {
            let mut order = string_map_order(&keys, hash);
            order.sort_unstable();
            assert_eq!(order, (0..1000).collect::<Vec<_>>());
        }
    }
}
