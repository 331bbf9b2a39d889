//! Drawing the panel: the tab bar with counts, the job table (selection in
//! reverse video with a `>` prefix, scrolled so the selection stays in
//! view), and the two footer lines (notice / Ctrl+R hint, then the keys).
//! Only reads [`App`]; the details and diagnostic screens are in
//! `details.rs`, and both draw their footer with `footer.rs`.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, HighlightSpacing, Paragraph, Row, Table, TableState, Tabs};

use super::app::{App, Screen, Tab};
use super::footer::{key_line, status_lines};
use super::format::{badge, ports_cell, sanitize, time_cell};
use crate::model::JobInfo;

/// The panel's keys, as (key, what it does).
const PANEL_KEYS: &[(&str, &str)] = &[
    ("←/→", "tabs"),
    ("↑/↓", "select"),
    ("Enter", "details"),
    ("k", "kill"),
    ("d", "diagnostic"),
    ("l", "diff"),
    ("r", "resume"),
    ("q", "quit"),
];

/// Draw whatever screen the app is on.
pub fn render(app: &App, frame: &mut Frame) {
    match app.screen() {
        Screen::Panel => panel(app, frame),
        Screen::Pane(pane) => super::details::render(app, pane, frame),
    }
}

fn panel(app: &App, frame: &mut Frame) {
    let status = status_lines(app, frame.area().width);
    let [top, body, status_area, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(status.len() as u16),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    tab_bar(app, frame, top);
    let rows = app.rows(app.tab());
    if rows.is_empty() {
        empty(app.tab(), frame, body);
    } else {
        table(app, &rows, frame, body);
    }
    frame.render_widget(Paragraph::new(status), status_area);
    key_line(PANEL_KEYS, frame, keys);
}

/// `RUNNING (3) │ COMPLETED (2, 1 new) │ FAILED (1)`, then where we are
/// attached on the right (shortened, then dropped, when the tabs need the room).
fn tab_bar(app: &App, frame: &mut Frame, area: Rect) {
    let titles: Vec<Line> = Tab::ALL
        .iter()
        .map(|&t| {
            let rows = app.rows(t);
            let new = rows.iter().filter(|j| app.is_new(&j.id)).count();
            let mut spans = vec![Span::raw(format!("{} ({}", t.title(), rows.len()))];
            if new > 0 {
                spans.push(Span::raw(", "));
                spans.push(Span::styled(format!("{new} new"), Style::new().fg(Color::Yellow)));
            }
            spans.push(Span::raw(")"));
            Line::from(spans)
        })
        .collect();
    // Each title is padded by one space per side; dividers sit between them.
    let tabs_w = titles.iter().map(|t| t.width() + 2).sum::<usize>() + titles.len() - 1;
    let state = if app.connected() {
        Span::styled("live", Style::new().fg(Color::Green))
    } else {
        Span::styled("disconnected, retrying…", Style::new().fg(Color::Red).bold())
    };
    let room = (area.width as usize).saturating_sub(tabs_w + 1);
    let full = Line::from(vec![
        Span::raw(format!("berth · {} · ", app.instance())).dim(),
        state.clone(),
    ]);
    let right = [full, Line::from(state)].into_iter().find(|l| l.width() <= room);
    let right_w = right.as_ref().map_or(0, |l| l.width() as u16);
    let [left, right_area] =
        Layout::horizontal([Constraint::Fill(1), Constraint::Length(right_w)]).areas(area);
    let tabs = Tabs::new(titles)
        .select(app.tab().index())
        .highlight_style(Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD))
        .divider("│");
    frame.render_widget(tabs, left);
    if let Some(right) = right {
        frame.render_widget(Paragraph::new(right), right_area);
    }
}

fn empty(tab: Tab, frame: &mut Frame, area: Rect) {
    let what = match tab {
        Tab::Running => "No running jobs.",
        Tab::Completed => "No completed jobs yet.",
        Tab::Failed => "No failed jobs.",
    };
    let hint = "Jobs started by an agent or with `berth run` appear here live.";
    let [_, mid, _] =
        Layout::vertical([Constraint::Fill(1), Constraint::Length(2), Constraint::Fill(1)]).areas(area);
    let text = vec![Line::from(what).bold(), Line::from(hint).dim()];
    frame.render_widget(Paragraph::new(text).centered(), mid);
}

/// First row to show so the selection stays in view, kept near the middle
/// once the list is longer than the screen.
pub fn scroll_offset(selected: usize, len: usize, height: usize) -> usize {
    if len <= height || height == 0 {
        return 0;
    }
    selected.saturating_sub(height / 2).min(len - height)
}

fn table(app: &App, rows: &[&JobInfo], frame: &mut Frame, area: Rect) {
    let now = app.now();
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|j| {
            [
                j.id.to_string(),
                sanitize(&j.label),
                time_cell(j, now),
                j.runner.map(|r| r.to_string()).unwrap_or_else(|| "-".into()),
                ports_cell(j),
            ]
        })
        .collect();
    let badges: Vec<String> = rows.iter().map(|j| badge(j)).collect();
    let header = ["ID", "COMMAND", "TIME", "RUNNER", "PORTS", "STATUS"];
    let width = |i: usize| {
        let w = cells.iter().map(|c| c[i].chars().count()).max().unwrap_or(0);
        Constraint::Length(w.max(header[i].len()) as u16)
    };
    let badge_w = rows
        .iter()
        .zip(&badges)
        .map(|(j, b)| b.chars().count() + if app.is_new(&j.id) { 4 } else { 0 })
        .max()
        .unwrap_or(0)
        .max(header[5].len());
    let widths = [
        width(0),
        Constraint::Fill(1),
        width(2),
        width(3),
        width(4),
        Constraint::Length(badge_w as u16),
    ];
    let body: Vec<Row> = rows
        .iter()
        .zip(cells)
        .zip(badges)
        .map(|((j, c), b)| {
            let mut status = vec![Span::raw(b)];
            if app.is_new(&j.id) {
                status.push(Span::raw(" "));
                status.push(Span::styled("new", Style::new().fg(Color::Yellow).bold()));
            }
            let [id, cmd, time, runner, ports] = c;
            Row::new([
                Cell::from(id),
                Cell::from(cmd),
                Cell::from(time),
                Cell::from(runner),
                Cell::from(ports),
                Cell::from(Line::from(status)),
            ])
        })
        .collect();
    let height = area.height.saturating_sub(1) as usize; // minus the header
    let selected = app.selected_index().min(rows.len() - 1);
    let mut state = TableState::new()
        .with_offset(scroll_offset(selected, rows.len(), height))
        .with_selected(Some(selected));
    let table = Table::new(body, widths)
        .header(Row::new(header).style(Style::new().dim().bold()))
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol("> ")
        .highlight_spacing(HighlightSpacing::Always)
        // Narrow terminals give the command column every cell they can.
        .column_spacing(if area.width < 100 { 1 } else { 2 });
    frame.render_stateful_widget(table, area, &mut state);
}

#[cfg(test)]
mod tests {
    use super::scroll_offset;

    #[test]
    fn selection_stays_in_view() {
        assert_eq!(scroll_offset(3, 5, 10), 0, "short list: no scrolling");
        assert_eq!(scroll_offset(2, 50, 10), 0);
        assert_eq!(scroll_offset(20, 50, 10), 15, "centred");
        assert_eq!(scroll_offset(49, 50, 10), 40, "bottom stays full");
    }
}
