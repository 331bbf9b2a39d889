//! The instance's settings: its name, where its state lives, how many jobs
//! it runs and queues, how long an idle MCP session stays, and what a
//! restarted manager does with jobs a dead one left (`recovery`). These are
//! instance-wide: one manager serves every project with them.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Config;
use crate::error::{Error, Result};

/// Default instance name.
pub const DEFAULT_INSTANCE: &str = "default";
/// Default background job cap.
pub const DEFAULT_MAX_JOBS: usize = 3;
/// Default bound of the queue: starts waiting for a slot of the cap, per
/// instance (a start beyond it is refused, naming the bound).
pub const DEFAULT_MAX_QUEUED: usize = 64;
/// How long a daemon `berth run` started on demand stays with nothing to do.
pub const DEFAULT_DAEMON_IDLE_SECS: f64 = 300.0;
/// Default idle time (seconds) after which an MCP session attached to a
/// serving manager is closed, when it sent nothing and has no job running
/// (0 = never).
pub const DEFAULT_MCP_IDLE_SECS: f64 = 1800.0;

/// What a restarted manager does with jobs a dead manager left running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recovery {
    /// Kill what is left and mark the runs `lost` (the crash watchdog does it at once).
    #[default]
    Reap,
    /// Let a new manager take the instance over; the watchdog stands down if one does.
    Adopt,
}

impl Recovery {
    pub fn as_str(self) -> &'static str {
        match self {
            Recovery::Reap => "reap",
            Recovery::Adopt => "adopt",
        }
    }
}

impl std::str::FromStr for Recovery {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "reap" => Ok(Recovery::Reap),
            "adopt" => Ok(Recovery::Adopt),
            _ => Err(Error::InvalidValue {
                what: "recovery",
                input: s.into(),
                message: "expected reap or adopt".into(),
            }),
        }
    }
}

/// Instance names become file names: keep them simple.
pub fn validate_instance(name: String) -> Result<String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && !name.starts_with('.');
    if ok {
        Ok(name)
    } else {
        Err(Error::InvalidValue {
            what: "instance",
            input: name,
            message: "use letters, digits, `-`, `_` and `.` (up to 64)".into(),
        })
    }
}

/// `$XDG_STATE_HOME/berth`, else `~/.local/state/berth`, else a temporary
/// directory (a service with no home still runs).
pub(super) fn default_state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("berth");
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(h) => PathBuf::from(h).join(".local/state/berth"),
        None => std::env::temp_dir().join("berth-state"),
    }
}

/// `mcp_idle`: 0 means a session is never closed for idling.
pub(super) fn idle_secs(key: &'static str, v: f64) -> Result<f64> {
    super::table::zero_or_more(key, v, "zero (never) or more seconds")
}

impl Config {
    /// A config for tests and embedding: defaults, state under `state_dir`, no files read.
    pub fn isolated(state_dir: impl Into<PathBuf>, instance: &str) -> Self {
        Config {
            state_dir: state_dir.into(),
            instance: instance.into(),
            ..Config::default()
        }
    }

    pub fn with_max_jobs(mut self, n: usize) -> Self {
        self.max_jobs = n;
        self
    }

    /// This instance's state directory.
    pub fn instance_dir(&self) -> PathBuf {
        self.state_dir.join(&self.instance)
    }
}
