//! Giving freed heap memory back to the operating system.
//!
//! Reading a list deserializes every object in full (managedFields included) before the store
//! keeps its lean form, and the page bodies are buffered: hundreds of megabytes pass through the
//! heap at 50,000 PVs. glibc's malloc keeps what is freed in its arenas (one per thread that
//! allocated), so the process's RSS stays near the peak of the lists long after them. `release`
//! asks glibc to return every free page of every arena (`malloc_trim(0)`; a few milliseconds at
//! that size). The loop calls it after a list completes and, when anything happened, on a slow
//! tick. Elsewhere than glibc it does nothing.

/// Returns free heap pages to the operating system (glibc); a no-op elsewhere.
pub fn release() {
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
    }
}
