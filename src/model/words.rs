//! The words for where a job is and how it ended, and for how long, in one
//! place for every face: the status an `ended` event names read back into a
//! [`JobStatus`] (the inverse of [`JobStatus::name`]; the TUI patches its
//! rows with it), the few words of an end ([`end_words`]: MCP answers and
//! event lines), and the two duration formats ([`clock`] for tables and
//! cards, [`elapsed`] for running text). The card's status line is
//! `card::status_text`, built on the same [`JobStatus`].

use chrono::Duration;

use super::{CauseKind, EndedBy, JobInfo, JobStatus, StopCause};

impl JobStatus {
    /// The final status an `ended` event names by [`JobStatus::name`], with
    /// the event's who, code, reason and cause; any other name is a kill.
    pub fn from_ended(
        name: &str,
        by: Option<EndedBy>,
        code: Option<i32>,
        reason: Option<String>,
        cause: Option<CauseKind>,
    ) -> JobStatus {
        let reason = reason.unwrap_or_default();
        match name {
            "success" => JobStatus::Exited { code: 0 },
            "failed" => JobStatus::Exited {
                code: code.unwrap_or(1),
            },
            "signaled" => JobStatus::Signaled {
                signal: code.map_or(0, |c| c - 128),
            },
            "timed_out" => JobStatus::TimedOut,
            "lost" => JobStatus::Lost { reason },
            "start_failed" => JobStatus::StartFailed { error: reason },
            _ => JobStatus::Killed {
                signal: code.and_then(|c| (c > 128).then_some(c - 128)),
                ended_by: by.unwrap_or(EndedBy::Agent),
                reason: StopCause::read(cause, &reason),
            },
        }
    }
}

/// How a job ended, in a few words, from the status name an `ended` event
/// or a record carries: `success (exit 0)`, `killed by user (exit 143)`, …
pub fn end_words(
    status: &str,
    ended_by: Option<EndedBy>,
    exit_code: Option<i32>,
    reason: Option<&str>,
) -> String {
    let exit = exit_code.map(|c| format!(" (exit {c})")).unwrap_or_default();
    match status {
        "success" | "failed" => format!("{status}{exit}"),
        "killed" => {
            let by = ended_by
                .map(|b| b.to_string())
                .unwrap_or_else(|| "someone".into());
            let plain = format!("killed by {by}");
            match reason {
                Some(r) if !r.is_empty() && r != plain => format!("{plain}: {r}{exit}"),
                _ => format!("{plain}{exit}"),
            }
        }
        "timed_out" => format!("timed out{exit}"),
        "signaled" => format!("{}{exit}", reason.unwrap_or("died of a signal")),
        "start_failed" => format!("failed to start: {}", reason.unwrap_or("unknown error")),
        other => match reason {
            Some(r) => format!("{other}: {r}{exit}"),
            None => format!("{other}{exit}"),
        },
    }
}

impl JobInfo {
    /// [`end_words`] for this record.
    pub fn end_words(&self) -> String {
        end_words(
            self.status.name(),
            self.ended_by,
            self.exit_code,
            self.reason.as_deref(),
        )
    }
}

/// `mm:ss`, or `h:mm:ss` from an hour on (runtimes, ETAs: tables, cards).
pub fn clock(d: Duration) -> String {
    let s = d.num_seconds().max(0);
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{:02}:{:02}", s / 60, s % 60)
    }
}

/// Seconds in running text: `1.2s`, `3m04s`.
pub fn elapsed(secs: f64) -> String {
    if secs < 60.0 {
        format!("{secs:.1}s")
    } else {
        let s = secs.round() as u64;
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_words_read_well() {
        assert_eq!(end_words("success", None, Some(0), None), "success (exit 0)");
        assert_eq!(
            end_words("killed", Some(EndedBy::User), Some(143), Some("killed by user")),
            "killed by user (exit 143)"
        );
        assert_eq!(
            end_words("killed", Some(EndedBy::System), None, Some("shutdown")),
            "killed by system: shutdown"
        );
        assert_eq!(
            end_words("timed_out", None, Some(124), None),
            "timed out (exit 124)"
        );
    }

    #[test]
    fn durations_in_their_two_formats() {
        assert_eq!(clock(Duration::seconds(103)), "01:43");
        assert_eq!(clock(Duration::seconds(3723)), "1:02:03");
        assert_eq!(elapsed(1.25), "1.2s");
        assert_eq!(elapsed(184.0), "3m04s");
    }

    /// An `ended` event's name reads back to the status that gave it.
    #[test]
    fn ended_events_name_the_status() {
        let back = |s: JobStatus| {
            let (code, by, reason) = (s.exit_code(), s.ended_by(), s.reason());
            let cause = match &s {
                JobStatus::Killed { reason, .. } => Some(reason.kind()),
                _ => None,
            };
            JobStatus::from_ended(s.name(), by, code, reason, cause)
        };
        for s in [
            JobStatus::Exited { code: 0 },
            JobStatus::Exited { code: 3 },
            JobStatus::TimedOut,
            JobStatus::Signaled { signal: 9 },
            JobStatus::Lost {
                reason: "gone".into(),
            },
            JobStatus::StartFailed { error: "no".into() },
            JobStatus::Killed {
                signal: Some(15),
                ended_by: EndedBy::User,
                reason: "killed by user".into(),
            },
            JobStatus::Killed {
                signal: None,
                ended_by: EndedBy::System,
                reason: StopCause::Oom,
            },
        ] {
            assert_eq!(back(s.clone()), s);
        }
    }

    /// A record from before causes were stored: the reason's words say it.
    #[test]
    fn ended_events_without_a_cause_read_their_words() {
        let killed = JobStatus::from_ended(
            "killed",
            Some(EndedBy::User),
            Some(143),
            Some("killed by user".into()),
            None,
        );
        assert_eq!(
            killed,
            JobStatus::Killed {
                signal: Some(15),
                ended_by: EndedBy::User,
                reason: "killed by user".into()
            }
        );
        let oom = JobStatus::from_ended("killed", Some(EndedBy::System), None, Some("oom".into()), None);
        assert!(oom.is_failure());
        assert_eq!(
            JobStatus::from_ended("failed", None, None, None, None),
            JobStatus::Exited { code: 1 }
        );
    }
}
