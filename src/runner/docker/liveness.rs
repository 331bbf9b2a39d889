//! Whether the engine is up, as a state with hysteresis rather than one
//! ping per job.
//!
//! `runner = "auto"` turns an unreachable engine into a host job (where the
//! caller allows it). Deciding that on a single failed ping flipped jobs to
//! the host whenever the engine was slow or restarting for a moment, so:
//! an engine berth has seen answer counts as **down** only after it failed
//! [`DOWN_AFTER_FAILS`] pings in a row spanning at least [`DOWN_AFTER`];
//! until then a failed ping is a **blip** (the job is refused, never moved
//! to the host). An engine never seen answering is down at once (a machine
//! without one). One answer makes it up again.

use std::time::{Duration, Instant};

/// Failed pings in a row before a seen engine counts as down.
pub const DOWN_AFTER_FAILS: u32 = 3;
/// How long a seen engine must have been failing before it counts as down.
pub const DOWN_AFTER: Duration = Duration::from_secs(30);

/// What the last pings say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The last ping was answered.
    Up,
    /// A seen engine stopped answering moments ago: not yet down.
    Blip { failing_for: Duration },
    /// Never answered, or failing long enough to call it down.
    Down,
}

/// The pings' history (behind the engine's mutex).
#[derive(Debug, Default)]
pub struct Liveness {
    seen: bool,
    fails: u32,
    failing_since: Option<Instant>,
}

impl Liveness {
    /// Record a ping's outcome at `now` and say what state that leaves.
    pub fn record(&mut self, answered: bool, now: Instant) -> Reach {
        if answered {
            self.seen = true;
            self.fails = 0;
            self.failing_since = None;
            return Reach::Up;
        }
        self.fails = self.fails.saturating_add(1);
        let since = *self.failing_since.get_or_insert(now);
        let failing_for = now.saturating_duration_since(since);
        if !self.seen || (self.fails >= DOWN_AFTER_FAILS && failing_for >= DOWN_AFTER) {
            Reach::Down
        } else {
            Reach::Blip { failing_for }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_never_seen_is_down_at_once() {
        let mut l = Liveness::default();
        assert_eq!(l.record(false, Instant::now()), Reach::Down);
    }

    #[test]
    fn a_seen_engine_blips_until_it_has_failed_long_and_often() {
        let t0 = Instant::now();
        let mut l = Liveness::default();
        assert_eq!(l.record(true, t0), Reach::Up);
        assert!(matches!(l.record(false, t0), Reach::Blip { .. }));
        // Long enough but not often enough.
        assert!(matches!(l.record(false, t0 + DOWN_AFTER), Reach::Blip { .. }));
        assert_eq!(l.record(false, t0 + DOWN_AFTER), Reach::Down);
        // One answer and it is up; the next failure is a blip again.
        assert_eq!(l.record(true, t0 + DOWN_AFTER * 2), Reach::Up);
        assert!(matches!(l.record(false, t0 + DOWN_AFTER * 2), Reach::Blip { .. }));
    }

    #[test]
    fn many_quick_failures_are_still_a_blip() {
        let t0 = Instant::now();
        let mut l = Liveness::default();
        l.record(true, t0);
        for i in 0..50 {
            let r = l.record(false, t0 + Duration::from_millis(i * 100));
            assert!(matches!(r, Reach::Blip { .. }), "{r:?}");
        }
    }
}
