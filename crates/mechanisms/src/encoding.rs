//! What a value costs on the wire, measured the way it is sent.

use serde::Serialize;

/// The postcard-encoded size of `x`, counted without encoding it into a
/// buffer: the read-atomic and causal clients measure their metadata this
/// way on every message for the cost model's histograms, and growing a
/// buffer only to learn its length cost more than the rest of a client's
/// work on a read (docs/flat-cost.md).
pub fn encoded_len<T: Serialize + ?Sized>(x: &T) -> usize {
    postcard::serialize_with_flavor(x, postcard::ser_flavors::Size::default()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn the_length_counted_is_the_length_encoded() {
        let map: BTreeMap<u64, Vec<u8>> = (0..300u64).map(|k| (k * 1_000_003, vec![7; k as usize % 5])).collect();
        let nested = (u64::MAX, -1i64, "key", Some([1u32, 2, 3]), vec![map.clone(); 3]);
        assert_eq!(encoded_len(&map), postcard::to_allocvec(&map).unwrap().len());
        assert_eq!(encoded_len(&nested), postcard::to_allocvec(&nested).unwrap().len());
        assert_eq!(encoded_len(&()), 0);
        assert_eq!(encoded_len(&[0u8; 0][..]), 1, "an empty sequence still has its length");
    }
}
