//! Where a job is in its life ([`JobStatus`], [`StartMode`], [`EndedBy`]) and
//! the serializable record every interface shows ([`JobInfo`]). Nothing here
//! holds a live handle: those belong to the runner and the manager.

use std::fmt;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{AppliedLimits, JobId, JobSpec, PortMapping, RunnerKind};

/// Who ended a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndedBy {
    /// A tool call or API client.
    Agent,
    /// A person (TUI `k`, `berth kill --as user`).
    User,
    /// berth itself: timeout, keep-alive expiry, shutdown, OOM, crash recovery.
    System,
}

impl fmt::Display for EndedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EndedBy::Agent => "agent",
            EndedBy::User => "user",
            EndedBy::System => "system",
        })
    }
}

/// How a job was started, and whether it was moved to background since.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode", content = "by")]
pub enum StartMode {
    Foreground,
    Background,
    /// A foreground job moved to background, by the system (budget) or a user (Ctrl+R, `berth bg`).
    Promoted(EndedBy),
}

impl StartMode {
    /// Counts against the background cap.
    pub fn is_background(self) -> bool {
        !matches!(self, StartMode::Foreground)
    }
}

impl fmt::Display for StartMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartMode::Foreground => f.write_str("foreground"),
            StartMode::Background => f.write_str("background"),
            StartMode::Promoted(by) => write!(f, "promoted by {by}"),
        }
    }
}

/// Why a job was stopped rather than ending on its own. Stored and answered
/// as its kind (`cause: {"kind": "keep_alive_expired", "secs": 5.0}`), the
/// typed value records are read back by, beside its words (`reason`: `oom`,
/// `shutdown`, `keep_alive expired (5s)`, a client's own reason …) for
/// people; code matches on the variant, never on the words. Only records
/// written before kinds were stored are read back from their words.
#[derive(Debug, Clone, PartialEq)]
pub enum StopCause {
    /// A client stopped it (`berth kill`, a tool call, the TUI), in its words.
    Requested(String),
    /// The caller of a foreground run pressed Ctrl+C (the CLI exits 130).
    Interrupted,
    /// The reader of a foreground run went away (its stdout closed).
    StdoutClosed,
    /// The manager shut down (`berth down`, a signal, its last session gone).
    Shutdown,
    /// The MCP session that started the job ended.
    SessionEnded,
    /// `keep_alive` ran out: the job ran as long as asked (not a failure).
    KeepAliveExpired { secs: f64 },
    /// A foreground budget ran out with `on_timeout = kill` (status `timed_out`).
    TimedOut { secs: f64 },
    /// The kernel's OOM killer, at the job's memory limit.
    Oom,
    /// Its layer grew past `layer_size` (bytes).
    LayerFull { limit: u64 },
}

impl StopCause {
    /// The cause a client's words stand for: the two the CLI sends are
    /// recognised; words that would read as a cause only berth sets (`oom`,
    /// `shutdown` …) stay the client's, marked as asked for.
    pub fn requested(words: impl Into<String>) -> Self {
        let words = words.into();
        match StopCause::from(words.as_str()) {
            c @ (StopCause::Interrupted | StopCause::StdoutClosed | StopCause::Requested(_)) => c,
            _ => StopCause::Requested(format!("{words} (as asked)")),
        }
    }
}

impl fmt::Display for StopCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopCause::Requested(words) => f.write_str(words),
            StopCause::Interrupted => f.write_str("interrupted (Ctrl+C)"),
            StopCause::StdoutClosed => f.write_str("stdout closed"),
            StopCause::Shutdown => f.write_str("shutdown"),
            StopCause::SessionEnded => f.write_str("session ended"),
            StopCause::KeepAliveExpired { secs } => write!(f, "keep_alive expired ({secs}s)"),
            StopCause::TimedOut { secs } => write!(f, "timed out after {secs}s"),
            StopCause::Oom => f.write_str("oom"),
            StopCause::LayerFull { limit } => write!(f, "layer full ({limit} bytes, layer_size)"),
        }
    }
}

/// Read back from its words (a stored record, an answer of the API).
impl From<&str> for StopCause {
    fn from(words: &str) -> Self {
        let secs = |rest: &str, end: &str| rest.strip_suffix(end).and_then(|n| n.parse::<f64>().ok());
        match words {
            "interrupted (Ctrl+C)" => StopCause::Interrupted,
            "stdout closed" => StopCause::StdoutClosed,
            "shutdown" => StopCause::Shutdown,
            "session ended" => StopCause::SessionEnded,
            "oom" => StopCause::Oom,
            w => {
                if let Some(secs) = w.strip_prefix("keep_alive expired (").and_then(|r| secs(r, "s)")) {
                    StopCause::KeepAliveExpired { secs }
                } else if let Some(secs) = w.strip_prefix("timed out after ").and_then(|r| secs(r, "s")) {
                    StopCause::TimedOut { secs }
                } else if let Some(limit) = w
                    .strip_prefix("layer full (")
                    .and_then(|r| r.strip_suffix(" bytes, layer_size)"))
                    .and_then(|n| n.parse().ok())
                {
                    StopCause::LayerFull { limit }
                } else {
                    StopCause::Requested(w.to_string())
                }
            }
        }
    }
}

impl PartialEq<str> for StopCause {
    fn eq(&self, words: &str) -> bool {
        // As shown: the words a record or an answer carries.
        let shown = self.to_string();
        shown == words
    }
}

/// The kind of a [`StopCause`] as stored and answered: its data without
/// the words (a client's words are the `reason` beside it).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CauseKind {
    Requested,
    Interrupted,
    StdoutClosed,
    Shutdown,
    SessionEnded,
    KeepAliveExpired { secs: f64 },
    TimedOut { secs: f64 },
    Oom,
    LayerFull { limit: u64 },
}

impl StopCause {
    /// Its kind, as stored beside its words.
    pub fn kind(&self) -> CauseKind {
        match self {
            StopCause::Requested(_) => CauseKind::Requested,
            StopCause::Interrupted => CauseKind::Interrupted,
            StopCause::StdoutClosed => CauseKind::StdoutClosed,
            StopCause::Shutdown => CauseKind::Shutdown,
            StopCause::SessionEnded => CauseKind::SessionEnded,
            StopCause::KeepAliveExpired { secs } => CauseKind::KeepAliveExpired { secs: *secs },
            StopCause::TimedOut { secs } => CauseKind::TimedOut { secs: *secs },
            StopCause::Oom => CauseKind::Oom,
            StopCause::LayerFull { limit } => CauseKind::LayerFull { limit: *limit },
        }
    }

    /// Read back from a record or an answer: by its kind when it has one;
    /// a record written before kinds were stored, from its words.
    pub fn read(kind: Option<CauseKind>, words: &str) -> StopCause {
        match kind {
            None => StopCause::from(words),
            Some(CauseKind::Requested) => StopCause::Requested(words.to_string()),
            Some(CauseKind::Interrupted) => StopCause::Interrupted,
            Some(CauseKind::StdoutClosed) => StopCause::StdoutClosed,
            Some(CauseKind::Shutdown) => StopCause::Shutdown,
            Some(CauseKind::SessionEnded) => StopCause::SessionEnded,
            Some(CauseKind::KeepAliveExpired { secs }) => StopCause::KeepAliveExpired { secs },
            Some(CauseKind::TimedOut { secs }) => StopCause::TimedOut { secs },
            Some(CauseKind::Oom) => StopCause::Oom,
            Some(CauseKind::LayerFull { limit }) => StopCause::LayerFull { limit },
        }
    }
}

/// A killed status's cause, flattened into it as `reason` (the words) and
/// `cause` (the kind): `{"state": "killed", "ended_by": "system",
/// "reason": "oom", "cause": {"kind": "oom"}}`.
mod killed_cause {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{CauseKind, StopCause};

    #[derive(Serialize)]
    struct Out {
        reason: String,
        cause: CauseKind,
    }

    #[derive(Deserialize)]
    struct In {
        reason: String,
        #[serde(default)]
        cause: Option<CauseKind>,
    }

    pub fn serialize<S: Serializer>(c: &StopCause, s: S) -> Result<S::Ok, S::Error> {
        Out {
            reason: c.to_string(),
            cause: c.kind(),
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<StopCause, D::Error> {
        let i = In::deserialize(d)?;
        Ok(StopCause::read(i.cause, &i.reason))
    }
}

/// Where a job is in its life. Terminal variants carry how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum JobStatus {
    /// Waiting for a free background slot.
    Queued,
    Starting,
    Running,
    /// The process exited on its own.
    Exited {
        code: i32,
    },
    /// The process died of a signal nobody here sent (e.g. a segfault).
    Signaled {
        signal: i32,
    },
    /// Stopped on request, or by the system (keep-alive expiry, shutdown, OOM).
    Killed {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
        ended_by: EndedBy,
        #[serde(flatten, with = "killed_cause")]
        reason: StopCause,
    },
    /// A foreground budget ran out with `on_timeout = kill`.
    TimedOut,
    /// Found dead or unreachable during recovery.
    Lost {
        reason: String,
    },
    StartFailed {
        error: String,
    },
}

impl JobStatus {
    pub fn is_active(&self) -> bool {
        matches!(self, JobStatus::Queued | JobStatus::Starting | JobStatus::Running)
    }
    pub fn is_terminal(&self) -> bool {
        !self.is_active()
    }
    /// Ended well: exited 0, or stopped on purpose (keep-alive, a kill asked for).
    pub fn is_success(&self) -> bool {
        matches!(self, JobStatus::Exited { code: 0 })
    }
    /// Ended badly: a non-zero exit, a crash, a timeout, a failed start, lost, OOM.
    pub fn is_failure(&self) -> bool {
        match self {
            JobStatus::Exited { code } => *code != 0,
            JobStatus::Signaled { .. }
            | JobStatus::TimedOut
            | JobStatus::Lost { .. }
            | JobStatus::StartFailed { .. } => true,
            JobStatus::Killed { reason, .. } => *reason == StopCause::Oom,
            _ => false,
        }
    }
    /// The short name used in lists and events.
    pub fn name(&self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Starting => "starting",
            JobStatus::Running => "running",
            JobStatus::Exited { code: 0 } => "success",
            JobStatus::Exited { .. } => "failed",
            JobStatus::Signaled { .. } => "signaled",
            JobStatus::Killed { .. } => "killed",
            JobStatus::TimedOut => "timed_out",
            JobStatus::Lost { .. } => "lost",
            JobStatus::StartFailed { .. } => "start_failed",
        }
    }
    /// Shell-style exit code: the code, 128+signal, 124 for a timeout.
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            JobStatus::Exited { code } => Some(*code),
            JobStatus::Signaled { signal } => Some(128 + signal),
            JobStatus::Killed { signal, .. } => signal.map(|s| 128 + s),
            JobStatus::TimedOut => Some(124),
            JobStatus::StartFailed { .. } => Some(127),
            _ => None,
        }
    }
    /// Who ended the job: the client that stopped it, else `system` (it
    /// exited or failed on its own, timed out, was lost, ran out of memory).
    /// `None` only while it is still queued, starting or running.
    pub fn ended_by(&self) -> Option<EndedBy> {
        match self {
            JobStatus::Killed { ended_by, .. } => Some(*ended_by),
            JobStatus::Queued | JobStatus::Starting | JobStatus::Running => None,
            _ => Some(EndedBy::System),
        }
    }
    pub fn reason(&self) -> Option<String> {
        match self {
            JobStatus::Killed { reason, .. } => Some(reason.to_string()),
            JobStatus::TimedOut => Some("timeout".into()),
            JobStatus::Lost { reason } => Some(reason.clone()),
            JobStatus::StartFailed { error } => Some(error.clone()),
            JobStatus::Signaled { signal } => Some(format!("died of signal {signal}")),
            _ => None,
        }
    }
}

/// Paths of the raw per-stream log files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogPaths {
    pub stdout: PathBuf,
    pub stderr: PathBuf,
}

/// Resource usage sampled at the time of asking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub cpu_percent: f64,
    pub memory_bytes: u64,
}

/// One node of a swarm: what this instance's running jobs reserve on it,
/// of what the node has (`ps --usage` on a swarm). The swarm's manager
/// cannot sample a container on another node, so this is the scheduler's
/// bookkeeping, not a measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeLoad {
    pub node: String,
    /// The swarm's word for it: `ready`, `down`, …
    pub state: String,
    pub jobs: usize,
    pub cpus_reserved: f64,
    pub cpus: f64,
    pub memory_reserved: u64,
    pub memory: u64,
}

/// The serializable record of a job: what every interface shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobInfo {
    pub id: JobId,
    pub label: String,
    pub command: String,
    pub spec: JobSpec,
    /// Resolved runner (None while queued and not yet resolved).
    pub runner: Option<RunnerKind>,
    /// Why the runner is not the one asked for: `auto` found no engine and
    /// ran the job on the host, unsandboxed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_note: Option<String>,
    /// The workspace the job ran in: the directory of the caller's
    /// `berth.toml`, else the caller's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// Settings of the caller's project that the running manager did not
    /// apply because they belong to the whole instance (`max_jobs` …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_note: Option<String>,
    /// Set on a job a restarted manager took over from a dead one (recovery
    /// mode `adopt`): it kept running and its output was followed on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recovered: bool,
    pub status: JobStatus,
    pub start_mode: StartMode,
    pub created_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_by: Option<EndedBy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why the job is in the background, if it was promoted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
    /// The cluster node the job runs on (`runner = "swarm"`): name and address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<PortMapping>,
    #[serde(default)]
    pub limits: AppliedLimits,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    pub logs: LogPaths,
    /// Seq of the last output line (0 = no output yet).
    pub last_seq: u64,
    /// Place in line while queued for a slot of the cap (1 = next).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_position: Option<usize>,
    /// Container jobs: the image it ran in, why that one, how long a pull took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<super::ImageChoice>,
    /// While starting: the image pull under way (status `starting (pulling)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pulling: Option<super::PullProgress>,
    /// While starting: the project image build under way (status `starting (building)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub building: Option<super::BuildProgress>,
    /// After a container job: files in the workspace whose set-uid/set-gid
    /// bits berth cleared when the job ended (0 when there were none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setid_cleared: Option<u64>,
    /// Watch hits over the job's budget (a few per second): counted here
    /// and in `watch_dropped` events, not stored one by one.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub watch_hits_dropped: u64,
    /// Set when the store could not be written while the job ran: since
    /// when, why, and that lines lost meanwhile are marked in its logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_note: Option<String>,
    /// Containers the job started through its scoped engine, as last seen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<super::ChildInfo>,
    /// How the job writes its workspace (its layer, and once ended what
    /// the layer holds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<super::Writes>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl JobInfo {
    /// Runtime so far (running) or in total (ended).
    pub fn runtime(&self) -> Option<chrono::Duration> {
        self.runtime_at(Utc::now())
    }

    /// [`JobInfo::runtime`] against `now` (so a view renders the same in tests).
    pub fn runtime_at(&self, now: DateTime<Utc>) -> Option<chrono::Duration> {
        Some(self.ended_at.unwrap_or(now) - self.started_at?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records and answers carry the cause's kind beside its words, and are
    /// read back by the kind; a record from before kinds were stored is read
    /// from its words; a client cannot pass for the system.
    #[test]
    fn stop_causes_are_stored_as_kinds_and_old_records_still_read() {
        let causes = [
            StopCause::Requested("killed by user".into()),
            StopCause::Interrupted,
            StopCause::StdoutClosed,
            StopCause::Shutdown,
            StopCause::SessionEnded,
            StopCause::KeepAliveExpired { secs: 2.5 },
            StopCause::TimedOut { secs: 60.0 },
            StopCause::Oom,
        ];
        for cause in causes {
            let status = JobStatus::Killed {
                signal: Some(15),
                ended_by: EndedBy::System,
                reason: cause.clone(),
            };
            let json = serde_json::to_value(&status).unwrap();
            assert_eq!(
                json["reason"],
                serde_json::Value::String(cause.to_string()),
                "{json}"
            );
            assert_eq!(
                json["cause"],
                serde_json::to_value(cause.kind()).unwrap(),
                "{json}"
            );
            assert_eq!(serde_json::from_value::<JobStatus>(json.clone()).unwrap(), status);
            // Read by its kind, not its words.
            let mut reworded = json.clone();
            reworded["reason"] = "something else".into();
            let back: JobStatus = serde_json::from_value(reworded).unwrap();
            match back {
                JobStatus::Killed { reason, .. } if !matches!(cause, StopCause::Requested(_)) => {
                    assert_eq!(reason, cause)
                }
                JobStatus::Killed { reason, .. } => {
                    assert_eq!(reason, StopCause::Requested("something else".into()))
                }
                other => panic!("{other:?}"),
            }
            // A record written before kinds were stored.
            let mut old = json;
            old.as_object_mut().unwrap().remove("cause");
            assert_eq!(serde_json::from_value::<JobStatus>(old).unwrap(), status);
        }
        assert_eq!(
            StopCause::requested("interrupted (Ctrl+C)"),
            StopCause::Interrupted
        );
        assert_eq!(
            StopCause::requested("oom"),
            StopCause::Requested("oom (as asked)".into())
        );
        let killed = JobStatus::Killed {
            signal: Some(9),
            ended_by: EndedBy::User,
            reason: StopCause::requested("shutdown"),
        };
        assert!(!killed.is_failure());
        assert!(
            JobStatus::Killed {
                signal: Some(9),
                ended_by: EndedBy::System,
                reason: StopCause::Oom
            }
            .is_failure()
        );
    }
}
