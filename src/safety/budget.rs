//! How much work one check of one command may do: a single budget shared by
//! every walker of that check (the main walk, the scratch walkers that
//! evaluate substitutions, the walk of a shell's `input`). It counts steps
//! in one counter and reads the analysis thread's CPU clock, so no walker
//! can restart its own count; and it carries a stop flag that the manager
//! raises when it stops waiting for the answer, so the work ends with the
//! wait instead of burning a core in the background (cooperative
//! cancellation: every walker loop polls the flag through [`Budget::tick`]).
//!
//! The CPU limit is counted in CPU time of the thread that runs the
//! analysis, not wall time: a busy machine, where the thread waits for a
//! core, does not refuse cheap commands; CPU time bounds the work the filter
//! does, which is what a hostile command could blow up.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use nix::time::{ClockId, clock_gettime};

/// Most steps one check may take (a step is one token, word part, command
/// or nested line visited). Ordinary commands take a few hundred; the
/// largest command the filter reads (64 KiB) walked once takes about
/// 200 000.
pub const MAX_STEPS: u64 = 2_000_000;

/// How often (in steps) the CPU clock is read: reading it costs a system
/// call, the stop flag and the step count are read every step.
const CLOCK_EVERY: u64 = 256;

/// The shared budget of one check. Cloning shares it.
#[derive(Debug, Clone)]
pub struct Budget(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    steps: AtomicU64,
    max_steps: u64,
    /// CPU time allowed from the first [`Budget::start`] on the analysis thread.
    cpu: Option<Duration>,
    /// The analysis thread's CPU clock at which the budget runs out.
    cpu_until: OnceLock<Duration>,
    stopped: AtomicBool,
}

/// Why a budget ran out (for the refusal's words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spent {
    Steps,
    Time,
    Cancelled,
}

impl Budget {
    /// `max_steps` steps and `cpu` of the analysis thread's CPU time.
    pub fn new(max_steps: u64, cpu: Option<Duration>) -> Self {
        Budget(Arc::new(Inner {
            steps: AtomicU64::new(0),
            max_steps,
            cpu,
            cpu_until: OnceLock::new(),
            stopped: AtomicBool::new(false),
        }))
    }

    /// The manager's budget: [`MAX_STEPS`] and `cpu` of CPU time.
    pub fn with_cpu(cpu: Duration) -> Self {
        Budget::new(MAX_STEPS, Some(cpu))
    }

    /// Steps only ([`MAX_STEPS`]): for checks made on the caller's thread.
    pub fn steps_only() -> Self {
        Budget::new(MAX_STEPS, None)
    }

    /// Start the CPU clock on the calling thread (the one that will run the
    /// analysis). Later calls keep the first start.
    pub fn start(&self) {
        if let Some(cpu) = self.0.cpu {
            self.0.cpu_until.get_or_init(|| thread_cpu() + cpu);
        }
    }

    /// One step of work; false once the budget is spent or cancelled (then
    /// every walker stops).
    pub fn tick(&self) -> bool {
        self.charge(1)
    }

    /// `n` steps of work at once (e.g. lexing a long nested line).
    pub fn charge(&self, n: u64) -> bool {
        if self.0.stopped.load(Ordering::Relaxed) {
            return false;
        }
        let before = self.0.steps.fetch_add(n, Ordering::Relaxed);
        let now = before + n;
        if now > self.0.max_steps {
            self.stop();
            return false;
        }
        // The clock is read each time the count crosses a multiple of CLOCK_EVERY.
        if before / CLOCK_EVERY != now / CLOCK_EVERY
            && let Some(until) = self.0.cpu_until.get()
            && thread_cpu() > *until
        {
            self.stop();
            return false;
        }
        true
    }

    /// Stop every walker of this check at its next step (the waiter gave up).
    pub fn stop(&self) {
        self.0.stopped.store(true, Ordering::Relaxed);
    }

    /// The budget ran out (or was stopped): the analysis is partial.
    pub fn spent(&self) -> Option<Spent> {
        if !self.0.stopped.load(Ordering::Relaxed) {
            return None;
        }
        Some(if self.0.steps.load(Ordering::Relaxed) > self.0.max_steps {
            Spent::Steps
        } else if self.0.cpu_until.get().is_some_and(|u| thread_cpu() > *u) {
            Spent::Time
        } else {
            Spent::Cancelled
        })
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.0.steps.load(Ordering::Relaxed)
    }

    /// A guard that stops this budget when dropped: held by the waiter, so
    /// the work stops however the wait ends (answer, timeout, the caller's
    /// request dropped).
    pub fn stop_on_drop(&self) -> StopOnDrop {
        StopOnDrop(self.clone())
    }
}

/// Stops its budget when dropped (see [`Budget::stop_on_drop`]).
#[derive(Debug)]
pub struct StopOnDrop(Budget);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// CPU time used by the calling thread.
pub(crate) fn thread_cpu() -> Duration {
    // The clock always exists on Linux; were it to fail, count no time
    // (the step count and the manager's wall-clock wait still bound the work).
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(Duration::from)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_budget_counts_cpu_work_not_waiting() {
        let b = Budget::new(u64::MAX, Some(Duration::from_millis(20)));
        b.start();
        std::thread::sleep(Duration::from_millis(60));
        assert!(b.charge(CLOCK_EVERY), "sleeping uses no CPU time");
        let start = std::time::Instant::now();
        while b.tick() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the budget never ran out"
            );
        }
        assert_eq!(b.spent(), Some(Spent::Time));
    }

    #[test]
    fn steps_are_counted_once_for_every_clone() {
        let b = Budget::new(100, None);
        let other = b.clone();
        for _ in 0..60 {
            assert!(b.tick());
        }
        // A second walker does not get a fresh count.
        for _ in 0..40 {
            assert!(other.tick());
        }
        assert!(!other.tick());
        assert!(!b.tick(), "spent for every walker");
        assert_eq!(b.spent(), Some(Spent::Steps));
    }

    #[test]
    fn stopping_is_seen_by_every_walker_at_its_next_step() {
        let b = Budget::new(u64::MAX, None);
        let walker = b.clone();
        assert!(walker.tick());
        drop(b.stop_on_drop());
        assert!(!walker.tick());
        assert_eq!(walker.spent(), Some(Spent::Cancelled));
    }
}
