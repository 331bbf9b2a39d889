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
//!
//! The manager calls [`Safety::check_bounded`]: the filter runs on a blocking
//! thread (never on an async worker) with one [`Budget`] for the whole check
//! ([`FILTER_DEADLINE`] of CPU time, a step count), which every walker of
//! the check spends and polls; a command it cannot decide within it, or one
//! over 64 KiB, is refused as `too long to check`. When the manager stops
//! waiting ([`FILTER_WAIT`], or the caller went away) it stops the budget,
//! and the thread's work ends at its next step. At most [`MAX_CHECKS`]
//! checks run at once per instance; one that cannot start within
//! [`CHECK_QUEUE_WAIT`] is refused as busy. Host jobs also pass
//! [`Safety::check_env`] ([`env`]).

pub mod budget;
mod egress;
mod engine;
pub mod env;
pub mod expand;
pub mod filter;
pub mod lexer;
pub mod log;
pub mod normalize;
pub mod rules;
pub mod workspace;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_cost;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

pub use crate::config::{BlockedPattern, SafetyConfig, SafetyLayer};
pub use budget::Budget;
pub use filter::{Filter, Hit};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::model::JobSpec;
use log::{SecurityLog, SecurityRecord};
use workspace::WorkspaceGuard;

/// How much CPU time the filter may spend deciding one command before it is
/// refused (see `budget.rs`).
pub const FILTER_DEADLINE: Duration = Duration::from_millis(100);
/// How long the manager waits for the filter's thread to answer at all (it
/// may wait for a core on a busy machine); no answer is a refusal, and the
/// thread is told to stop.
pub const FILTER_WAIT: Duration = Duration::from_secs(5);
/// Most command checks running at once in one manager: each may use a core
/// for up to [`FILTER_DEADLINE`], so a burst of hostile commands cannot take
/// every core.
pub const MAX_CHECKS: usize = 4;
/// How long a check waits for one of the [`MAX_CHECKS`] places before it is
/// refused as busy (an ordinary check takes well under a millisecond, so a
/// burst of ordinary starts waits, not fails).
pub const CHECK_QUEUE_WAIT: Duration = Duration::from_secs(1);

/// Name of the security log in the instance's state directory.
pub const SECURITY_LOG_FILE: &str = "security.log";

/// The command filter, workspace guard and security log of one manager.
#[derive(Debug, Clone)]
pub struct Safety {
    filter: Arc<Filter>,
    guard: WorkspaceGuard,
    log: Arc<SecurityLog>,
    instance: String,
    allow_env: Arc<Vec<String>>,
    workspace: std::path::PathBuf,
    /// Places for checks running at once, shared by every project's Safety
    /// of this manager.
    checks: Arc<Semaphore>,
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
            allow_env: Arc::new(config.safety.allow_env.clone()),
            workspace: config.workspace.clone(),
            checks: Arc::new(Semaphore::new(MAX_CHECKS)),
        })
    }

    /// The safety of a caller's project (its `[safety]` rules and workspace),
    /// writing to this manager's security log: one log per instance.
    pub fn for_project(&self, config: &Config) -> Result<Self> {
        let home = std::env::var("HOME").ok().filter(|h| h.len() > 1);
        Ok(Safety {
            filter: Arc::new(Filter::new(&config.safety, home)?),
            guard: WorkspaceGuard::new(&config.workspace),
            log: self.log.clone(),
            instance: self.instance.clone(),
            allow_env: Arc::new(config.safety.allow_env.clone()),
            workspace: config.workspace.clone(),
            checks: self.checks.clone(),
        })
    }

    /// Refuse `spec` (run in `cwd`, started by `client`) if it is blocked or
    /// escapes the workspace; log every refusal. Runs the filter on this thread.
    pub fn check(&self, spec: &JobSpec, cwd: &Path, client: &str) -> Result<()> {
        let hit = self.filter.check_spec_in(spec, Some(cwd), &Budget::steps_only());
        self.decide(spec, cwd, client, hit)
    }

    /// [`check`](Self::check) with the filter on a blocking thread and one
    /// [`Budget`]: an async worker never runs the analysis, a command it
    /// cannot decide within the budget is refused, and the analysis stops
    /// when this wait ends (however it ends: answer, timeout, the caller's
    /// request dropped).
    pub async fn check_bounded(&self, spec: &JobSpec, cwd: &Path, client: &str) -> Result<()> {
        // Too big to read: refused here, without copying it to a thread.
        if let Some(hit) = self.filter.check_size(spec) {
            return self.decide(spec, cwd, client, Some(hit));
        }
        let permit = match tokio::time::timeout(CHECK_QUEUE_WAIT, self.checks.clone().acquire_owned()).await {
            Ok(Ok(permit)) => permit,
            _ => return Err(Error::FilterBusy { running: MAX_CHECKS }),
        };
        let filter = self.filter.clone();
        let owned = spec.clone();
        let at = cwd.to_path_buf();
        let budget = Budget::with_cpu(FILTER_DEADLINE);
        let _stop = budget.stop_on_drop();
        // The analysis's own limit is CPU time of its thread; the wait here
        // allows for a busy machine's scheduling on top, and a thread that
        // does not answer in that time is a refusal all the same. The
        // place is held until the thread ends, stopped or not.
        let task = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            filter.check_spec_in(&owned, Some(&at), &budget)
        });
        let hit = match tokio::time::timeout(FILTER_WAIT, task).await {
            Ok(Ok(hit)) => hit,
            Ok(Err(_)) => Some(Hit {
                reason: "the command filter failed on this command, so it is refused".into(),
                pattern: "filter error".into(),
                matched: String::new(),
            }),
            Err(_) => Some(filter::too_long(format!(
                "not decided within {} s",
                FILTER_WAIT.as_secs()
            ))),
        };
        self.decide(spec, cwd, client, hit)
    }

    /// Refuse a host job whose environment changes what would run
    /// (`LD_PRELOAD`, `BASH_ENV`, a `PATH` with a writable directory first);
    /// logged and answered like a blocked command.
    pub fn check_env(&self, spec: &JobSpec, cwd: &Path, client: &str) -> Result<()> {
        match env::check(&spec.env, &self.workspace, &self.allow_env) {
            Some(hit) => self.decide(spec, cwd, client, Some(hit)),
            None => Ok(()),
        }
    }

    /// Log a refusal decided elsewhere (an untrusted project file).
    pub fn record(
        &self,
        kind: &'static str,
        reason: String,
        pattern: String,
        spec: &JobSpec,
        cwd: &Path,
        client: &str,
    ) {
        let command = redact(shorten(spec.display_command()), spec);
        self.log.append(&SecurityRecord {
            kind,
            reason,
            pattern,
            ..self.entry(&command, cwd, client)
        });
    }

    /// Turn the filter's answer (and the workspace guard's) into a result.
    fn decide(&self, spec: &JobSpec, cwd: &Path, client: &str, hit: Option<Hit>) -> Result<()> {
        if let Some(hit) = hit {
            let command = shorten(spec.display_command());
            // The log is a record of what was refused, not of the job's
            // secrets: env values are `***` as in the store.
            self.log.append(&SecurityRecord {
                kind: "blocked",
                reason: hit.reason.clone(),
                pattern: hit.pattern.clone(),
                matched: Some(redact(hit.matched, spec)),
                ..self.entry(&redact(command.clone(), spec), cwd, client)
            });
            return Err(Error::Blocked {
                reason: hit.reason,
                pattern: hit.pattern,
                command,
            });
        }
        if let Err(e) = self.guard.check(cwd) {
            if let Error::OutsideWorkspace { root, .. } = &e {
                self.log.append(&SecurityRecord {
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
    fn entry(&self, command: &str, cwd: &Path, client: &str) -> SecurityRecord {
        SecurityRecord {
            timestamp: chrono::Utc::now().to_rfc3339(),
            kind: "",
            reason: String::new(),
            pattern: String::new(),
            command: command.into(),
            matched: None,
            endpoint: None,
            field: None,
            cwd: cwd.to_path_buf(),
            instance: self.instance.clone(),
            client: client.into(),
        }
    }
}

/// Longest command quoted back in a refusal and the log (a 300 KB command
/// would otherwise be echoed whole in every answer).
const MAX_QUOTED: usize = 4096;

/// `text` with the values of `spec.env` (as given and lower-cased, the
/// filter's view) replaced by `***`, as the store keeps them, and so is
/// any word shaped like a token (typed into the command itself).
fn redact(mut text: String, spec: &JobSpec) -> String {
    for value in spec.env.values().filter(|v| v.len() >= 3) {
        for form in [value.clone(), value.to_lowercase()] {
            if text.contains(&form) {
                text = text.replace(&form, crate::store::REDACTED);
            }
        }
    }
    let tokens: Vec<&str> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || "_-+/=.".contains(c)))
        .filter(|w| token_shaped(w))
        .collect();
    let tokens: Vec<String> = tokens.into_iter().map(String::from).collect();
    for t in tokens {
        text = text.replace(&t, crate::store::REDACTED);
    }
    text
}

/// A word that looks like a credential: a known prefix (`ghp_`,
/// `github_pat_`, `AKIA`, Slack's `xox?-`, `sk-`) or 32+ characters mixing
/// letters of both cases and digits (a random key, not a path or a word).
fn token_shaped(w: &str) -> bool {
    let lower = w.to_ascii_lowercase();
    let known = ["ghp_", "gho_", "ghs_", "github_pat_", "sk-", "akia"]
        .iter()
        .any(|p| lower.starts_with(p))
        || (lower.len() > 5 && lower.starts_with("xox") && lower.as_bytes()[4] == b'-');
    if known && w.len() >= 12 {
        return true;
    }
    let (upper, lower_n, digit) = w.chars().fold((0, 0, 0), |(u, l, d), c| {
        (
            u + c.is_ascii_uppercase() as usize,
            l + c.is_ascii_lowercase() as usize,
            d + c.is_ascii_digit() as usize,
        )
    });
    w.len() >= 32 && !w.contains('/') && upper >= 3 && lower_n >= 3 && digit >= 3
}

fn shorten(command: String) -> String {
    if command.len() <= MAX_QUOTED {
        return command;
    }
    let mut end = MAX_QUOTED;
    while !command.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &command[..end], command.len())
}
