//! Giving freed heap memory back to the operating system.
//!
//! Reading a list deserializes each page of objects whole before the stores keep their lean forms,
//! and the page bodies are buffered: hundreds of megabytes pass through the heap at 50,000 PVs.
//! glibc's malloc keeps what is freed in its arenas (one per thread that allocated), so the
//! process's RSS stays near the peak of the lists long after them. `release` asks glibc to return
//! every free page of every arena (`malloc_trim(0)`; a few milliseconds at that size). The loop
//! calls it after a list completes, when its first convergence ends, and, when anything happened,
//! on a slow tick. Elsewhere than glibc it does nothing. [`usage`] is glibc's account of what it holds (logged at debug after each
//! release, target `volume_leftovers::engine::heap`).

/// What glibc's malloc holds, over all arenas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Bytes in chunks the program holds (small and mmapped).
    pub(crate) in_use: usize,
    /// Bytes in free chunks malloc keeps (resident only where touched and not returned).
    pub(crate) free: usize,
    /// Of `in_use`, bytes in chunks mmapped on their own.
    pub(crate) mmapped: usize,
}

/// glibc's account of its heap (`mallinfo2`); `None` elsewhere.
pub(crate) fn usage() -> Option<Usage> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        #[repr(C)]
        struct Mallinfo2 {
            arena: usize,
            ordblks: usize,
            smblks: usize,
            hblks: usize,
            hblkhd: usize,
            usmblks: usize,
            fsmblks: usize,
            uordblks: usize,
            fordblks: usize,
            keepcost: usize,
        }
        unsafe extern "C" {
            fn mallinfo2() -> Mallinfo2;
        }
        // SAFETY: mallinfo2 takes no argument and returns a plain struct by value; it locks each
        // arena while it sums it.
        let m = unsafe { mallinfo2() };
        Some(Usage {
            in_use: m.uordblks + m.hblkhd,
            free: m.fordblks + m.fsmblks,
            mmapped: m.hblkhd,
        })
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}

/// Returns free heap pages to the operating system (glibc); a no-op elsewhere.
pub(crate) fn release() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        // SAFETY: malloc_trim only walks and trims glibc's own arenas; it takes no pointer and
        // is thread-safe (each arena is locked while trimmed).
        unsafe {
            malloc_trim(0);
        }
        if tracing::enabled!(target: "volume_leftovers::engine::heap", tracing::Level::DEBUG)
            && let Some(u) = usage()
        {
            tracing::debug!(
                target: "volume_leftovers::engine::heap",
                in_use = u.in_use,
                free = u.free,
                mmapped = u.mmapped,
                "free heap pages returned"
            );
        }
    }
}
