//! How a job turned out, as the lists that group jobs (the TUI's tabs, the
//! shell tool set's `shell_summary`) group them: one decision, so a job is
//! a failure in every list or in none.
//!
//! A kill is a failure to the person watching (someone cut the job short)
//! unless the job was only ever meant to end that way: a `keep_alive` job
//! (a server held up for a while) that ran out of time did what it was
//! asked (completed), and one its caller stopped before that (a kill, a
//! stop, `berth down`, its session's end) was ended by the hand that held
//! it up: stopped, not failed. Out of memory stays a failure whoever held it.

use super::{JobInfo, JobStatus, StopCause};

/// Where a job is listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Queued, starting or running.
    Active,
    /// Ran to its end well: exit 0, or a `keep_alive` that ran out.
    Completed,
    /// A `keep_alive` job its caller stopped before its time ran out.
    Stopped,
    /// A non-zero exit, a crash, a timeout, a failed start, lost, out of
    /// memory, or a kill of a job that was not kept alive.
    Failed,
}

impl JobInfo {
    /// How this job turned out (see the module doc).
    pub fn outcome(&self) -> Outcome {
        let kept_alive = self.spec.keep_alive.is_some();
        match &self.status {
            s if s.is_active() => Outcome::Active,
            s if s.is_failure() => Outcome::Failed,
            JobStatus::Killed { reason, .. } => match reason {
                StopCause::KeepAliveExpired { .. } => Outcome::Completed,
                StopCause::Requested(_)
                | StopCause::Interrupted
                | StopCause::Shutdown
                | StopCause::SessionEnded
                    if kept_alive =>
                {
                    Outcome::Stopped
                }
                _ => Outcome::Failed,
            },
            _ => Outcome::Completed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EndedBy;

    fn ended(status: JobStatus, keep_alive: Option<f64>) -> Outcome {
        let mut info: JobInfo = serde_json::from_value(serde_json::json!({
            "id": "job-1", "label": "x", "command": "x", "spec": {"argv": ["x"]},
            "status": {"state": "running"},
            "start_mode": serde_json::to_value(crate::model::StartMode::Background).unwrap(),
            "created_at": "2026-01-01T00:00:00Z",
            "logs": {"stdout": "/o", "stderr": "/e"}, "last_seq": 0,
        }))
        .unwrap();
        info.spec.keep_alive = keep_alive;
        info.status = status;
        info.outcome()
    }

    fn killed(reason: StopCause) -> JobStatus {
        JobStatus::Killed {
            signal: Some(15),
            ended_by: EndedBy::Agent,
            reason,
        }
    }

    #[test]
    fn a_kept_alive_job_its_caller_stopped_is_stopped_not_failed() {
        let asked = || killed(StopCause::Requested("killed by agent".into()));
        assert_eq!(ended(asked(), Some(30.0)), Outcome::Stopped);
        assert_eq!(ended(killed(StopCause::Shutdown), Some(30.0)), Outcome::Stopped);
        assert_eq!(
            ended(killed(StopCause::SessionEnded), Some(30.0)),
            Outcome::Stopped
        );
        assert_eq!(
            ended(killed(StopCause::KeepAliveExpired { secs: 30.0 }), Some(30.0)),
            Outcome::Completed
        );
        // Not kept alive: a kill cut it short, as before.
        assert_eq!(ended(asked(), None), Outcome::Failed);
        // Out of memory, or its layer full, is a failure whoever held it up.
        assert_eq!(ended(killed(StopCause::Oom), Some(30.0)), Outcome::Failed);
        assert_eq!(
            ended(killed(StopCause::LayerFull { limit: 1 }), Some(30.0)),
            Outcome::Failed
        );
        assert_eq!(ended(JobStatus::Exited { code: 1 }, Some(30.0)), Outcome::Failed);
        assert_eq!(ended(JobStatus::Exited { code: 0 }, None), Outcome::Completed);
        assert_eq!(ended(JobStatus::Running, Some(30.0)), Outcome::Active);
    }
}
