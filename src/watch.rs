//! Watchers: regex patterns checked against every output line of a job. A
//! match becomes a `watch_hit` event, so an agent learns "build finished" or
//! "panic" without polling logs. Patterns are compiled once into a
//! [`regex::RegexSet`] so a job with watchers pays one scan per line, however
//! many patterns it has.
//!
//! A job controls its output, so it controls how often its watchers match:
//! 20 patterns that match every line of a 5,000-line burst are 100,000
//! hits. Each job's hits therefore spend a budget ([`HITS_PER_SEC`], with a
//! burst of [`HITS_BURST`]): hits over it are counted, not stored, and the
//! count is reported as a `watch_dropped` event (at most one a second, and
//! one when the output ends) and on the job's record (`watch_hits_dropped`).
//! The number of patterns and their size are bounded too ([`MAX_WATCHERS`],
//! [`MAX_PATTERN_BYTES`], and the compiled size of the set).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use regex::{RegexBuilder, RegexSet, RegexSetBuilder};

use crate::error::{Error, Result};
use crate::model::{EventKind, Stream};

/// Most watch patterns one job may have.
pub const MAX_WATCHERS: usize = 32;
/// Longest watch pattern, in bytes.
pub const MAX_PATTERN_BYTES: usize = 1024;
/// Watch hits one job may store per second, on average.
pub const HITS_PER_SEC: u32 = 20;
/// Watch hits one job may store at once (a test run printing its failures together).
pub const HITS_BURST: u32 = 100;
/// Largest compiled form of one pattern, and of a job's whole set: a short
/// pattern can still compile huge (`(a{1000}){1000}`).
const COMPILED_BYTES: usize = 4 << 20;
/// Least time between two `watch_dropped` reports of one job.
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// The compiled watch patterns of one job, and the budget their hits spend.
#[derive(Debug, Default)]
pub struct Watchers {
    set: Option<RegexSet>,
    patterns: Vec<String>,
    budget: Mutex<Budget>,
}

/// A token bucket of watch hits, and the hits it refused.
#[derive(Debug)]
struct Budget {
    tokens: f64,
    refilled: Option<Instant>,
    dropped: u64,
    /// Dropped since the last report.
    unreported: u64,
    reported: Option<Instant>,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            tokens: HITS_BURST as f64,
            refilled: None,
            dropped: 0,
            unreported: 0,
            reported: None,
        }
    }
}

impl Budget {
    /// Take one hit's token at `now`; false (and counted) when there is none.
    fn take(&mut self, now: Instant) -> bool {
        if let Some(then) = self.refilled {
            let earned = now.saturating_duration_since(then).as_secs_f64() * HITS_PER_SEC as f64;
            self.tokens = (self.tokens + earned).min(HITS_BURST as f64);
        }
        self.refilled = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            self.dropped += 1;
            self.unreported += 1;
            false
        }
    }

    /// The `watch_dropped` event due at `now`: when hits were dropped since
    /// the last one and a second has passed (or `last`: the output ended).
    fn report(&mut self, now: Instant, last: bool) -> Option<EventKind> {
        let due = self
            .reported
            .is_none_or(|t| now.saturating_duration_since(t) >= REPORT_EVERY);
        if self.unreported == 0 || !(due || last) {
            return None;
        }
        self.reported = Some(now);
        Some(EventKind::WatchDropped {
            count: std::mem::take(&mut self.unreported),
            total: self.dropped,
        })
    }
}

impl Watchers {
    /// Compile `patterns`; an invalid or oversized one is named in the error.
    pub fn new(patterns: &[String]) -> Result<Self> {
        check_count(patterns)?;
        if patterns.is_empty() {
            return Ok(Self::default());
        }
        // Compile one by one first so the error names the bad pattern.
        for p in patterns {
            compile_one(p)?;
        }
        let set = RegexSetBuilder::new(patterns)
            .size_limit(COMPILED_BYTES)
            .build()
            .map_err(|e| Error::InvalidRegex {
                pattern: patterns.join(" | "),
                message: format!("{e} (the patterns together compile too large: use fewer or simpler ones)"),
            })?;
        Ok(Watchers {
            set: Some(set),
            patterns: patterns.to_vec(),
            budget: Mutex::default(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_none()
    }

    /// The patterns that match `line`, in the order they were given.
    pub fn matches<'a>(&'a self, line: &str) -> impl Iterator<Item = &'a str> + 'a {
        let hits = self.set.as_ref().map(|s| s.matches(line));
        hits.into_iter()
            .flat_map(|m| m.into_iter())
            .map(|i| self.patterns[i].as_str())
    }

    /// The events for `lines` of `stream` read at `now`: a `watch_hit` per
    /// match within the budget, then a `watch_dropped` report when one is due.
    pub fn hits<'l>(
        &self,
        lines: impl Iterator<Item = (u64, &'l str)>,
        stream: Stream,
        now: Instant,
    ) -> Vec<EventKind> {
        let mut events = Vec::new();
        if self.is_empty() {
            return events;
        }
        let mut budget = self.budget.lock().unwrap();
        for (seq, text) in lines {
            for pattern in self.matches(text) {
                // Counted before anything is copied: a flood costs no memory.
                if budget.take(now) {
                    events.push(EventKind::WatchHit {
                        line_seq: seq,
                        stream,
                        line: text.to_string(),
                        pattern: pattern.to_string(),
                    });
                }
            }
        }
        events.extend(budget.report(now, false));
        events
    }

    /// The last `watch_dropped` report, when hits were dropped since the
    /// previous one (the output ended).
    pub fn final_report(&self, now: Instant) -> Option<EventKind> {
        self.budget.lock().unwrap().report(now, true)
    }

    /// Hits dropped so far (over the budget).
    pub fn dropped(&self) -> u64 {
        self.budget.lock().unwrap().dropped
    }
}

/// At most [`MAX_WATCHERS`] patterns of at most [`MAX_PATTERN_BYTES`] each.
pub fn check_count(patterns: &[String]) -> Result<()> {
    if patterns.len() > MAX_WATCHERS {
        return Err(Error::InvalidValue {
            what: "watch",
            input: format!("{} patterns", patterns.len()),
            message: format!(
                "a job may have at most {MAX_WATCHERS} watch patterns; join several into one with `|`"
            ),
        });
    }
    match patterns.iter().find(|p| p.len() > MAX_PATTERN_BYTES) {
        Some(p) => Err(Error::InvalidValue {
            what: "watch",
            input: format!("{}… ({} bytes)", p.chars().take(32).collect::<String>(), p.len()),
            message: format!("a watch pattern may be at most {MAX_PATTERN_BYTES} bytes"),
        }),
        None => Ok(()),
    }
}

/// Compile one pattern within the size bound; the error names it.
pub fn compile_one(pattern: &str) -> Result<regex::Regex> {
    RegexBuilder::new(pattern)
        .size_limit(COMPILED_BYTES)
        .build()
        .map_err(|e| Error::InvalidRegex {
            pattern: pattern.to_string(),
            message: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn matches_each_pattern() {
        let w = Watchers::new(&["error".into(), r"^ready on \d+".into()]).unwrap();
        assert_eq!(
            w.matches("ready on 3000").collect::<Vec<_>>(),
            vec![r"^ready on \d+"]
        );
        assert_eq!(w.matches("an error").collect::<Vec<_>>(), vec!["error"]);
        assert!(w.matches("fine").next().is_none());
    }

    #[test]
    fn bad_pattern_is_named() {
        let err = Watchers::new(&["ok".into(), "(unclosed".into()]).unwrap_err();
        assert!(err.to_string().contains("(unclosed"), "{err}");
    }

    /// Too many patterns, a pattern too long, or one that compiles huge are
    /// refused with what the bound is.
    #[test]
    fn patterns_are_bounded() {
        let many: Vec<String> = (0..=MAX_WATCHERS).map(|i| format!("p{i}")).collect();
        let e = Watchers::new(&many).unwrap_err().to_string();
        assert!(e.contains("at most 32 watch patterns"), "{e}");
        assert!(Watchers::new(&many[..MAX_WATCHERS]).is_ok());
        let long = "a".repeat(MAX_PATTERN_BYTES + 1);
        let e = Watchers::new(&[long]).unwrap_err().to_string();
        assert!(e.contains("at most 1024 bytes"), "{e}");
        let huge = Watchers::new(&["(a{1000}){1000}".into()])
            .unwrap_err()
            .to_string();
        assert!(huge.contains("(a{1000}){1000}"), "{huge}");
    }

    /// 20 patterns matching every line of 5,000 lines read at once: the
    /// burst is stored, the rest counted and reported once; a second later
    /// the budget has earned HITS_PER_SEC more.
    #[test]
    fn a_flood_of_hits_is_counted_not_stored() {
        let patterns: Vec<String> = (0..20).map(|i| format!("l{i}|line")).collect();
        let w = Watchers::new(&patterns).unwrap();
        let lines: Vec<String> = (0..5000).map(|i| format!("line {i}")).collect();
        let t0 = Instant::now();
        let numbered = || lines.iter().enumerate().map(|(i, l)| (i as u64 + 1, l.as_str()));
        let events = w.hits(numbered(), Stream::Stdout, t0);
        let stored = events.iter().filter(|e| e.name() == "watch_hit").count();
        assert_eq!(stored, HITS_BURST as usize);
        let dropped = 100_000 - HITS_BURST as u64;
        assert_eq!(
            events.last(),
            Some(&EventKind::WatchDropped {
                count: dropped,
                total: dropped
            })
        );
        assert_eq!(w.dropped(), dropped);
        // Within the second: nothing earned, no second report yet.
        let more = w.hits(numbered().take(1), Stream::Stdout, t0 + Duration::from_millis(10));
        assert!(more.is_empty(), "{more:?}");
        // A second later: 20 earned, the rest dropped and reported.
        let later = w.hits(
            numbered(),
            Stream::Stdout,
            t0 + Duration::from_secs(1) + Duration::from_millis(10),
        );
        let stored = later.iter().filter(|e| e.name() == "watch_hit").count();
        assert_eq!(stored, HITS_PER_SEC as usize);
        assert!(matches!(later.last(), Some(EventKind::WatchDropped { .. })));
        assert_eq!(
            w.final_report(t0 + Duration::from_secs(2)),
            None,
            "nothing left unreported"
        );
    }
}
