//! Something that happened to a job ([`Event`], [`EventKind`]): one stream
//! with a global `seq`. The log that numbers, keeps and broadcasts them is
//! `events.rs`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{EndedBy, JobId, JobInfo, JobStatus, PortMapping, RunnerKind, StartMode, Stream};

/// Something that happened to a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub seq: u64,
    pub ts: DateTime<Utc>,
    pub job: JobId,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    Queued,
    /// `runner = auto` found no engine and the job runs on the host, unsandboxed.
    Fallback {
        note: String,
    },
    /// The job's image is being pulled (at most a few per second while it lasts).
    Pulling(super::PullProgress),
    /// The job's project image is being built from its Dockerfile (at most a few per second).
    Building(super::BuildProgress),
    Started {
        runner: RunnerKind,
        start_mode: StartMode,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ports: Vec<PortMapping>,
    },
    Ready {
        elapsed_ms: u64,
    },
    WatchHit {
        /// Seq of the matching output line (the event has its own `seq`).
        line_seq: u64,
        stream: Stream,
        line: String,
        pattern: String,
    },
    /// Watch hits over the job's budget were counted, not stored: `count`
    /// since the last such event, `total` for the job so far (at most one
    /// a second while it lasts, and one when the output ends).
    WatchDropped {
        count: u64,
        total: u64,
    },
    Promoted {
        by: EndedBy,
        reason: String,
    },
    /// The job's egress proxy refused a request (also in the security log).
    EgressDenied {
        /// `CONNECT evil.example:443`, `GET pypi.org:8080`.
        request: String,
        reason: String,
    },
    /// The job ended, however it ended.
    Ended {
        /// Final status name: success, failed, killed, timed_out, signaled, lost, start_failed.
        status: String,
        start_mode: StartMode,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ended_by: Option<EndedBy>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// A stopped job's cause, as a kind (its words are `reason`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<super::CauseKind>,
    },
    /// After the job ended (and was answered), the set-uid/set-gid bits it
    /// left in a workspace other users can reach were cleared: `cleared`
    /// files of `entries` looked at; `incomplete` when the walk stopped at
    /// its bound. Only for jobs that wrote such a workspace directly.
    Swept {
        cleared: u64,
        entries: u64,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        incomplete: bool,
    },
    /// The store cannot be written (a full or failing disk): the job runs
    /// on, its newest output held in memory; older lines may be lost (reads
    /// say where). Sent to every job under way when it happens.
    StoreDegraded {
        reason: String,
    },
    /// The store can be written again: what was held is stored.
    StoreRecovered,
}

impl EventKind {
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Queued => "queued",
            EventKind::Fallback { .. } => "fallback",
            EventKind::Pulling(_) => "pulling",
            EventKind::Building(_) => "building",
            EventKind::Started { .. } => "started",
            EventKind::Ready { .. } => "ready",
            EventKind::WatchHit { .. } => "watch_hit",
            EventKind::WatchDropped { .. } => "watch_dropped",
            EventKind::Promoted { .. } => "promoted",
            EventKind::EgressDenied { .. } => "egress_denied",
            EventKind::Ended { .. } => "ended",
            EventKind::Swept { .. } => "swept",
            EventKind::StoreDegraded { .. } => "store_degraded",
            EventKind::StoreRecovered => "store_recovered",
        }
    }
}

// The ended event is made here, where events are, so that `status` (the job's
// state) needs nothing from `event`: `event` already names `EndedBy` and
// `StartMode`, and the two would otherwise make a ring.
impl JobInfo {
    /// Record the end of the job: the status and, derived from it and set
    /// here only, `ended_at`, `exit_code`, `ended_by` and `reason`. Returns
    /// the job's one `ended` event.
    pub fn end(&mut self, status: JobStatus, at: DateTime<Utc>) -> EventKind {
        self.ended_at = Some(at);
        self.exit_code = status.exit_code();
        self.ended_by = status.ended_by();
        self.reason = status.reason();
        self.status = status;
        let cause = match &self.status {
            JobStatus::Killed { reason, .. } => Some(reason.kind()),
            _ => None,
        };
        EventKind::Ended {
            status: self.status.name().into(),
            start_mode: self.start_mode,
            ended_by: self.ended_by,
            exit_code: self.exit_code,
            reason: self.reason.clone(),
            cause,
        }
    }
}
