//! Watchers: regex patterns checked against every output line of a job. A
//! match becomes a `watch_hit` event, so an agent learns "build finished" or
//! "panic" without polling logs. Patterns are compiled once into a
//! [`regex::RegexSet`] so a job with watchers pays one scan per line, however
//! many patterns it has.

use regex::RegexSet;

use crate::error::{Error, Result};

/// The compiled watch patterns of one job.
#[derive(Debug, Clone, Default)]
pub struct Watchers {
    set: Option<RegexSet>,
    patterns: Vec<String>,
}

impl Watchers {
    /// Compile `patterns`; an invalid one is named in the error.
    pub fn new(patterns: &[String]) -> Result<Self> {
        if patterns.is_empty() {
            return Ok(Self::default());
        }
        // Compile one by one first so the error names the bad pattern.
        for p in patterns {
            regex::Regex::new(p).map_err(|e| Error::InvalidRegex {
                pattern: p.clone(),
                message: e.to_string(),
            })?;
        }
        let set = RegexSet::new(patterns).map_err(|e| Error::InvalidRegex {
            pattern: patterns.join(" | "),
            message: e.to_string(),
        })?;
        Ok(Watchers {
            set: Some(set),
            patterns: patterns.to_vec(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_none()
    }

    /// The patterns that match `line`, in the order they were given.
    pub fn matches(&self, line: &str) -> Vec<String> {
        match &self.set {
            None => Vec::new(),
            Some(set) => set
                .matches(line)
                .iter()
                .map(|i| self.patterns[i].clone())
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_each_pattern() {
        let w = Watchers::new(&["error".into(), r"^ready on \d+".into()]).unwrap();
        assert_eq!(w.matches("ready on 3000"), vec![r"^ready on \d+"]);
        assert_eq!(w.matches("an error"), vec!["error"]);
        assert!(w.matches("fine").is_empty());
    }

    #[test]
    fn bad_pattern_is_named() {
        let err = Watchers::new(&["ok".into(), "(unclosed".into()]).unwrap_err();
        assert!(err.to_string().contains("(unclosed"), "{err}");
    }
}
