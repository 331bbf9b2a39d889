//! The filter's time limit, counted in CPU time of the thread that runs the
//! analysis. A wall-clock limit would refuse a cheap command on a busy
//! machine, where the analysis thread waits for a core for longer than the
//! limit; CPU time bounds the work the filter does, which is what a hostile
//! command could blow up. (The manager still gives up on a thread that does
//! not answer at all, with a longer wall-clock wait.)

use std::time::Duration;

use nix::time::{ClockId, clock_gettime};

/// A point in the current thread's CPU time past which the analysis stops.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    until: Duration,
}

impl Deadline {
    /// `budget` of CPU time from now, for the calling thread.
    pub fn after(budget: Duration) -> Self {
        Deadline {
            until: thread_cpu() + budget,
        }
    }

    /// The calling thread has used up its budget. Check it on the thread
    /// that made the deadline.
    pub fn passed(&self) -> bool {
        thread_cpu() > self.until
    }
}

fn thread_cpu() -> Duration {
    // The clock always exists on Linux; were it to fail, count no time
    // (the manager's wall-clock wait still bounds the analysis).
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(Duration::from)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_counts_cpu_work_not_waiting() {
        let d = Deadline::after(Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(60));
        assert!(!d.passed(), "sleeping uses no CPU time");
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while !d.passed() {
            x = x.wrapping_mul(31).wrapping_add(7);
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the budget never ran out"
            );
        }
        assert!(x != 1);
    }
}
