//! The text of MCP answers: one place for how a job, its end, its output and
//! a list of jobs read to a model. Output given to a model is capped (at most
//! [`MAX_LINES`] lines and [`MAX_BYTES`] bytes, head and tail kept) and every
//! cut says what was left out and which call fetches it. Which call that is
//! depends on the tool set in use: a [`Dialect`] (`dialect.rs`) names it.

pub use super::dialect::Dialect;
use crate::card;
use crate::error::Result;
use crate::manager::Manager;
use crate::model::{JobId, JobInfo};
use crate::output::{Line, LogPage, LogQuery};

/// Most lines of output in one answer.
pub const MAX_LINES: usize = 120;
/// Most bytes of output in one answer.
pub const MAX_BYTES: usize = 16 * 1024;
/// Longest single line shown inside a capped output block.
pub const MAX_LINE_SHOWN: usize = 4 * 1024;

/// How a job ended and for how long: the core's words, the same for every face.
pub use crate::model::{elapsed, end_words};

/// `1.2s`, `3m04s`.
pub fn duration(info: &JobInfo) -> String {
    match info.runtime() {
        Some(d) => elapsed(d.num_milliseconds().max(0) as f64 / 1000.0),
        None => "-".into(),
    }
}

/// A command shortened for one line.
pub fn short(text: &str, max: usize) -> String {
    let one_line = text.replace('\n', " ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        let cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// `port 8080 → http://127.0.0.1:49153` lines, one per published port.
pub fn port_lines(info: &JobInfo) -> String {
    let mut out = String::new();
    for m in &info.ports {
        let note = m.note.as_ref().map(|n| format!(" ({n})")).unwrap_or_default();
        out += &format!("  port {} → {}{note}\n", m.port, m.url());
    }
    out
}

/// `{"8000": "http://127.0.0.1:49153"}`: each published port and its URL.
pub fn port_urls(info: &JobInfo) -> serde_json::Map<String, serde_json::Value> {
    info.ports
        .iter()
        .map(|m| (m.port.to_string(), m.url().into()))
        .collect()
}

/// `  image: berth/dev:latest (pulled in 3.2s)` for container jobs; why
/// that image is on the card (`status`).
/// `  writes: layer mcp-3f… (`apply` to keep)` — where the job's writes go,
/// short (the card says why): an agent must know its files wait in a layer.
pub fn writes_line(info: &JobInfo) -> String {
    let Some(w) = &info.writes else {
        return String::new();
    };
    match (&w.layer, w.mode) {
        (Some(layer), _) => format!("  writes: layer {layer} (`apply` to keep)\n"),
        (None, crate::model::WriteMode::ReadOnly) => "  writes: nothing (read-only)\n".into(),
        (None, _) => "  writes: the checkout\n".into(),
    }
}

pub fn image_line(info: &JobInfo) -> String {
    match &info.image {
        Some(i) => {
            let pulled = match (i.pull_ms, i.build_ms) {
                (Some(ms), _) => format!(" (pulled in {})", elapsed(ms as f64 / 1000.0)),
                (None, Some(ms)) => format!(" (built in {})", elapsed(ms as f64 / 1000.0)),
                (None, None) => String::new(),
            };
            format!("  image: {}{pulled}\n", i.name)
        }
        None => String::new(),
    }
}

/// `  log files: DIR/{stdout,stderr}.log` (each path in full when they are
/// not side by side).
pub fn log_paths(info: &JobInfo) -> String {
    let (out, err) = (&info.logs.stdout, &info.logs.stderr);
    let named = |p: &std::path::Path, n: &str| p.file_name().is_some_and(|f| f == n);
    if out.parent() == err.parent() && named(out, "stdout.log") && named(err, "stderr.log") {
        let dir = out.parent().unwrap_or(std::path::Path::new("."));
        return format!("  log files: {}/{{stdout,stderr}}.log\n", dir.display());
    }
    format!(
        "  log files: {} (stdout), {} (stderr)\n",
        out.display(),
        err.display()
    )
}

/// The card (no colour) for a job with its recent output.
pub fn card(info: &JobInfo, snippet: &str) -> String {
    card::render(info, snippet, false)
}

/// The card without "Last log", for an answer that shows the output after it.
pub fn card_head(info: &JobInfo) -> String {
    card::render_head(info, false)
}

pub fn truncate_line(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[+{} bytes]", &text[..end], text.len() - end)
}

/// A job's whole output, merged in seq order, capped head+tail. Says what was
/// cut and how to read it.
pub async fn output_block(m: &Manager, id: &JobId, dialect: Dialect) -> Result<String> {
    output_within(m, id, dialect, MAX_BYTES).await
}

/// [`output_block`] within `max_bytes` of output (an answer that says more
/// than the output keeps room for it under [`MAX_BYTES`]).
pub async fn output_within(m: &Manager, id: &JobId, dialect: Dialect, max_bytes: usize) -> Result<String> {
    let head = m
        .read_logs(
            id,
            &LogQuery {
                since: Some(1),
                limit: Some(MAX_LINES),
                ..Default::default()
            },
        )
        .await?;
    let mut lines = head.lines;
    if head.has_more {
        lines.truncate(MAX_LINES / 2);
        let tail = m
            .read_logs(
                id,
                &LogQuery {
                    tail: Some(MAX_LINES / 2),
                    ..Default::default()
                },
            )
            .await?;
        let after = lines.last().map(|l| l.seq).unwrap_or(0);
        lines.extend(tail.lines.into_iter().filter(|l| l.seq > after));
    }
    if lines.is_empty() {
        return Ok("(no output)\n".into());
    }
    for l in &mut lines {
        l.text = truncate_line(&l.text, MAX_LINE_SHOWN);
    }
    let total: usize = lines.iter().map(|l| l.text.len() + 1).sum();
    let (keep_head, keep_tail) = if total <= max_bytes {
        (lines.len(), 0)
    } else {
        let h = fit(lines.iter(), max_bytes / 2);
        let t = fit(lines.iter().rev(), max_bytes / 2).min(lines.len() - h);
        (h, t)
    };
    let mut out = String::new();
    let mut prev: Option<u64> = None;
    let shown = lines[..keep_head]
        .iter()
        .chain(lines[lines.len() - keep_tail..].iter());
    for l in shown {
        if let Some(p) = prev
            && l.seq > p + 1
        {
            out += &gap_note(p + 1, l.seq - 1, id, dialect);
        }
        out += &l.text;
        out.push('\n');
        prev = Some(l.seq);
    }
    Ok(out)
}

/// How many lines from the start of `lines` fit in `budget` bytes.
fn fit<'a>(lines: impl Iterator<Item = &'a Line>, budget: usize) -> usize {
    let mut used = 0;
    let mut n = 0;
    for l in lines {
        used += l.text.len() + 1;
        if used > budget {
            break;
        }
        n += 1;
    }
    n
}

fn gap_note(from: u64, to: u64, id: &JobId, dialect: Dialect) -> String {
    format!(
        "… [lines {from}–{to} not shown ({} lines); read them with {}] …\n",
        to - from + 1,
        dialect.logs(id, from)
    )
}

/// A page read forward (`body`): keeps whole lines within [`MAX_BYTES`] and
/// moves `next_seq` back to the first line left out.
pub fn cap_page_forward(mut page: LogPage) -> LogPage {
    let n = fit(page.lines.iter(), MAX_BYTES).max(1.min(page.lines.len()));
    if n < page.lines.len() {
        page.next_seq = page.lines[n].seq;
        page.lines.truncate(n);
        page.has_more = true;
    }
    page
}

/// A tail page: keeps the last whole lines within [`MAX_BYTES`]; returns how many were dropped.
pub fn cap_page_tail(page: &mut LogPage) -> usize {
    let n = fit(page.lines.iter().rev(), MAX_BYTES).max(1.min(page.lines.len()));
    let dropped = page.lines.len() - n;
    page.lines.drain(..dropped);
    dropped
}

/// Lines as plain text, one per line.
pub fn lines_text(lines: &[Line]) -> String {
    let mut out = String::new();
    for l in lines {
        out += &l.text;
        out.push('\n');
    }
    out
}

/// A compact table of jobs: id, status, runner, mode, ports, usage, time, command.
pub fn table(jobs: &[JobInfo]) -> String {
    let mut out = String::new();
    for j in jobs {
        let status = if j.pulling.is_some() || j.building.is_some() {
            crate::card::status_text(j)
        } else if j.status.is_active() {
            j.status.name().to_string()
        } else {
            j.end_words()
        };
        let mut cols = vec![
            j.id.to_string(),
            status,
            j.runner.map(|r| r.to_string()).unwrap_or_else(|| "-".into()),
            j.start_mode.to_string(),
        ];
        let ports: Vec<String> = j
            .ports
            .iter()
            .map(|m| format!("{}→{}", m.url(), m.port))
            .collect();
        if !ports.is_empty() {
            cols.push(ports.join(","));
        }
        if let Some(u) = &j.usage {
            cols.push(format!("cpu {:.1}% mem {}", u.cpu_percent, bytes(u.memory_bytes)));
        }
        cols.push(duration(j));
        cols.push(format!("`{}`", short(&j.command, 60)));
        out += &cols.join("  ");
        out.push('\n');
        for c in &j.children {
            out += &format!("  └ child {}\n", crate::inert::visible(&c.summary()));
        }
    }
    out
}

pub use crate::card::bytes;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_shortened() {
        assert_eq!(short("abcdef", 4), "abc…");
        assert_eq!(truncate_line("héllo", 2), "h…[+5 bytes]");
    }
}
