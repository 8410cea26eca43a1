//! Transparent huge pages off for the control plane's processes.
//!
//! mimalloc advises the kernel to back its arenas with transparent huge
//! pages (`madvise(MADV_HUGEPAGE)`). The first touch of such a region then
//! zeroes a whole 2 MiB page, and mimalloc's purging hands pages back and
//! faults them in again: profiled under `fleetq bench --clients 8 --batch
//! 50`, 26% of the process's CPU was the kernel clearing huge pages. With
//! them off the same run took 15-20% less CPU (README, "Where the time
//! goes"). Only the server side turns them off: the setting is inherited
//! across fork and exec, and the agent's process executor starts
//! workloads that may want them.

/// Turns transparent huge pages off for this process (Linux; elsewhere a
/// no-op). Failure is harmless (an old kernel): it only costs CPU.
pub fn disable_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_THP_DISABLE) takes integer arguments only and
    // changes no memory of this process.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}
