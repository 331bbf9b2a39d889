//! Tests of the panel without a manager or a real terminal: jobs are built
//! by hand with fixed timestamps (this file), keys and answers are fed to
//! [`App`] (`behaviour.rs`), and screens are drawn on ratatui's `TestBackend`
//! and compared with the committed snapshots in `snapshots/` (`screens.rs`).

mod behaviour;
mod screens;

use chrono::{DateTime, Duration, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::Modifier;

use super::app::{Action, App, Msg, Screen, Tab};
use super::logpane::PaneKind;
use crate::api::JobView;
use crate::events::{Event, EventKind};
use crate::model::{
    AppliedLimits, EndedBy, JobId, JobInfo, JobSpec, JobStatus, LogPaths, PortMapping, RunnerKind, StartMode,
    Usage,
};
use crate::output::{Line, LogPage, Stream};

pub fn now() -> DateTime<Utc> {
    "2025-06-01T12:00:00Z".parse().unwrap()
}

pub fn ago(secs: i64) -> DateTime<Utc> {
    now() - Duration::seconds(secs)
}

/// A job started `started` seconds before [`now`].
pub fn job(n: u64, cmd: &str, status: JobStatus, mode: StartMode, started: i64) -> JobInfo {
    let id = JobId::from_number(n);
    let mut spec = JobSpec::shell(cmd);
    if mode != StartMode::Background {
        spec.timeout = Some(60.0);
    }
    let ended = status.is_terminal().then(|| ago(started - 30));
    JobInfo {
        id: id.clone(),
        label: cmd.into(),
        command: cmd.into(),
        runner: Some(RunnerKind::Host),
        runner_note: None,
        workspace: None,
        project_note: None,
        recovered: false,
        watch_hits_dropped: 0,
        children: Vec::new(),
        writes: None,
        exit_code: status.exit_code(),
        ended_by: status.ended_by(),
        reason: status.reason(),
        status,
        start_mode: mode,
        created_at: ago(started + 1),
        started_at: Some(ago(started)),
        ended_at: ended,
        promotion_reason: None,
        pid: Some(4000 + n as u32),
        container_id: None,
        node: None,
        ports: Vec::new(),
        limits: AppliedLimits::default(),
        usage: None,
        logs: LogPaths {
            stdout: format!("/state/jobs/{id}/stdout.log").into(),
            stderr: format!("/state/jobs/{id}/stderr.log").into(),
        },
        spec,
        last_seq: 0,
        queue_position: None,
        image: None,
        pulling: None,
        building: None,
        setid_cleared: None,
        store_note: None,
    }
}

pub fn killed(by: EndedBy, reason: &str) -> JobStatus {
    JobStatus::Killed {
        signal: Some(15),
        ended_by: by,
        reason: reason.into(),
    }
}

/// Jobs in every tab, two of them with a `new` badge.
pub fn mixed() -> App {
    let mut dev = job(1, "npm run dev", JobStatus::Running, StartMode::Background, 103);
    dev.runner = Some(RunnerKind::Docker);
    dev.ports.push(PortMapping {
        port: 3000,
        proto: crate::model::Proto::Tcp,
        host_ip: "127.0.0.1".into(),
        host_port: 49153,
        note: None,
        listen: None,
    });
    let mut promoted = job(
        2,
        "sleep 120",
        JobStatus::Running,
        StartMode::Promoted(EndedBy::System),
        100,
    );
    promoted.promotion_reason = Some("auto background (60s budget exceeded)".into());
    let jobs = vec![
        dev,
        promoted,
        job(
            3,
            "echo done",
            JobStatus::Exited { code: 0 },
            StartMode::Foreground,
            300,
        ),
        job(4, "cargo test", JobStatus::Running, StartMode::Foreground, 17),
        job(
            5,
            "python countdown.py",
            killed(EndedBy::User, "killed by user"),
            StartMode::Background,
            200,
        ),
        job(
            6,
            "make build",
            JobStatus::Exited { code: 1 },
            StartMode::Background,
            500,
        ),
        job(
            7,
            "node server.js",
            killed(EndedBy::System, "oom"),
            StartMode::Background,
            400,
        ),
    ];
    let mut app = App::new("default", now() - Duration::seconds(5));
    app.apply(Msg::Jobs(jobs));
    app.tick(now());
    event(
        &mut app,
        2,
        EventKind::Promoted {
            by: EndedBy::System,
            reason: "auto background".into(),
        },
    );
    event(&mut app, 5, ended("killed", Some(EndedBy::User)));
    app
}

pub fn ended(status: &str, by: Option<EndedBy>) -> EventKind {
    EventKind::Ended {
        status: status.into(),
        start_mode: StartMode::Background,
        ended_by: by,
        exit_code: None,
        reason: None,
        cause: None,
    }
}

pub fn event(app: &mut App, job: u64, kind: EventKind) -> Action {
    app.apply(Msg::Event(Box::new(Event {
        seq: 1,
        ts: now(),
        job: JobId::from_number(job),
        kind,
    })))
}

pub fn press(app: &mut App, code: KeyCode) -> Action {
    app.handle_key(KeyEvent::new(code, KeyModifiers::NONE))
}

pub fn ctrl_r(app: &mut App) -> Action {
    app.handle_key(KeyEvent::new(KeyCode::Char('r'), KeyModifiers::CONTROL))
}

pub fn draw(app: &App, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(width, height)).unwrap();
    t.draw(|f| crate::tui::view::render(app, f)).unwrap();
    t
}

pub fn log_page(lines: std::ops::RangeInclusive<u64>) -> LogPage {
    let last = *lines.end();
    LogPage {
        lines: lines
            .map(|seq| Line {
                seq,
                stream: if seq % 7 == 0 {
                    Stream::Stderr
                } else {
                    Stream::Stdout
                },
                ts: now(),
                text: if seq % 7 == 0 {
                    format!("warning: step {seq} was slow")
                } else {
                    format!("step {seq} ok")
                },
            })
            .collect(),
        next_seq: last + 1,
        has_more: false,
        last_seq: last,
        first_available_seq: 1,
        truncated_before: None,
        lost: Vec::new(),
    }
}
