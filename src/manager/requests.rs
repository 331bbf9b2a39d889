//! What callers ask of the manager about running jobs and what it answers:
//! which jobs a list shows, a stop request and what the stop did, and how a
//! foreground run came back. Shared by every face (serialized as the API's
//! bodies).

use serde::{Deserialize, Serialize};

use crate::model::{EndedBy, JobId, JobInfo, JobStatus, StopCause};

/// Which jobs `list` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListFilter {
    /// Queued, starting or running.
    #[default]
    Running,
    /// Ended without failure (exit 0, stopped on purpose).
    Completed,
    /// Ended in failure (non-zero exit, crash, timeout, OOM, lost, failed start).
    Failed,
    All,
}

impl ListFilter {
    /// True when a job in status `s` belongs in this list.
    pub fn admits(self, s: &JobStatus) -> bool {
        match self {
            ListFilter::Running => s.is_active(),
            ListFilter::Completed => s.is_terminal() && !s.is_failure(),
            ListFilter::Failed => s.is_failure(),
            ListFilter::All => true,
        }
    }
}

/// A stop request from a caller.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KillRequest {
    /// Who is stopping it; `agent` when not said.
    #[serde(default)]
    pub ended_by: Option<EndedBy>,
    #[serde(default)]
    pub reason: Option<String>,
    /// First signal (default SIGTERM).
    #[serde(default)]
    pub signal: Option<i32>,
    /// Set by the manager itself (shutdown, a session's end); a client's
    /// words are `reason`.
    #[serde(skip)]
    pub cause: Option<StopCause>,
    /// Seconds between the first signal and SIGKILL (default: the configured grace).
    #[serde(default)]
    pub grace: Option<f64>,
}

/// The answer to a kill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KillOutcome {
    pub result: KillResult,
    pub job: JobId,
    pub status: JobStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_by: Option<EndedBy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

/// What a kill did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KillResult {
    /// This request (or one just before it) stopped the job.
    Killed,
    /// The job had ended already; nothing was done.
    AlreadyFinished,
}

impl std::fmt::Display for KillResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KillResult::Killed => "killed",
            KillResult::AlreadyFinished => "already_finished",
        })
    }
}

/// How a foreground run came back to its caller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Foreground {
    /// The job ended within its budget (or was killed on timeout).
    Finished { info: Box<JobInfo> },
    /// The job goes on in the background.
    Promoted { info: Box<JobInfo> },
}
