//! The footer every screen of the panel ends with: the status lines (the
//! `Ctrl+R → background` hint while a foreground job runs, then the latest
//! notice, wrapped) and the line of keys.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::app::App;

/// Most lines the notice may wrap onto (a copied log's path must stay whole).
const STATUS_LINES: usize = 3;

/// The status lines: while a foreground job runs, the `Ctrl+R → background`
/// hint first; then the latest notice, wrapped rather than cut.
pub fn status_lines(app: &App, width: u16) -> Vec<Line<'static>> {
    let width = (width as usize).max(10);
    let mut first = vec![Span::raw(" ")];
    if app.foreground_running() {
        first.push(Span::styled(
            "Ctrl+R → background",
            Style::new().fg(Color::Yellow).bold(),
        ));
        first.push(Span::raw("  "));
    }
    let used: usize = first.iter().map(|s| s.width()).sum();
    let notice: Vec<char> = app.notice().unwrap_or("").chars().collect();
    let style = Style::new().fg(Color::Cyan);
    let (head, mut rest) = notice.split_at(notice.len().min(width.saturating_sub(used)));
    first.push(Span::styled(head.iter().collect::<String>(), style));
    let mut lines = vec![Line::from(first)];
    while !rest.is_empty() && lines.len() < STATUS_LINES {
        let (chunk, tail) = rest.split_at(rest.len().min(width - 1));
        lines.push(Line::from(vec![
            Span::raw(" "),
            Span::styled(chunk.iter().collect::<String>(), style),
        ]));
        rest = tail;
    }
    lines
}

/// `key what  key what  …`, keys bold (two spaces apart: the panel's seven
/// keys then fit in 80 columns).
pub fn key_line(keys: &[(&str, &str)], frame: &mut Frame, area: Rect) {
    let mut spans = vec![Span::raw(" ")];
    for (i, (key, what)) in keys.iter().enumerate() {
        if i > 0 {
            spans.push(Span::raw("  "));
        }
        spans.push(Span::raw(*key).bold());
        spans.push(Span::raw(format!(" {what}")).dim());
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}
