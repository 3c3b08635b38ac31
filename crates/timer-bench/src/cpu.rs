//! The calling thread's CPU time.
//!
//! On a shared machine a timed loop is also descheduled now and then, and wall-clock time
//! counts those waits; the thread's CPU time does not (it still counts what neighbours do
//! to the caches). The single-threaded workloads report both.

use std::time::Duration;

/// CPU time the calling thread has used so far (`CLOCK_THREAD_CPUTIME_ID`); zero where
/// that clock is not available.
pub fn thread_cpu() -> Duration {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime only writes the timespec we pass, which lives on our stack.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
            return Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
        }
    }
    Duration::ZERO
}
