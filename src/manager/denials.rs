//! A job's egress denials, bounded: the first few in full, then counts.
//!
//! A job may ask its proxy for forbidden hosts in a loop (70,000 times in
//! 25 s was seen): one security-log line and one event each rotated the
//! security log past the refusals recorded before (a refused `sudo` was
//! gone) and grew the store by megabytes. So, like watch hits: the first
//! [`IN_FULL`] denials of a job are logged and emitted whole; after that
//! they are counted per destination and summed up in one line at most
//! every [`SUMMARY_EVERY`], and once more when the job's proxy closes (the
//! reporter is dropped), so no count is lost.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Denials of one job logged and emitted one by one.
pub const IN_FULL: u64 = 20;
/// Longest a count waits before it is written.
pub const SUMMARY_EVERY: Duration = Duration::from_secs(10);
/// Destinations counted by name; more are counted together.
const MAX_DESTINATIONS: usize = 32;

/// Where a denial (or a summary of many) goes: the security log and the
/// job's events, as `(request, target, reason)`.
pub type Sink = Box<dyn Fn(&str, &str, &str) + Send + Sync>;

/// One job's denials so far.
pub struct Limiter {
    sink: Sink,
    state: Mutex<Counts>,
}

#[derive(Default)]
struct Counts {
    seen: u64,
    pending: BTreeMap<String, u64>,
    others: u64,
    last_summary: Option<Instant>,
}

impl Limiter {
    pub fn new(sink: Sink) -> Arc<Self> {
        Arc::new(Limiter {
            sink,
            state: Mutex::default(),
        })
    }

    /// Report a denial of `request` to `target` for `reason` at `now`.
    pub fn deny(&self, request: &str, target: &str, reason: &str, now: Instant) {
        // `Ok`: write this denial whole; `Err(Some)`: a summary is due.
        let write: Result<(), Option<String>> = {
            let mut c = self.state.lock().unwrap();
            c.seen += 1;
            if c.seen <= IN_FULL {
                Ok(())
            } else {
                if c.pending.len() < MAX_DESTINATIONS || c.pending.contains_key(target) {
                    *c.pending.entry(target.to_string()).or_default() += 1;
                } else {
                    c.others += 1;
                }
                let due = c
                    .last_summary
                    .is_none_or(|t| now.duration_since(t) >= SUMMARY_EVERY);
                if due {
                    c.last_summary = Some(now);
                }
                Err(due.then(|| take_summary(&mut c)).flatten())
            }
        };
        match write {
            Ok(()) => (self.sink)(request, target, reason),
            Err(Some(summary)) => (self.sink)(&summary, "(many)", "more denials, counted per destination"),
            Err(None) => {}
        }
    }
}

/// The pending counts as one line, cleared; `None` when there are none.
fn take_summary(c: &mut Counts) -> Option<String> {
    if c.pending.is_empty() && c.others == 0 {
        return None;
    }
    let n: u64 = c.pending.values().sum::<u64>() + c.others;
    let mut by: Vec<String> = c.pending.iter().map(|(d, k)| format!("{d} ×{k}")).collect();
    if c.others > 0 {
        by.push(format!("other destinations ×{}", c.others));
    }
    c.pending.clear();
    c.others = 0;
    Some(format!(
        "{n} more denied requests (after the first {IN_FULL}): {}",
        by.join(", ")
    ))
}

impl Drop for Limiter {
    /// The proxy closed (the job ended): what was still counted is written.
    fn drop(&mut self) {
        let c = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = take_summary(c) {
            (self.sink)(&s, "(many)", "more denials, counted per destination");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collecting() -> (Arc<Limiter>, Arc<Mutex<Vec<String>>>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let l = lines.clone();
        let limiter = Limiter::new(Box::new(move |req: &str, _: &str, _: &str| {
            l.lock().unwrap().push(req.to_string())
        }));
        (limiter, lines)
    }

    #[test]
    fn a_flood_is_the_first_few_then_counts_and_nothing_is_lost() {
        let (limiter, lines) = collecting();
        let t0 = Instant::now();
        for i in 0..70_000u64 {
            let at = t0 + Duration::from_millis(i / 3);
            let host = format!("h{}:443", i % 3);
            limiter.deny(&format!("CONNECT {host}"), &host, "not allowed", at);
        }
        drop(limiter);
        let lines = lines.lock().unwrap();
        // 20 in full, one summary at the 21st, then one per 10 s of ~23 s, then the last.
        assert!(lines.len() <= (IN_FULL as usize) + 5, "{}", lines.len());
        let counted: u64 = lines
            .iter()
            .filter_map(|l| l.split(" more denied").next()?.parse::<u64>().ok())
            .sum();
        assert_eq!(counted + IN_FULL, 70_000, "every denial is counted: {lines:?}");
        assert!(lines.last().unwrap().contains("h1:443 ×"), "{lines:?}");
    }
}
