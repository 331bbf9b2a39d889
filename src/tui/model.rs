//! The job list as the panel sees it: which tab a job belongs to, the order
//! of rows, which events earn a `new` badge, and how an event updates a job
//! record at once (before the refreshed record arrives from the manager, and
//! even when it cannot: a manager shutting down still sends its events).

use crate::events::{Event, EventKind};
use crate::model::{EndedBy, JobId, JobInfo, JobStatus, Outcome, StartMode};

/// The three tabs, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Running,
    Completed,
    Failed,
}

impl Tab {
    pub const ALL: [Tab; 3] = [Tab::Running, Tab::Completed, Tab::Failed];

    /// Active / ran to its end / failed or cut short, as
    /// [`JobInfo::outcome`] groups jobs. Unlike `berth ps --completed`, a
    /// job someone killed (or a shutdown stopped) is not "completed" to the
    /// person watching: it sits with the failures, its badge saying who
    /// ended it. A keep-alive that ran out did what it was asked and is
    /// completed, and so is one its caller stopped (its own outcome,
    /// `stopped`, has no tab of its own here: it is no failure).
    pub fn admits(self, j: &JobInfo) -> bool {
        matches!(
            (self, j.outcome()),
            (Tab::Running, Outcome::Active)
                | (Tab::Completed, Outcome::Completed | Outcome::Stopped)
                | (Tab::Failed, Outcome::Failed)
        )
    }

    pub fn title(self) -> &'static str {
        match self {
            Tab::Running => "RUNNING",
            Tab::Completed => "COMPLETED",
            Tab::Failed => "FAILED",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn step(self, by: usize) -> Tab {
        Tab::ALL[(self.index() + by) % 3]
    }
}

/// Jobs sort by their number (job-9 before job-10).
pub fn sort_key(id: &JobId) -> (u64, String) {
    let n = id.as_str().strip_prefix("job-").and_then(|n| n.parse().ok());
    (n.unwrap_or(u64::MAX), id.to_string())
}

/// An event a person should notice: an end by a user or the system (kill,
/// OOM, timeout, shutdown), a failure, or an automatic promotion.
pub fn noteworthy(kind: &EventKind) -> bool {
    match kind {
        EventKind::Ended { ended_by, status, .. } => {
            matches!(ended_by, Some(EndedBy::User | EndedBy::System))
                || !matches!(status.as_str(), "success" | "killed")
        }
        EventKind::Promoted { by, .. } => *by == EndedBy::System,
        EventKind::StoreDegraded { .. } => true,
        _ => false,
    }
}

/// Apply what `e` says to `info` (a job the manager will send again anyway).
pub fn patch(info: &mut JobInfo, e: &Event) {
    if info.status.is_terminal() {
        return; // an ended job's record is final
    }
    match &e.kind {
        EventKind::Started {
            runner,
            start_mode,
            ports,
        } => {
            info.status = JobStatus::Running;
            info.runner = Some(*runner);
            info.start_mode = *start_mode;
            info.ports = ports.clone();
            info.started_at.get_or_insert(e.ts);
        }
        EventKind::Promoted { by, reason } => {
            info.start_mode = StartMode::Promoted(*by);
            info.promotion_reason = Some(reason.clone());
        }
        EventKind::Ended {
            status,
            ended_by,
            exit_code,
            reason,
            cause,
            ..
        } => {
            info.status = JobStatus::from_ended(status, *ended_by, *exit_code, reason.clone(), *cause);
            info.ended_at = Some(e.ts);
            info.ended_by = *ended_by;
            info.exit_code = *exit_code;
            info.reason = reason.clone();
        }
        EventKind::WatchDropped { total, .. } => info.watch_hits_dropped = *total,
        _ => {}
    }
}
