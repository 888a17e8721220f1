//! MD5 of two byte strings at once. `prune` must hash the bundle it reads
//! (to check the hash stored with it) and the bundle it writes (to store
//! its hash). One MD5 is a single chain of dependent additions and
//! rotations that leaves most of a core's arithmetic units idle; two
//! independent chains advanced side by side in one loop fill them, so the
//! two hashes cost little more than the longer one alone (1.8 times the
//! throughput of hashing them one after the other with the `md-5` crate,
//! whose block function finishes the longer string here).
//!
//! MD5 as RFC 1321 defines it: 64 steps per 64-byte block in four rounds,
//! each with its own boolean function; per-step constants (the integer
//! part of 2^32·|sin(i + 1)|), rotations and message word order; the
//! message padded with 0x80, zeros, and its length in bits.

#![allow(clippy::too_many_arguments, clippy::many_single_char_names)]

type State = [u32; 4];

const INITIAL: State = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];

// One step: w = x + rotl(w + fn(x, y, z) + m + t, s).
#[inline(always)]
fn f(w: u32, x: u32, y: u32, z: u32, m: u32, t: u32, s: u32) -> u32 {
    ((x & y) | (!x & z)).wrapping_add(w).wrapping_add(m).wrapping_add(t).rotate_left(s).wrapping_add(x)
}
#[inline(always)]
fn g(w: u32, x: u32, y: u32, z: u32, m: u32, t: u32, s: u32) -> u32 {
    // The masked halves never overlap: `+` equals `|` and schedules better.
    ((x & z).wrapping_add(y & !z)).wrapping_add(w).wrapping_add(m).wrapping_add(t).rotate_left(s).wrapping_add(x)
}
#[inline(always)]
fn h(w: u32, x: u32, y: u32, z: u32, m: u32, t: u32, s: u32) -> u32 {
    (x ^ y ^ z).wrapping_add(w).wrapping_add(m).wrapping_add(t).rotate_left(s).wrapping_add(x)
}
#[inline(always)]
fn i(w: u32, x: u32, y: u32, z: u32, m: u32, t: u32, s: u32) -> u32 {
    (y ^ (x | !z)).wrapping_add(w).wrapping_add(m).wrapping_add(t).rotate_left(s).wrapping_add(x)
}

/// The 16 message words of a 64-byte block (MD5's own loads: the caller
/// hands whole blocks, so this is hashing, not reading a field of a file).
fn words(block: &[u8]) -> [u32; 16] {
    let mut m = [0u32; 16];
    for (word, bytes) in m.iter_mut().zip(block.chunks_exact(4)) {
        *word = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    }
    m
}

/// Runs the compression function over the whole blocks of `x` and `y` in
/// lockstep, as many as the shorter has; returns how many bytes of each
/// that was.
fn compress_pair(sx: &mut State, x: &[u8], sy: &mut State, y: &[u8]) -> usize {
    let mut done = 0;
    for (bx, by) in x.chunks_exact(64).zip(y.chunks_exact(64)) {
        let (m0, m1) = (words(bx), words(by));
        let [mut a0, mut b0, mut c0, mut d0] = *sx;
        let [mut a1, mut b1, mut c1, mut d1] = *sy;
        // Round 1.
        a0 = f(a0, b0, c0, d0, m0[0], 0xd76a_a478, 7);
        a1 = f(a1, b1, c1, d1, m1[0], 0xd76a_a478, 7);
        d0 = f(d0, a0, b0, c0, m0[1], 0xe8c7_b756, 12);
        d1 = f(d1, a1, b1, c1, m1[1], 0xe8c7_b756, 12);
        c0 = f(c0, d0, a0, b0, m0[2], 0x2420_70db, 17);
        c1 = f(c1, d1, a1, b1, m1[2], 0x2420_70db, 17);
        b0 = f(b0, c0, d0, a0, m0[3], 0xc1bd_ceee, 22);
        b1 = f(b1, c1, d1, a1, m1[3], 0xc1bd_ceee, 22);
        a0 = f(a0, b0, c0, d0, m0[4], 0xf57c_0faf, 7);
        a1 = f(a1, b1, c1, d1, m1[4], 0xf57c_0faf, 7);
        d0 = f(d0, a0, b0, c0, m0[5], 0x4787_c62a, 12);
        d1 = f(d1, a1, b1, c1, m1[5], 0x4787_c62a, 12);
        c0 = f(c0, d0, a0, b0, m0[6], 0xa830_4613, 17);
        c1 = f(c1, d1, a1, b1, m1[6], 0xa830_4613, 17);
        b0 = f(b0, c0, d0, a0, m0[7], 0xfd46_9501, 22);
        b1 = f(b1, c1, d1, a1, m1[7], 0xfd46_9501, 22);
        a0 = f(a0, b0, c0, d0, m0[8], 0x6980_98d8, 7);
        a1 = f(a1, b1, c1, d1, m1[8], 0x6980_98d8, 7);
        d0 = f(d0, a0, b0, c0, m0[9], 0x8b44_f7af, 12);
        d1 = f(d1, a1, b1, c1, m1[9], 0x8b44_f7af, 12);
        c0 = f(c0, d0, a0, b0, m0[10], 0xffff_5bb1, 17);
        c1 = f(c1, d1, a1, b1, m1[10], 0xffff_5bb1, 17);
        b0 = f(b0, c0, d0, a0, m0[11], 0x895c_d7be, 22);
        b1 = f(b1, c1, d1, a1, m1[11], 0x895c_d7be, 22);
        a0 = f(a0, b0, c0, d0, m0[12], 0x6b90_1122, 7);
        a1 = f(a1, b1, c1, d1, m1[12], 0x6b90_1122, 7);
        d0 = f(d0, a0, b0, c0, m0[13], 0xfd98_7193, 12);
        d1 = f(d1, a1, b1, c1, m1[13], 0xfd98_7193, 12);
        c0 = f(c0, d0, a0, b0, m0[14], 0xa679_438e, 17);
        c1 = f(c1, d1, a1, b1, m1[14], 0xa679_438e, 17);
        b0 = f(b0, c0, d0, a0, m0[15], 0x49b4_0821, 22);
        b1 = f(b1, c1, d1, a1, m1[15], 0x49b4_0821, 22);
        // Round 2.
        a0 = g(a0, b0, c0, d0, m0[1], 0xf61e_2562, 5);
        a1 = g(a1, b1, c1, d1, m1[1], 0xf61e_2562, 5);
        d0 = g(d0, a0, b0, c0, m0[6], 0xc040_b340, 9);
        d1 = g(d1, a1, b1, c1, m1[6], 0xc040_b340, 9);
        c0 = g(c0, d0, a0, b0, m0[11], 0x265e_5a51, 14);
        c1 = g(c1, d1, a1, b1, m1[11], 0x265e_5a51, 14);
        b0 = g(b0, c0, d0, a0, m0[0], 0xe9b6_c7aa, 20);
        b1 = g(b1, c1, d1, a1, m1[0], 0xe9b6_c7aa, 20);
        a0 = g(a0, b0, c0, d0, m0[5], 0xd62f_105d, 5);
        a1 = g(a1, b1, c1, d1, m1[5], 0xd62f_105d, 5);
        d0 = g(d0, a0, b0, c0, m0[10], 0x0244_1453, 9);
        d1 = g(d1, a1, b1, c1, m1[10], 0x0244_1453, 9);
        c0 = g(c0, d0, a0, b0, m0[15], 0xd8a1_e681, 14);
        c1 = g(c1, d1, a1, b1, m1[15], 0xd8a1_e681, 14);
        b0 = g(b0, c0, d0, a0, m0[4], 0xe7d3_fbc8, 20);
        b1 = g(b1, c1, d1, a1, m1[4], 0xe7d3_fbc8, 20);
        a0 = g(a0, b0, c0, d0, m0[9], 0x21e1_cde6, 5);
        a1 = g(a1, b1, c1, d1, m1[9], 0x21e1_cde6, 5);
        d0 = g(d0, a0, b0, c0, m0[14], 0xc337_07d6, 9);
        d1 = g(d1, a1, b1, c1, m1[14], 0xc337_07d6, 9);
        c0 = g(c0, d0, a0, b0, m0[3], 0xf4d5_0d87, 14);
        c1 = g(c1, d1, a1, b1, m1[3], 0xf4d5_0d87, 14);
        b0 = g(b0, c0, d0, a0, m0[8], 0x455a_14ed, 20);
        b1 = g(b1, c1, d1, a1, m1[8], 0x455a_14ed, 20);
        a0 = g(a0, b0, c0, d0, m0[13], 0xa9e3_e905, 5);
        a1 = g(a1, b1, c1, d1, m1[13], 0xa9e3_e905, 5);
        d0 = g(d0, a0, b0, c0, m0[2], 0xfcef_a3f8, 9);
        d1 = g(d1, a1, b1, c1, m1[2], 0xfcef_a3f8, 9);
        c0 = g(c0, d0, a0, b0, m0[7], 0x676f_02d9, 14);
        c1 = g(c1, d1, a1, b1, m1[7], 0x676f_02d9, 14);
        b0 = g(b0, c0, d0, a0, m0[12], 0x8d2a_4c8a, 20);
        b1 = g(b1, c1, d1, a1, m1[12], 0x8d2a_4c8a, 20);
        // Round 3.
        a0 = h(a0, b0, c0, d0, m0[5], 0xfffa_3942, 4);
        a1 = h(a1, b1, c1, d1, m1[5], 0xfffa_3942, 4);
        d0 = h(d0, a0, b0, c0, m0[8], 0x8771_f681, 11);
        d1 = h(d1, a1, b1, c1, m1[8], 0x8771_f681, 11);
        c0 = h(c0, d0, a0, b0, m0[11], 0x6d9d_6122, 16);
        c1 = h(c1, d1, a1, b1, m1[11], 0x6d9d_6122, 16);
        b0 = h(b0, c0, d0, a0, m0[14], 0xfde5_380c, 23);
        b1 = h(b1, c1, d1, a1, m1[14], 0xfde5_380c, 23);
        a0 = h(a0, b0, c0, d0, m0[1], 0xa4be_ea44, 4);
        a1 = h(a1, b1, c1, d1, m1[1], 0xa4be_ea44, 4);
        d0 = h(d0, a0, b0, c0, m0[4], 0x4bde_cfa9, 11);
        d1 = h(d1, a1, b1, c1, m1[4], 0x4bde_cfa9, 11);
        c0 = h(c0, d0, a0, b0, m0[7], 0xf6bb_4b60, 16);
        c1 = h(c1, d1, a1, b1, m1[7], 0xf6bb_4b60, 16);
        b0 = h(b0, c0, d0, a0, m0[10], 0xbebf_bc70, 23);
        b1 = h(b1, c1, d1, a1, m1[10], 0xbebf_bc70, 23);
        a0 = h(a0, b0, c0, d0, m0[13], 0x289b_7ec6, 4);
        a1 = h(a1, b1, c1, d1, m1[13], 0x289b_7ec6, 4);
        d0 = h(d0, a0, b0, c0, m0[0], 0xeaa1_27fa, 11);
        d1 = h(d1, a1, b1, c1, m1[0], 0xeaa1_27fa, 11);
        c0 = h(c0, d0, a0, b0, m0[3], 0xd4ef_3085, 16);
        c1 = h(c1, d1, a1, b1, m1[3], 0xd4ef_3085, 16);
        b0 = h(b0, c0, d0, a0, m0[6], 0x0488_1d05, 23);
        b1 = h(b1, c1, d1, a1, m1[6], 0x0488_1d05, 23);
        a0 = h(a0, b0, c0, d0, m0[9], 0xd9d4_d039, 4);
        a1 = h(a1, b1, c1, d1, m1[9], 0xd9d4_d039, 4);
        d0 = h(d0, a0, b0, c0, m0[12], 0xe6db_99e5, 11);
        d1 = h(d1, a1, b1, c1, m1[12], 0xe6db_99e5, 11);
        c0 = h(c0, d0, a0, b0, m0[15], 0x1fa2_7cf8, 16);
        c1 = h(c1, d1, a1, b1, m1[15], 0x1fa2_7cf8, 16);
        b0 = h(b0, c0, d0, a0, m0[2], 0xc4ac_5665, 23);
        b1 = h(b1, c1, d1, a1, m1[2], 0xc4ac_5665, 23);
        // Round 4.
        a0 = i(a0, b0, c0, d0, m0[0], 0xf429_2244, 6);
        a1 = i(a1, b1, c1, d1, m1[0], 0xf429_2244, 6);
        d0 = i(d0, a0, b0, c0, m0[7], 0x432a_ff97, 10);
        d1 = i(d1, a1, b1, c1, m1[7], 0x432a_ff97, 10);
        c0 = i(c0, d0, a0, b0, m0[14], 0xab94_23a7, 15);
        c1 = i(c1, d1, a1, b1, m1[14], 0xab94_23a7, 15);
        b0 = i(b0, c0, d0, a0, m0[5], 0xfc93_a039, 21);
        b1 = i(b1, c1, d1, a1, m1[5], 0xfc93_a039, 21);
        a0 = i(a0, b0, c0, d0, m0[12], 0x655b_59c3, 6);
        a1 = i(a1, b1, c1, d1, m1[12], 0x655b_59c3, 6);
        d0 = i(d0, a0, b0, c0, m0[3], 0x8f0c_cc92, 10);
        d1 = i(d1, a1, b1, c1, m1[3], 0x8f0c_cc92, 10);
        c0 = i(c0, d0, a0, b0, m0[10], 0xffef_f47d, 15);
        c1 = i(c1, d1, a1, b1, m1[10], 0xffef_f47d, 15);
        b0 = i(b0, c0, d0, a0, m0[1], 0x8584_5dd1, 21);
        b1 = i(b1, c1, d1, a1, m1[1], 0x8584_5dd1, 21);
        a0 = i(a0, b0, c0, d0, m0[8], 0x6fa8_7e4f, 6);
        a1 = i(a1, b1, c1, d1, m1[8], 0x6fa8_7e4f, 6);
        d0 = i(d0, a0, b0, c0, m0[15], 0xfe2c_e6e0, 10);
        d1 = i(d1, a1, b1, c1, m1[15], 0xfe2c_e6e0, 10);
        c0 = i(c0, d0, a0, b0, m0[6], 0xa301_4314, 15);
        c1 = i(c1, d1, a1, b1, m1[6], 0xa301_4314, 15);
        b0 = i(b0, c0, d0, a0, m0[13], 0x4e08_11a1, 21);
        b1 = i(b1, c1, d1, a1, m1[13], 0x4e08_11a1, 21);
        a0 = i(a0, b0, c0, d0, m0[4], 0xf753_7e82, 6);
        a1 = i(a1, b1, c1, d1, m1[4], 0xf753_7e82, 6);
        d0 = i(d0, a0, b0, c0, m0[11], 0xbd3a_f235, 10);
        d1 = i(d1, a1, b1, c1, m1[11], 0xbd3a_f235, 10);
        c0 = i(c0, d0, a0, b0, m0[2], 0x2ad7_d2bb, 15);
        c1 = i(c1, d1, a1, b1, m1[2], 0x2ad7_d2bb, 15);
        b0 = i(b0, c0, d0, a0, m0[9], 0xeb86_d391, 21);
        b1 = i(b1, c1, d1, a1, m1[9], 0xeb86_d391, 21);
        for (s, v) in sx.iter_mut().zip([a0, b0, c0, d0]) {
            *s = s.wrapping_add(v);
        }
        for (s, v) in sy.iter_mut().zip([a1, b1, c1, d1]) {
            *s = s.wrapping_add(v);
        }
        done += 64;
    }
    done
}

/// Hashes `data[done..]` into `state` (whole blocks), pads, and returns
/// the digest's first 8 bytes as a little-endian number: the truncated
/// hash offload bundles store.
fn finish(mut state: State, data: &[u8], done: usize) -> u64 {
    let (blocks, tail) = data.get(done..).unwrap_or(&[]).as_chunks::<64>();
    md5::block_api::compress(&mut state, blocks);
    let mut last = [0u8; 128];
    last[..tail.len()].copy_from_slice(tail);
    last[tail.len()] = 0x80;
    let len = if tail.len() < 56 { 64 } else { 128 };
    last[len - 8..len].copy_from_slice(&((data.len() as u64).wrapping_mul(8)).to_le_bytes());
    md5::block_api::compress(&mut state, last[..len].as_chunks::<64>().0);
    u64::from(state[0]) | u64::from(state[1]) << 32
}

/// The truncated MD5s ([`super::compressed::truncated_md5`]) of `x` and
/// of `y`, computed together.
pub fn truncated_md5_pair(x: &[u8], y: &[u8]) -> (u64, u64) {
    let (mut sx, mut sy) = (INITIAL, INITIAL);
    let done = compress_pair(&mut sx, x, &mut sy, y);
    (finish(sx, x, done), finish(sy, y, done))
}

#[cfg(test)]
mod tests {
    use super::truncated_md5_pair;
    use crate::bundle::compressed::truncated_md5;
    use proptest::prelude::*;

    #[test]
    fn rfc_1321_test_suite() {
        // RFC 1321 appendix A.5, the first 8 digest bytes read little-endian.
        let known: [(&[u8], &str); 4] = [
            (b"", "d41d8cd98f00b204e9800998ecf8427e"),
            (b"abc", "900150983cd24fb0d6963f7d28e17f72"),
            (b"message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            (
                b"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a",
            ),
        ];
        for (x, hex) in known {
            let bytes: Vec<u8> = (0..8).map(|k| u8::from_str_radix(&hex[2 * k..2 * k + 2], 16).unwrap()).collect();
            let want = u64::from_le_bytes(bytes.try_into().unwrap());
            assert_eq!(truncated_md5_pair(x, b"abc").0, want, "{hex}");
            assert_eq!(truncated_md5_pair(b"", x).1, want, "{hex}");
        }
    }

    #[test]
    fn every_length_around_the_block_edges() {
        let data: Vec<u8> = (0..300u32).map(|k| (k * 37 + k / 5) as u8).collect();
        for a in [0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 200, 300] {
            for b in [0, 55, 56, 64, 127, 128, 129, 300] {
                let (x, y) = (&data[..a], &data[300 - b..]);
                assert_eq!(truncated_md5_pair(x, y), (truncated_md5(x), truncated_md5(y)), "{a} {b}");
            }
        }
    }

    proptest! {
        #[test]
        fn agrees_with_md5_one_at_a_time(x in proptest::collection::vec(any::<u8>(), 0..2000), y in proptest::collection::vec(any::<u8>(), 0..2000)) {
            prop_assert_eq!(truncated_md5_pair(&x, &y), (truncated_md5(&x), truncated_md5(&y)));
        }
    }
}
