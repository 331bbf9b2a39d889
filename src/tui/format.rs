//! Text the panel shows for a job: the table's cells (time, badge, ports),
//! clocks and sizes, and [`sanitize`] (`crate::inert::for_cell`), which every
//! piece of job-controlled text (commands, labels, log lines) goes through
//! before it reaches a cell.
//! Everything takes `now` as an argument so the same job always renders the
//! same way in tests.

use chrono::{DateTime, Duration, FixedOffset, Utc};

use crate::model::{EndedBy, JobInfo, JobStatus, StartMode, StopCause};

/// `01:43`, or `1:02:03` past an hour.
pub use crate::card::{bytes, clock};

/// A running job that still blocks its caller (the one Ctrl+R can release).
pub fn is_foreground(info: &JobInfo) -> bool {
    info.status.is_active() && info.start_mode == StartMode::Foreground
}

/// What is left of a foreground job's budget: started_at + spec.timeout - now.
pub fn eta(info: &JobInfo, now: DateTime<Utc>) -> Option<Duration> {
    if !is_foreground(info) {
        return None;
    }
    let budget = Duration::milliseconds((info.spec.timeout? * 1000.0) as i64);
    let left = info.started_at? + budget - now;
    Some(left.max(Duration::zero()))
}

/// Runtime so far (running) or in total (ended), against `now`.
pub fn runtime(info: &JobInfo, now: DateTime<Utc>) -> Option<Duration> {
    info.runtime_at(now)
}

/// The TIME cell: `ETA 00:43` for a foreground job, else the runtime.
pub fn time_cell(info: &JobInfo, now: DateTime<Utc>) -> String {
    if let Some(left) = eta(info, now) {
        return format!("ETA {}", clock(left));
    }
    runtime(info, now).map(clock).unwrap_or_else(|| "-".into())
}

/// Seconds as a person writes them: `60s`, `1.5s`.
pub fn secs(s: f64) -> String {
    format!("{s}s")
}

/// The badge saying why a job is where it is: `[foreground]`,
/// `[auto background · 60s]`, `[killed by user]`, `[exit 1]`, …
pub fn badge(info: &JobInfo) -> String {
    match &info.status {
        JobStatus::Queued => "[queued]".into(),
        JobStatus::Starting => "[starting]".into(),
        JobStatus::Running => match info.start_mode {
            StartMode::Foreground => "[foreground]".into(),
            StartMode::Background => "[background]".into(),
            StartMode::Promoted(EndedBy::System) => match info.spec.timeout {
                Some(t) => format!("[auto background · {}]", secs(t)),
                None => "[auto background]".into(),
            },
            StartMode::Promoted(by) => format!("[background by {by}]"),
        },
        JobStatus::Exited { code } => format!("[exit {code}]"),
        JobStatus::Signaled { signal } => format!("[signal {signal}]"),
        JobStatus::Killed {
            reason: StopCause::Oom,
            ..
        } => "[out of memory]".into(),
        JobStatus::Killed {
            reason: StopCause::KeepAliveExpired { .. },
            ..
        } => "[keep-alive ended]".into(),
        JobStatus::Killed {
            ended_by: EndedBy::System,
            reason: StopCause::Shutdown,
            ..
        } => "[shutdown]".into(),
        JobStatus::Killed { ended_by, .. } => format!("[killed by {ended_by}]"),
        JobStatus::TimedOut => "[timed out]".into(),
        JobStatus::Lost { .. } => "[lost]".into(),
        JobStatus::StartFailed { .. } => "[failed to start]".into(),
    }
}

/// Ports for a table cell: `:49153→3000`. The host side is always
/// 127.0.0.1, so the address is left to the details view to save width.
pub fn ports_cell(info: &JobInfo) -> String {
    // A host job has no mapping: the port it serves on.
    let host = info.runner == Some(crate::model::RunnerKind::Host);
    info.ports
        .iter()
        .map(|m| match host {
            true => format!(":{}", m.host_port),
            false => format!(":{}→{}", m.host_port, m.port),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `12:00:01` in the viewer's time zone (an offset, so tests can pin it).
pub fn time_of_day(t: DateTime<Utc>, offset: FixedOffset) -> String {
    t.with_timezone(&offset).format("%H:%M:%S").to_string()
}

/// Job-controlled text made safe for a cell (one function for every
/// face: `crate::inert`).
pub use crate::inert::for_cell as sanitize;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_and_sizes() {
        assert_eq!(clock(Duration::seconds(103)), "01:43");
        assert_eq!(clock(Duration::seconds(3723)), "1:02:03");
        assert_eq!(clock(Duration::seconds(-5)), "00:00");
        assert_eq!(bytes(900), "900 B");
        assert_eq!(bytes(256 << 20), "256 MiB");
        assert_eq!(bytes(1536 << 20), "1.5 GiB");
        assert_eq!(secs(60.0), "60s");
        assert_eq!(secs(1.5), "1.5s");
    }
}
