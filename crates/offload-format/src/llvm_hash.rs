//! LLVM's byte hashing and the iteration order of its open-addressing hash
//! tables, reproduced so that outputs whose record order is "whatever order
//! LLVM's hash map happened to iterate in" can be written byte for byte.
//!
//! * [`hash_bytes`] is the value of LLVM's `hash_combine_range` (and so of
//!   `hash_value(StringRef)`) over a byte string, in the form LLVM 19 release
//!   builds compute it: the CityHash-derived short-string hashes up to 64
//!   bytes, a 64-byte block mixer above that, and the fixed execution seed
//!   `0xff51afd7ed558ccd`.
//! * [`dense_map_order`] simulates `llvm::DenseMap` with string keys:
//!   64 buckets on first insertion, quadratic probing, doubling before an
//!   insertion that would reach 3/4 load, and iteration by bucket index.
//! * [`djb_hash`] and [`string_map_order`] do the same for the `StringMap` of
//!   LLVM 16 (djb hash with seed 0, 16 buckets, growth after an insertion
//!   that passes 3/4 load).
//!
//! These are format facts, not algorithms of our choosing: changing any
//! constant changes the bytes LLVM-compatible writers produce.

/// The seed LLVM's hashing uses when no override is installed.
pub const LLVM_HASH_SEED: u64 = 0xff51_afd7_ed55_8ccd;

const K0: u64 = 0xc3a5_c85c_97cb_3127;
const K1: u64 = 0xb492_b66f_be98_f273;
const K2: u64 = 0x9ae1_6a3b_2f90_404f;
const K3: u64 = 0xc949_d7c7_509e_6557;
const KMUL: u64 = 0x9ddf_ea08_eb38_2d69;

// Word loads of the hash algorithm, not reads of a file: each caller's
// length branch has chosen offsets inside `s` (as LLVM's own loads are).
fn rd64(s: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&s[at..at + 8]);
    u64::from_le_bytes(b)
}

fn rd32(s: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&s[at..at + 4]);
    u64::from(u32::from_le_bytes(b))
}

fn shift_mix(v: u64) -> u64 {
    v ^ (v >> 47)
}

fn mix16(low: u64, high: u64) -> u64 {
    let mut a = (low ^ high).wrapping_mul(KMUL);
    a ^= a >> 47;
    let mut b = (high ^ a).wrapping_mul(KMUL);
    b ^= b >> 47;
    b.wrapping_mul(KMUL)
}

fn short_1to3(s: &[u8], seed: u64) -> u64 {
    let len = s.len();
    let a = u32::from(s[0]);
    let b = u32::from(s[len >> 1]);
    let c = u32::from(s[len - 1]);
    let y = a.wrapping_add(b << 8);
    let z = (len as u32).wrapping_add(c << 2);
    shift_mix(u64::from(y).wrapping_mul(K2) ^ u64::from(z).wrapping_mul(K3) ^ seed).wrapping_mul(K2)
}

fn short_4to8(s: &[u8], seed: u64) -> u64 {
    let len = s.len();
    let a = rd32(s, 0);
    mix16((len as u64).wrapping_add(a << 3), seed ^ rd32(s, len - 4))
}

fn short_9to16(s: &[u8], seed: u64) -> u64 {
    let len = s.len();
    let a = rd64(s, 0);
    let b = rd64(s, len - 8);
    mix16(seed ^ a, b.wrapping_add(len as u64).rotate_right(len as u32)) ^ b
}

fn short_17to32(s: &[u8], seed: u64) -> u64 {
    let len = s.len() as u64;
    let n = s.len();
    let a = rd64(s, 0).wrapping_mul(K1);
    let b = rd64(s, 8);
    let c = rd64(s, n - 8).wrapping_mul(K2);
    let d = rd64(s, n - 16).wrapping_mul(K0);
    mix16(
        a.wrapping_sub(b).rotate_right(43).wrapping_add((c ^ seed).rotate_right(30)).wrapping_add(d),
        a.wrapping_add((b ^ K3).rotate_right(20)).wrapping_sub(c).wrapping_add(len).wrapping_add(seed),
    )
}

fn short_33to64(s: &[u8], seed: u64) -> u64 {
    let n = s.len();
    let len = n as u64;
    let mut z = rd64(s, 24);
    let mut a = rd64(s, 0).wrapping_add(len.wrapping_add(rd64(s, n - 16)).wrapping_mul(K0));
    let mut b = a.wrapping_add(z).rotate_right(52);
    let mut c = a.rotate_right(37);
    a = a.wrapping_add(rd64(s, 8));
    c = c.wrapping_add(a.rotate_right(7));
    a = a.wrapping_add(rd64(s, 16));
    let vf = a.wrapping_add(z);
    let vs = b.wrapping_add(a.rotate_right(31)).wrapping_add(c);
    a = rd64(s, 16).wrapping_add(rd64(s, n - 32));
    z = rd64(s, n - 8);
    b = a.wrapping_add(z).rotate_right(52);
    c = a.rotate_right(37);
    a = a.wrapping_add(rd64(s, n - 24));
    c = c.wrapping_add(a.rotate_right(7));
    a = a.wrapping_add(rd64(s, n - 16));
    let wf = a.wrapping_add(z);
    let ws = b.wrapping_add(a.rotate_right(31)).wrapping_add(c);
    let r = shift_mix(vf.wrapping_add(ws).wrapping_mul(K2).wrapping_add(wf.wrapping_add(vs).wrapping_mul(K0)));
    shift_mix((seed ^ r.wrapping_mul(K0)).wrapping_add(vs)).wrapping_mul(K2)
}

fn hash_short(s: &[u8], seed: u64) -> u64 {
    match s.len() {
        0 => K2 ^ seed,
        1..=3 => short_1to3(s, seed),
        4..=8 => short_4to8(s, seed),
        9..=16 => short_9to16(s, seed),
        17..=32 => short_17to32(s, seed),
        _ => short_33to64(s, seed),
    }
}

/// The running state for inputs longer than 64 bytes.
struct LongState {
    h: [u64; 7],
}

impl LongState {
    fn new(first_block: &[u8], seed: u64) -> Self {
        let mut h = [0, seed, mix16(seed, K1), (seed ^ K1).rotate_right(49), seed.wrapping_mul(K1), shift_mix(seed), 0];
        h[6] = mix16(h[4], h[5]);
        let mut st = LongState { h };
        st.mix(first_block);
        st
    }

    fn mix32(s: &[u8], a: &mut u64, b: &mut u64) {
        *a = a.wrapping_add(rd64(s, 0));
        let c = rd64(s, 24);
        *b = b.wrapping_add(*a).wrapping_add(c).rotate_right(21);
        let d = *a;
        *a = a.wrapping_add(rd64(s, 8)).wrapping_add(rd64(s, 16));
        *b = b.wrapping_add(a.rotate_right(44)).wrapping_add(d);
        *a = a.wrapping_add(c);
    }

    fn mix(&mut self, s: &[u8]) {
        let [mut h0, mut h1, mut h2, mut h3, mut h4, mut h5, mut h6] = self.h;
        h0 = h0.wrapping_add(h1).wrapping_add(h3).wrapping_add(rd64(s, 8)).rotate_right(37).wrapping_mul(K1);
        h1 = h1.wrapping_add(h4).wrapping_add(rd64(s, 48)).rotate_right(42).wrapping_mul(K1);
        h0 ^= h6;
        h1 = h1.wrapping_add(h3).wrapping_add(rd64(s, 40));
        h2 = h2.wrapping_add(h5).rotate_right(33).wrapping_mul(K1);
        h3 = h4.wrapping_mul(K1);
        h4 = h0.wrapping_add(h5);
        Self::mix32(s, &mut h3, &mut h4);
        h5 = h2.wrapping_add(h6);
        h6 = h1.wrapping_add(rd64(s, 16));
        Self::mix32(&s[32..], &mut h5, &mut h6);
        std::mem::swap(&mut h2, &mut h0);
        self.h = [h0, h1, h2, h3, h4, h5, h6];
    }

    fn finish(&self, len: u64) -> u64 {
        let [h0, h1, h2, h3, h4, h5, h6] = self.h;
        mix16(
            mix16(h3, h5).wrapping_add(shift_mix(h1).wrapping_mul(K1)).wrapping_add(h2),
            mix16(h4, h6).wrapping_add(shift_mix(len).wrapping_mul(K1)).wrapping_add(h0),
        )
    }
}

/// LLVM's `hash_combine_range` over bytes with an explicit seed.
pub fn hash_bytes_seeded(s: &[u8], seed: u64) -> u64 {
    if s.len() <= 64 {
        return hash_short(s, seed);
    }
    let whole = s.len() & !63;
    let mut st = LongState::new(&s[..64], seed);
    let mut at = 64;
    while at < whole {
        st.mix(&s[at..at + 64]);
        at += 64;
    }
    if s.len() & 63 != 0 {
        st.mix(&s[s.len() - 64..]);
    }
    st.finish(s.len() as u64)
}

/// LLVM's `hash_value(StringRef)` as a release build of LLVM 19 computes it.
pub fn hash_bytes(s: &[u8]) -> u64 {
    hash_bytes_seeded(s, LLVM_HASH_SEED)
}

/// The djb hash LLVM's `StringMap` used up to LLVM 16 (seed 0).
pub fn djb_hash(s: &[u8]) -> u32 {
    s.iter().fold(0u32, |h, &b| h.wrapping_mul(33).wrapping_add(u32::from(b)))
}

/// Places `hash` in an open-addressing table with quadratic probing
/// (bucket, +1, +2, +3, ...) and returns the bucket used.
fn probe(table: &[Option<usize>], hash: u32) -> usize {
    let mask = table.len() - 1;
    let mut bucket = hash as usize & mask;
    let mut step = 1;
    while table[bucket].is_some() {
        bucket = (bucket + step) & mask;
        step += 1;
    }
    bucket
}

/// The order in which `llvm::DenseMap<StringRef, _>` iterates over `keys`
/// inserted in the given order (keys must be distinct): indices into `keys`.
pub fn dense_map_order<K: AsRef<[u8]>>(keys: &[K]) -> Vec<usize> {
    let hashes: Vec<u32> = keys.iter().map(|k| hash_bytes(k.as_ref()) as u32).collect();
    let mut table: Vec<Option<usize>> = Vec::new();
    for (i, &h) in hashes.iter().enumerate() {
        // DenseMap grows before an insertion that would reach 3/4 load; the
        // first insertion allocates 64 buckets.
        if (i + 1) * 4 >= table.len() * 3 {
            let new_len = (table.len() * 2).max(64);
            let old = std::mem::replace(&mut table, vec![None; new_len]);
            for k in old.into_iter().flatten() {
                let b = probe(&table, hashes[k]);
                table[b] = Some(k);
            }
        }
        let b = probe(&table, h);
        table[b] = Some(i);
    }
    table.into_iter().flatten().collect()
}

/// The order in which LLVM 16's `llvm::StringMap` iterates over `keys`
/// inserted in the given order (keys must be distinct): indices into `keys`.
pub fn string_map_order<K: AsRef<[u8]>>(keys: &[K]) -> Vec<usize> {
    let hashes: Vec<u32> = keys.iter().map(|k| djb_hash(k.as_ref())).collect();
    let mut table: Vec<Option<usize>> = vec![None; 16];
    for (i, &h) in hashes.iter().enumerate() {
        let b = probe(&table, h);
        table[b] = Some(i);
        // StringMap grows after an insertion that passes 3/4 load and
        // re-inserts the old buckets in bucket order.
        if (i + 1) * 4 > table.len() * 3 {
            let new_len = table.len() * 2;
            let old = std::mem::replace(&mut table, vec![None; new_len]);
            for k in old.into_iter().flatten() {
                let b = probe(&table, hashes[k]);
                table[b] = Some(k);
            }
        }
    }
    table.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_string_hash_is_k2_xor_seed() {
        assert_eq!(hash_bytes(b""), K2 ^ LLVM_HASH_SEED);
    }

    #[test]
    fn every_length_class_is_deterministic_and_distinct() {
        // Lengths that exercise every branch, including the block mixer and
        // the final partial block.
        let data: Vec<u8> = (0..300u32).map(|i| (i * 31 % 251) as u8).collect();
        let mut seen = std::collections::HashSet::new();
        for len in [0, 1, 2, 3, 4, 7, 8, 9, 16, 17, 32, 33, 64, 65, 127, 128, 129, 300] {
            let h = hash_bytes(&data[..len]);
            assert_eq!(h, hash_bytes(&data[..len]));
            assert!(seen.insert(h), "collision at length {len}");
        }
    }

    #[test]
    fn djb_matches_the_definition() {
        assert_eq!(djb_hash(b""), 0);
        assert_eq!(djb_hash(b"a"), 97);
        assert_eq!(djb_hash(b"ab"), 97 * 33 + 98);
    }

    #[test]
    fn orders_are_permutations() {
        let keys: Vec<String> = (0..200).map(|i| format!("key{i}")).collect();
        for n in [0, 1, 2, 12, 13, 47, 48, 49, 97, 200] {
            for order in [dense_map_order(&keys[..n]), string_map_order(&keys[..n])] {
                let mut sorted = order.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, (0..n).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn colliding_buckets_probe_quadratically() {
        // Keys whose djb hashes are equal modulo 16 land in consecutive
        // probe positions: the first takes its bucket, the second +1.
        let a = b"a"; // 97 -> bucket 1
        let q = b"q"; // 113 -> bucket 1
        let b = b"b"; // 98 -> bucket 2
        assert_eq!(string_map_order(&[&a[..], &q[..], &b[..]]), vec![0, 1, 2]);
        // Inserting 'b' first pushes 'q' to bucket 1+1 = 2 (taken), then
        // 2+2 = 4.
        assert_eq!(string_map_order(&[&b[..], &a[..], &q[..]]), vec![1, 0, 2]);
    }
}
