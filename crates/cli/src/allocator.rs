//! The global allocator: mimalloc, asked for plain `malloc` whenever that
//! already gives the alignment a layout needs.
//!
//! The `mimalloc` crate sends every allocation through `mi_malloc_aligned`,
//! about 70 instructions a call in a simulation against about 45 through
//! `mi_malloc`; at about two allocations per event that was 1.4 % of a
//! run's instructions (docs/flat-cost.md). mimalloc gives every block of 16
//! bytes or more 16-byte alignment (`MI_MAX_ALIGN_SIZE`, asserted in its
//! `_mi_page_malloc_zero`) and smaller blocks their size's, so a layout
//! whose alignment is at most 16 and at most its size is served by
//! `mi_malloc` — the rule the standard library's own `System` allocator
//! applies to `malloc`. Anything else goes to the crate's aligned calls.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use mimalloc::MiMalloc;

/// The alignment of every mimalloc block at least this large (its
/// `MI_MAX_ALIGN_SIZE`, `sizeof(max_align_t)` on 64-bit targets).
const MALLOC_ALIGN: usize = 16;

unsafe extern "C" {
    fn mi_malloc(size: usize) -> *mut c_void;
    fn mi_zalloc(size: usize) -> *mut c_void;
    fn mi_realloc(p: *mut c_void, new_size: usize) -> *mut c_void;
}

pub struct Allocator;

/// Whether `mi_malloc(size)` is aligned enough for `align`.
#[inline]
fn malloc_aligns(align: usize, size: usize) -> bool {
    align <= MALLOC_ALIGN && align <= size
}

// SAFETY: every path returns memory from mimalloc with at least the layout's
// size and alignment (see the module comment), and `dealloc`/`realloc` hand
// back to mimalloc only pointers it gave out; `mi_free` and `mi_realloc`
// accept pointers from any of its allocation calls, aligned or not.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if malloc_aligns(layout.align(), layout.size()) {
            // SAFETY: a plain call into mimalloc; the size is the layout's.
            unsafe { mi_malloc(layout.size()) as *mut u8 }
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { MiMalloc.alloc(layout) }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if malloc_aligns(layout.align(), layout.size()) {
            // SAFETY: as in `alloc`.
            unsafe { mi_zalloc(layout.size()) as *mut u8 }
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { MiMalloc.alloc_zeroed(layout) }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from mimalloc.
        unsafe { MiMalloc.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if malloc_aligns(layout.align(), new_size) {
            // SAFETY: `ptr` came from mimalloc; the new block is aligned as
            // `alloc` argues.
            unsafe { mi_realloc(ptr as *mut c_void, new_size) as *mut u8 }
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { MiMalloc.realloc(ptr, layout, new_size) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_block_has_the_alignment_its_layout_asks_for() {
        let a = Allocator;
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in [1, 3, 8, 12, 16, 20, 24, 40, 100, 1000, 5000, 70_000, 1 << 20] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: non-zero sizes; each block is freed with its own layout.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null() && p as usize % align == 0, "{size} bytes aligned {align}");
                    p.write_bytes(0xa5, size);
                    let q = a.realloc(p, layout, size * 3);
                    assert!(!q.is_null() && q as usize % align == 0, "{size}→{} bytes aligned {align}", size * 3);
                    assert_eq!(*q.add(size - 1), 0xa5, "realloc keeps the contents");
                    a.dealloc(q, Layout::from_size_align(size * 3, align).unwrap());
                    let z = a.alloc_zeroed(layout);
                    assert!(z as usize % align == 0 && *z.add(size - 1) == 0, "zeroed {size} bytes aligned {align}");
                    a.dealloc(z, layout);
                }
            }
        }
    }
}
