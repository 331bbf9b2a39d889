//! Reading a job's output for a model: `tail` (the last lines), `body`
//! (paged forward from a seq cursor) and `diagnostic` (the last 120 lines of
//! both streams). Every page is capped at [`MAX_LINES`]/[`MAX_BYTES`] unless
//! more lines are asked for (up to [`MAX_LIMIT`]), and says `next_seq` and how
//! to read on.

use serde::{Deserialize, Serialize};

use super::core::{Answer, off_worker};
use super::format::{self, Dialect, MAX_LINES};
use crate::error::{Error, Result};
use crate::manager::Manager;
use crate::model::JobId;
use crate::output::{LogPage, LogQuery, Stream};

/// Most lines one page may hold when asked for explicitly.
pub const MAX_LIMIT: usize = 1000;

/// How to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogMode {
    /// The last lines (default).
    #[default]
    Tail,
    /// Page forward from `since_seq`.
    Body,
    /// The last 120 lines of stdout and stderr together, to see why something failed.
    Diagnostic,
}

/// A read request, as every tool set phrases it.
#[derive(Debug, Clone, Default)]
pub struct LogRequest {
    pub mode: LogMode,
    pub since: Option<u64>,
    pub limit: Option<usize>,
    pub stream: Option<Stream>,
}

impl LogRequest {
    /// `since` given without a mode means paging.
    pub fn normalized(mut self) -> Self {
        if self.since.is_some() && self.mode == LogMode::Tail {
            self.mode = LogMode::Body;
        }
        self
    }
}

/// A page with what was left out in front (tail reads).
pub struct Read {
    pub page: LogPage,
    pub mode: LogMode,
}

/// Read a page as asked, capped.
pub async fn read(m: &Manager, id: &JobId, req: &LogRequest) -> Result<Read> {
    let req = req.clone().normalized();
    if let Some(0) = req.limit {
        return Err(Error::InvalidValue {
            what: "limit",
            input: "0".into(),
            message: "must be at least 1".into(),
        });
    }
    let limit = req.limit.unwrap_or(MAX_LINES).min(MAX_LIMIT);
    let page = match req.mode {
        LogMode::Body => format::cap_page_forward(
            m.read_logs(
                id,
                &LogQuery {
                    since: Some(req.since.unwrap_or(1).max(1)),
                    limit: Some(limit),
                    stream: req.stream,
                    ..Default::default()
                },
            )
            .await?,
        ),
        LogMode::Tail | LogMode::Diagnostic => {
            let n = if req.mode == LogMode::Diagnostic {
                MAX_LINES
            } else {
                limit
            };
            let stream = if req.mode == LogMode::Diagnostic {
                None
            } else {
                req.stream
            };
            let mut page = m
                .read_logs(
                    id,
                    &LogQuery {
                        tail: Some(n),
                        stream,
                        ..Default::default()
                    },
                )
                .await?;
            format::cap_page_tail(&mut page);
            page
        }
    };
    Ok(Read { page, mode: req.mode })
}

/// A page as text: a header with the seq range and `next_seq`, the lines, how to read on.
pub async fn answer(m: &Manager, id: &JobId, req: &LogRequest, d: Dialect) -> Result<Answer> {
    let Read { page, mode } = read(m, id, req).await?;
    // A finished job's record may be only in the store.
    let info = {
        let (m, id) = (m.clone(), id.clone());
        off_worker(move || m.info(&id)).await?
    };
    super::backlog::cover(m, id);
    let state = if info.status.is_active() {
        "running".to_string()
    } else {
        format!("ended: {}", info.end_words())
    };
    let stream = match req.stream {
        Some(Stream::Stdout) if mode != LogMode::Diagnostic => " (stdout only)",
        Some(Stream::Stderr) if mode != LogMode::Diagnostic => " (stderr only)",
        _ => "",
    };
    let range = match (page.lines.first(), page.lines.last()) {
        (Some(a), Some(b)) => format!("lines {}–{}", a.seq, b.seq),
        _ => "no lines".to_string(),
    };
    let what = match mode {
        LogMode::Tail => "tail",
        LogMode::Body => "body",
        LogMode::Diagnostic => "diagnostic (last 120 lines, both streams)",
    };
    let mut text = format!(
        "{id} ({state}) · {what}{stream} · {range} of {} · next_seq {}\n",
        page.last_seq, page.next_seq
    );
    text += &format::lines_text(&page.lines);
    match mode {
        LogMode::Body if page.has_more => {
            text += &format!("More: {}\n", d.logs(id, page.next_seq));
        }
        LogMode::Body => {
            text += if info.status.is_active() {
                "End of output so far; new lines will start at next_seq.\n"
            } else {
                "End of output.\n"
            };
        }
        _ => {
            if let Some(first) = page.lines.first()
                && first.seq > 1
            {
                text += &format!("Earlier output (lines 1–{}): {}\n", first.seq - 1, d.logs(id, 1));
            }
        }
    }
    Ok(Answer::ok(text))
}
