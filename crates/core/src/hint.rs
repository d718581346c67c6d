//! A cache hint: data a handler reads soon, asked for early so that its
//! miss to memory overlaps other work. It changes nothing but timing.

/// Most cache lines one call asks for.
const MAX_LINES: usize = 4;

/// Asks the CPU for the cache lines of `value` (its first four at most).
#[inline(always)]
pub fn prefetch<T: ?Sized>(value: &T) {
    let (at, len) = (value as *const T as *const u8, std::mem::size_of_val(value));
    #[cfg(target_arch = "x86_64")]
    for line in 0..len.div_ceil(64).min(MAX_LINES) {
        // `wrapping_add` stays within or just past the value, and a
        // prefetch of any address is harmless: it never faults.
        // SAFETY: SSE, the only feature the intrinsic needs, is part of
        // every x86-64 target.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                at.wrapping_add(line * 64) as *const i8
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (at, len);
}
