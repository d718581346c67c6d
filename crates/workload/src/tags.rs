//! History-unique tags for written values and appended elements.
//!
//! Every client owns one [`TagSource`]; the client's global index occupies
//! the high bits and a per-client counter the low 40 bits, so tags never
//! collide across clients and are never zero (zero is the initial state).

/// Hands out tags `(client + 1) << 40 | counter`, the counter starting at 1.
#[derive(Clone, Debug)]
pub struct TagSource {
    prefix: u64,
    counter: u64,
}

/// Bits reserved for the per-client counter.
const COUNTER_BITS: u32 = 40;

impl TagSource {
    /// The tag source of the client with this global index.
    pub fn new(client_global_index: u32) -> TagSource {
        TagSource { prefix: (u64::from(client_global_index) + 1) << COUNTER_BITS, counter: 0 }
    }

    /// The next unused tag of this client.
    #[allow(clippy::should_implement_trait)] // not an Iterator: it never ends
    pub fn next(&mut self) -> u64 {
        self.counter += 1;
        debug_assert!(self.counter < 1 << COUNTER_BITS, "tag counter exhausted");
        self.prefix | self.counter
    }

    /// Reserves `count` consecutive unused tags; returns the first.
    pub fn block(&mut self, count: u64) -> u64 {
        assert!(count > 0);
        let first = self.next();
        self.counter += count - 1;
        debug_assert!(self.counter < 1 << COUNTER_BITS, "tag counter exhausted");
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn tags_are_unique_across_clients_and_never_zero() {
        let mut seen = HashSet::new();
        for client in [0, 1, 2, 1000, u32::MAX >> 8] {
            let mut tags = TagSource::new(client);
            for _ in 0..1000 {
                let t = tags.next();
                assert_ne!(t, 0);
                assert!(seen.insert(t), "duplicate tag {t:#x}");
            }
        }
    }

    #[test]
    fn blocks_do_not_overlap_later_tags() {
        let mut tags = TagSource::new(2);
        let first = tags.block(10);
        assert_eq!(tags.next(), first + 10);
    }

    #[test]
    fn first_tag_has_the_documented_shape() {
        assert_eq!(TagSource::new(0).next(), (1 << 40) | 1);
        assert_eq!(TagSource::new(4).next(), (5 << 40) | 1);
    }
}
