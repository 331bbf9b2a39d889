//! Drawing one job: the details screen (the shared card of DESIGN §9 as its
//! header, then mode, timing, limits and usage, then the scrollable log) and
//! the diagnostic screen (the newest lines, full screen). The log's state
//! and scrolling are in `logpane.rs`; this file only draws them.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use super::app::App;
use super::footer::{key_line, status_lines};
use super::format::{bytes, clock, eta, is_foreground, runtime, sanitize, secs, time_of_day};
use super::logpane::{DIAGNOSTIC_LINES, LogPane, PaneKind};
use crate::card::{self, Light};
use crate::model::{JobInfo, OnTimeout, StartMode};
use crate::output::Stream;

const PANE_KEYS: &[(&str, &str)] = &[
    ("↑/↓ PgUp/PgDn Home/End", "scroll"),
    ("c", "copy"),
    ("k", "kill"),
    ("r", "resume"),
    ("l", "diff"),
    ("q/Esc", "back"),
];

/// Draw the details or diagnostic screen of `pane`'s job.
pub fn render(app: &App, pane: &LogPane, frame: &mut Frame) {
    let head = match (pane.kind, app.job(&pane.job)) {
        (_, None) => vec![Line::from(format!(" loading {}…", pane.job)).dim()],
        (PaneKind::Details, Some(info)) => {
            let mut lines = card_lines(info, app.snippet(&info.id));
            lines.extend(facts(app, info));
            lines
        }
        (PaneKind::Diagnostic, Some(info)) => vec![diagnostic_title(info)],
        (PaneKind::Layer, Some(info)) => vec![layer_title(info)],
    };
    let status = status_lines(app, frame.area().width);
    let [top, log, status_area, keys] = Layout::vertical([
        Constraint::Length(head.len() as u16),
        Constraint::Min(3),
        Constraint::Length(status.len() as u16),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(Paragraph::new(head), top);
    log_view(app, pane, frame, log);
    frame.render_widget(Paragraph::new(status), status_area);
    key_line(PANE_KEYS, frame, keys);
}

/// The card, as every interface shows it, with its dot coloured and its
/// last log lines dimmed; a running foreground job also gets the Ctrl+R hint.
pub fn card_lines(info: &JobInfo, snippet: &str) -> Vec<Line<'static>> {
    let text = card::render(info, snippet, false);
    let dot = match card::light(&info.status) {
        Light::Green => Color::Green,
        Light::Gray => Color::DarkGray,
        Light::Red => Color::Red,
    };
    let mut lines = Vec::new();
    let mut in_log = false;
    for (i, raw) in text.lines().enumerate() {
        let raw = sanitize(raw);
        if i == 0 {
            let rest = raw.strip_prefix('●').unwrap_or(&raw).to_string();
            lines.push(Line::from(vec![
                Span::styled("●", Style::new().fg(dot)),
                Span::raw(rest).bold(),
            ]));
        } else if in_log {
            lines.push(Line::from(raw).dim());
        } else {
            in_log = raw.trim_start().starts_with("Last log:");
            lines.push(Line::from(raw));
        }
    }
    if is_foreground(info) {
        lines.push(Line::from(Span::styled(
            "    Ctrl+R → background",
            Style::new().fg(Color::Yellow).bold(),
        )));
    }
    lines
}

/// Mode, timing, limits and usage under the card.
fn facts(app: &App, info: &JobInfo) -> Vec<Line<'static>> {
    let now = app.now();
    let at = |t: Option<chrono::DateTime<chrono::Utc>>| {
        t.map(|t| time_of_day(t, app.utc_offset()))
            .unwrap_or_else(|| "-".into())
    };
    let mut mode = match info.start_mode {
        StartMode::Foreground if info.status.is_active() => {
            let then = match info.spec.on_timeout {
                OnTimeout::Background => "then background",
                OnTimeout::Kill => "then killed",
            };
            match (info.spec.timeout, eta(info, now)) {
                (Some(t), Some(left)) => {
                    format!("foreground · budget {}, ETA {} ({then})", secs(t), clock(left))
                }
                _ => "foreground".into(),
            }
        }
        other => other.to_string(),
    };
    if let Some(pid) = info.pid {
        mode += &format!(" · pid {pid}");
    }
    let mut time = format!(
        "created {} · started {} · ended {}",
        at(Some(info.created_at)),
        at(info.started_at),
        at(info.ended_at)
    );
    if let Some(d) = runtime(info, now) {
        time += &format!(" · runtime {}", clock(d));
    }
    let l = &info.limits;
    let mut limits: Vec<String> = Vec::new();
    if let Some(c) = l.cpus {
        limits.push(format!("cpus {c}"));
    }
    if let Some(m) = l.memory {
        limits.push(format!("memory {}", bytes(m)));
    }
    if let Some(p) = l.pids {
        limits.push(format!("pids {p}"));
    }
    // What was not enforced is on the card above (its `Note:` lines).
    let limits = if limits.is_empty() {
        "none".to_string()
    } else {
        limits.join(", ")
    };
    let fact = |k: &str, v: String| Line::from(vec![Span::raw(format!("  {k}: ")).dim(), Span::raw(v)]);
    let mut lines = vec![fact("Mode", mode), fact("Time", time), fact("Limits", limits)];
    if let Some(u) = &info.usage {
        lines.push(fact(
            "Usage",
            format!("cpu {:.1}% · memory {}", u.cpu_percent, bytes(u.memory_bytes)),
        ));
    }
    lines
}

fn diagnostic_title(info: &JobInfo) -> Line<'static> {
    Line::from(format!(
        " Diagnostic · {} · {} · {} ",
        info.id,
        sanitize(&info.label),
        card::status_text(info)
    ))
    .reversed()
    .bold()
}

fn layer_title(info: &JobInfo) -> Line<'static> {
    let what = card::writes_text(info).unwrap_or_else(|| "no layer".into());
    Line::from(format!(" Layer · {} · {} ", info.id, sanitize(&what)))
        .reversed()
        .bold()
}

fn log_view(app: &App, pane: &LogPane, frame: &mut Frame, area: Rect) {
    let inner = Block::bordered().inner(area);
    let height = inner.height as usize;
    app.log_height.set(height);
    let range = pane.window(height);
    frame.render_widget(Block::bordered().title(log_title(pane, range.clone())), area);
    if pane.lines().is_empty() {
        let what = if pane.loaded() {
            "(no output yet)"
        } else {
            "loading…"
        };
        frame.render_widget(Paragraph::new(Line::from(what).dim()), inner);
        return;
    }
    let digits = pane.lines().back().map_or(1, |l| l.seq.to_string().len());
    let lines: Vec<Line> = pane
        .lines()
        .range(range)
        .map(|l| {
            let text = sanitize(&l.text);
            let text = match l.stream {
                Stream::Stdout => Span::raw(text),
                Stream::Stderr => Span::styled(text, Style::new().fg(Color::LightRed)),
            };
            Line::from(vec![Span::raw(format!("{:>digits$} ", l.seq)).dim(), text])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

/// ` Log · job-3 · lines 381–400 of 400 · following `
fn log_title(pane: &LogPane, shown: std::ops::Range<usize>) -> String {
    let what = match pane.kind {
        PaneKind::Details => format!("Log · {}", pane.job),
        PaneKind::Diagnostic => format!("Last {DIAGNOSTIC_LINES} lines · {}", pane.job),
        PaneKind::Layer => format!("Layer diff · {}", pane.job),
    };
    let state = if !pane.loaded() {
        "loading"
    } else if !pane.following() {
        "scrolled, End follows"
    } else if pane.ended() {
        "job ended"
    } else {
        "following"
    };
    let lines = pane.lines();
    let span = match (
        lines.get(shown.start),
        shown.end.checked_sub(1).and_then(|i| lines.get(i)),
        lines.back(),
    ) {
        (Some(a), Some(b), Some(last)) => format!(" · lines {}–{} of {}", a.seq, b.seq, last.seq),
        _ => String::new(),
    };
    format!(" {what}{span} · {state} ")
}
