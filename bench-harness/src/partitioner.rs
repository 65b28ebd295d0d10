//! Where a record goes, by the three rules every ringlog client follows: the explicit
//! partition if given; else murmur2(key) mod partitions, exactly as the Java client computes it
//! (`Utils.toPositive(Utils.murmur2(key)) % numPartitions`); else round-robin.

/// Kafka's murmur2 (the Java client's `Utils.murmur2`), seed 0x9747b28c.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ len as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The Java client's partition for a keyed record.
pub fn partition_for_key(key: &[u8], partitions: u32) -> u32 {
    ((murmur2(key) & 0x7fff_ffff) as u32) % partitions
}

/// Picks partitions by the three rules.
#[derive(Debug, Default)]
pub struct Partitioner {
    next: u32,
}

impl Partitioner {
    pub fn partition(&mut self, explicit: Option<u32>, key: Option<&[u8]>, partitions: u32) -> u32 {
        match (explicit, key) {
            (Some(p), _) => p,
            (None, Some(k)) => partition_for_key(k, partitions),
            (None, None) => {
                let p = self.next % partitions;
                self.next = self.next.wrapping_add(1);
                p
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_and_rules() {
        // Kafka's own unit test values (UtilsTest.testMurmur2).
        assert_eq!(murmur2(b"21"), -973_932_308);
        assert_eq!(murmur2(b"foobar"), -790_332_482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985_981_536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1_486_304_829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58_897_971
        );
        let mut p = Partitioner::default();
        assert_eq!(p.partition(Some(3), Some(b"k"), 8), 3);
        assert_eq!(
            (
                p.partition(None, None, 3),
                p.partition(None, None, 3),
                p.partition(None, None, 3)
            ),
            (0, 1, 2)
        );
    }
}
