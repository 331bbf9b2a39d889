//! The safety layer: the command filter, the workspace guard and the security
//! log. [`Safety::check`] is called by the manager for every job start (CLI,
//! API, MCP, resume) before any runner sees the command.
//!
//! # Theory of operation
//! The filter catches honest mistakes and obvious abuse; it is **not** the
//! security boundary (the container is: see `SECURITY.md`). A blocklist over
//! a language as rich as the shell can always be dodged, so the filter aims
//! to be hard to dodge *by accident* and cheap to explain:
//! 1. [`normalize`] lexes the command ([`lexer`]) and renders each simple
//!    command, pipeline, assignment and function as a lower-case *view*,
//!    seeing through quoting, wrappers, `sh -c`, `eval` and simple
//!    substitutions ([`expand`]). What it cannot decide cheaply, it marks.
//! 2. [`filter`] matches the [`rules`] (plus `berth.toml`'s) against the
//!    views; the first hit refuses the job with [`Error::Blocked`].
//! 3. [`workspace`] checks the canonical working directory against the
//!    canonical workspace root ([`Error::OutsideWorkspace`]).
//! 4. [`log`] appends every refusal to the instance's security log.

pub mod expand;
pub mod filter;
pub mod lexer;
pub mod log;
pub mod normalize;
pub mod rules;
pub mod settings;
pub mod workspace;

#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::Arc;

pub use filter::{Filter, Hit};
pub use settings::{BlockedPattern, SafetyConfig, SafetyLayer};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::job::JobSpec;
use log::{Entry, SecurityLog};
use workspace::WorkspaceGuard;

/// Name of the security log in the instance's state directory.
pub const SECURITY_LOG_FILE: &str = "security.log";

/// The command filter, workspace guard and security log of one manager.
#[derive(Debug, Clone)]
pub struct Safety {
    filter: Arc<Filter>,
    guard: WorkspaceGuard,
    log: Arc<SecurityLog>,
    instance: String,
}

impl Safety {
    pub fn from_config(config: &Config) -> Result<Self> {
        let home = std::env::var("HOME").ok().filter(|h| h.len() > 1);
        let log = config
            .safety
            .security_log
            .clone()
            .unwrap_or_else(|| config.instance_dir().join(SECURITY_LOG_FILE));
        Ok(Safety {
            filter: Arc::new(Filter::new(&config.safety, home)?),
            guard: WorkspaceGuard::new(&config.workspace),
            log: Arc::new(SecurityLog::new(log)),
            instance: config.instance.clone(),
        })
    }

    /// Refuse `spec` (run in `cwd`, started by `client`) if it is blocked or
    /// escapes the workspace; log every refusal.
    pub fn check(&self, spec: &JobSpec, cwd: &Path, client: &str) -> Result<()> {
        if let Some(hit) = self.filter.check_spec(spec) {
            let command = spec.display_command();
            self.log.append(&Entry {
                kind: "blocked",
                reason: hit.reason.clone(),
                pattern: hit.pattern.clone(),
                matched: Some(hit.matched),
                ..self.entry(&command, cwd, client)
            });
            return Err(Error::Blocked {
                reason: hit.reason,
                pattern: hit.pattern,
                command,
            });
        }
        if let Err(e) = self.guard.check(cwd) {
            if let Error::OutsideWorkspace { root, .. } = &e {
                self.log.append(&Entry {
                    kind: "outside_workspace",
                    reason: format!("working directory outside the workspace {}", root.display()),
                    pattern: "workspace".into(),
                    ..self.entry(&spec.display_command(), cwd, client)
                });
            }
            return Err(e);
        }
        Ok(())
    }

    /// The compiled filter (e.g. to explain a decision without starting a job).
    pub fn filter(&self) -> &Filter {
        &self.filter
    }

    /// Where refusals are logged.
    pub fn log_path(&self) -> &Path {
        self.log.path()
    }

    /// The parts of a log entry every refusal shares.
    fn entry(&self, command: &str, cwd: &Path, client: &str) -> Entry {
        Entry {
            timestamp: chrono::Utc::now().to_rfc3339(),
            kind: "",
            reason: String::new(),
            pattern: String::new(),
            command: command.into(),
            matched: None,
            cwd: cwd.to_path_buf(),
            instance: self.instance.clone(),
            client: client.into(),
        }
    }
}
