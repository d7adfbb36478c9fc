//! The C allocator's settings for a long-running `converge` (Linux with glibc only).
//!
//! glibc serves allocations past a threshold (128 KiB at start) with their own `mmap` and
//! returns them to the system when freed, but it raises that threshold to the size of each
//! such block freed (up to 32 MiB). converge frees large blocks all the time (a compose of
//! 50,000 children is a payload of megabytes, copied into the bound arguments and the wire
//! message), so after the first ones the threshold sat at megabytes, those blocks came from
//! the heap arenas instead, and what was freed there stayed resident: at the 1M-children BOM
//! converge's peak RSS was 310 MB. With the threshold fixed at 128 KiB it was 207-227 MB over
//! four runs, and at the 300k BOM 113 MB against 141 at the same throughput (issue 44,
//! BENCHMARKS.md).

/// Fixes the `mmap` threshold at its initial 128 KiB (which also stops glibc from moving it).
/// Call first in `main`, before any thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn tune() {
    // SAFETY: mallopt only sets allocator parameters; it is called before any other thread
    // exists, and M_MMAP_THRESHOLD with a value below HEAP_MAX is a documented setting.
    #[allow(unsafe_code)]
    let ok = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024) };
    debug_assert_eq!(ok, 1, "mallopt(M_MMAP_THRESHOLD) refused");
}

/// Other platforms keep their allocator's defaults.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn tune() {}
