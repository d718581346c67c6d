//! A cache hint: data a handler reads soon, asked for early so that its
//! miss to memory overlaps other work. It changes nothing but timing.

/// Most cache lines one call asks for.
const MAX_LINES: usize = 4;
const LINE_BYTES: usize = 64;

/// The most cache lines a value of `size` bytes aligned to `align` can lie
/// on: one starting as late in a line as its alignment lets it. Depends on
/// the type alone, so a call's count is fixed when it is compiled.
const fn lines_spanned_at_most(size: usize, align: usize) -> usize {
    let latest_start = LINE_BYTES - if align < LINE_BYTES { align } else { LINE_BYTES };
    let size = if size == 0 { 1 } else { size };
    (latest_start + size).div_ceil(LINE_BYTES)
}

/// Asks the CPU for the cache lines `value` lies on (its first four at most),
/// counted from the line its first byte is on. A value need not start a
/// line: a 112-byte lane entry 32 bytes into one ends on the third.
#[inline(always)]
pub fn prefetch<T: ?Sized>(value: &T) {
    let at = value as *const T as *const u8;
    let lines = lines_spanned_at_most(std::mem::size_of_val(value), std::mem::align_of_val(value));
    #[cfg(target_arch = "x86_64")]
    {
        let first = at.wrapping_sub(at as usize % LINE_BYTES);
        for line in 0..lines.min(MAX_LINES) {
            // `wrapping_*` stays on the lines a value of this size and
            // alignment can lie on, and a prefetch of any address is
            // harmless: it never faults.
            // SAFETY: SSE, the only feature the intrinsic needs, is part of
            // every x86-64 target.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    first.wrapping_add(line * LINE_BYTES) as *const i8,
                )
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (at, lines);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_fetched_on_every_line_it_can_lie_on() {
        // A lane entry: 112 bytes aligned to 16 may start 48 bytes into a
        // line and end on the third.
        assert_eq!(lines_spanned_at_most(112, 16), 3);
        for start in (0..LINE_BYTES).step_by(16) {
            let last_line = (start + 112 - 1) / LINE_BYTES;
            assert!(last_line < lines_spanned_at_most(112, 16), "an entry {start} bytes into a line");
        }
        assert_eq!(lines_spanned_at_most(8, 8), 1, "an aligned word never straddles two lines");
        assert_eq!(lines_spanned_at_most(64, 64), 1, "a line-aligned line is one line");
        assert_eq!(lines_spanned_at_most(64, 8), 2);
        assert_eq!(lines_spanned_at_most(0, 1), 1);
        assert_eq!(lines_spanned_at_most(200, 1), 5, "before the cap of a call");
    }

    #[test]
    fn prefetching_any_value_changes_nothing() {
        let entries: Vec<(u128, [u64; 12])> = (0..8).map(|i| (i, [i as u64; 12])).collect();
        for e in &entries {
            prefetch(e);
        }
        prefetch(&entries[..]);
        prefetch(&());
        assert!(entries.iter().enumerate().all(|(i, e)| e.0 == i as u128 && e.1 == [i as u64; 12]));
    }
}
