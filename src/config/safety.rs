//! The `[safety]` section of `berth.toml` and its effective value in
//! [`crate::Config`]: extra blocked patterns, whether the default blocklist
//! applies, and where the security log goes. Kept with the rest of the
//! settings (the safety layer reads them from `Config` and re-exports them)
//! so that `config` does not depend on the layer that depends on it.
//!
//! ```toml
//! [safety]
//! default_blocklist = true                       # false: only the patterns below
//! security_log = "/var/log/berth-security.log"   # default: <state_dir>/<instance>/security.log
//! blocked = [
//!   { pattern = '^terraform\s+destroy', reason = "destroys infrastructure" },
//! ]
//! allow_env = ["LD_LIBRARY_PATH"]                # host jobs may set these (see env.rs)
//! ```

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// One extra rule: a regex matched against the normalised views of a command
/// (lower case, quotes removed, program as a base name) and why it is refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockedPattern {
    pub pattern: String,
    pub reason: String,
}

impl BlockedPattern {
    pub fn new(pattern: impl Into<String>, reason: impl Into<String>) -> Self {
        BlockedPattern {
            pattern: pattern.into(),
            reason: reason.into(),
        }
    }
}

/// The `[safety]` table as written in one layer; every field optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SafetyLayer {
    pub default_blocklist: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<BlockedPattern>,
    pub security_log: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_env: Vec<String>,
}

/// The effective safety settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SafetyConfig {
    /// Apply the built-in blocklist (`rules.rs`) before the extra patterns.
    pub default_blocklist: bool,
    /// Extra patterns, from every layer in order.
    pub blocked: Vec<BlockedPattern>,
    /// `None`: `<state_dir>/<instance>/security.log`.
    pub security_log: Option<PathBuf>,
    /// Variables a host job may set although the environment rules refuse
    /// them (`LD_PRELOAD`, `PATH` with a workspace directory first, …).
    #[serde(default)]
    pub allow_env: Vec<String>,
}

impl Default for SafetyConfig {
    fn default() -> Self {
        SafetyConfig {
            default_blocklist: true,
            blocked: Vec::new(),
            security_log: None,
            allow_env: Vec::new(),
        }
    }
}

impl SafetyConfig {
    /// Lay `layer` over these settings: switches and paths replace, patterns
    /// add up (a project's file cannot silently drop a user's patterns).
    pub fn apply(&mut self, layer: SafetyLayer) -> Result<()> {
        for b in &layer.blocked {
            regex::Regex::new(&b.pattern).map_err(|e| Error::InvalidRegex {
                pattern: b.pattern.clone(),
                message: e.to_string(),
            })?;
        }
        self.blocked.extend(layer.blocked);
        self.allow_env.extend(layer.allow_env);
        if let Some(on) = layer.default_blocklist {
            self.default_blocklist = on;
        }
        if let Some(path) = layer.security_log {
            self.security_log = Some(path);
        }
        Ok(())
    }

    pub fn with_default_blocklist(mut self, on: bool) -> Self {
        self.default_blocklist = on;
        self
    }

    pub fn with_blocked(mut self, pattern: impl Into<String>, reason: impl Into<String>) -> Self {
        self.blocked.push(BlockedPattern::new(pattern, reason));
        self
    }

    pub fn with_security_log(mut self, path: impl Into<PathBuf>) -> Self {
        self.security_log = Some(path.into());
        self
    }
}

/// The `[safety]` lines of `berth config`; the table is one source for all of them.
pub(super) fn describe(c: &super::Config) -> Vec<(&'static str, String)> {
    let s = &c.safety;
    vec![
        ("safety.default_blocklist", s.default_blocklist.to_string()),
        ("safety.blocked", format!("{} extra pattern(s)", s.blocked.len())),
        (
            "safety.security_log",
            s.security_log.as_ref().map_or_else(
                || c.instance_dir().join("security.log").display().to_string(),
                |p| p.display().to_string(),
            ),
        ),
        ("safety.allow_env", s.allow_env.join(", ")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn layers_add_patterns_and_replace_switches() {
        let mut c = SafetyConfig::default();
        let layer: SafetyLayer = toml::from_str(
            "default_blocklist = false\nblocked = [{ pattern = '^terraform\\s', reason = \"no\" }]\n",
        )
        .unwrap();
        c.apply(layer).unwrap();
        c.apply(SafetyLayer {
            blocked: vec![BlockedPattern::new("^x", "y")],
            ..Default::default()
        })
        .unwrap();
        assert!(!c.default_blocklist);
        assert_eq!(c.blocked.len(), 2);
        let bad = SafetyLayer {
            blocked: vec![BlockedPattern::new("(", "broken")],
            ..Default::default()
        };
        assert!(matches!(c.apply(bad), Err(Error::InvalidRegex { .. })));
        assert!(
            toml::from_str::<SafetyLayer>("blockd = []").is_err(),
            "typos are refused"
        );
    }
}
