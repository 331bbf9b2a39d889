//! `berth logs`: a job's output by tail or by seq, page after page, then
//! (`--follow`) new lines until the job ends.
//!
//! The daemon answers at most a page per read (`output::PAGE_LINES` lines,
//! `output::PAGE_BYTES` of text), so this verb asks page after page and
//! writes each one out before asking for the next: neither the daemon nor
//! this process ever holds a big job's output at once. Text from a daemon
//! comes in one request as runs of the job's text (`daemon/log_text.rs`),
//! not a JSON object per line. `--json` streams one
//! JSON document of the same shape as a page (`lines`, `next_seq`, …; the
//! lost ranges of every page in `lost`), written as the pages come; with
//! `--follow`, one JSON record per line instead. Lines the output cap
//! dropped and lines lost while the store could not be written are said on
//! stderr (in the document: `truncated_before`, `lost`), never skipped
//! silently. Job text written to a terminal is inert (control characters
//! and escape sequences shown as `\x1b` …) unless `--raw`. `--timestamps`
//! puts each line's time before it, as `docker logs -t` does.

use clap::Args;

use super::Global;
use super::offline::Reader;
use super::out::{LineMode, StdoutClosed, out, outln, write_lines, write_run};
use crate::api::client::log_query;
use crate::api::frames;
use crate::model::{Gap, JobId};
use crate::output::{Line, LogPage, LogQuery, PAGE_LINES, Stream};

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// Job id (`job-3` or `3`).
    #[arg(add = super::complete::job_ids())]
    pub id: String,
    /// Last N lines (at most one page: 10,000).
    #[arg(long, conflicts_with = "since")]
    pub tail: Option<usize>,
    /// From this seq on (inclusive).
    #[arg(long)]
    pub since: Option<u64>,
    /// At most N lines (all there are so far when not given).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Keep printing new lines until the job ends.
    #[arg(short, long)]
    pub follow: bool,
    /// Only stdout or stderr.
    #[arg(long)]
    pub stream: Option<String>,
    /// Print the lines as one JSON document shaped like a page (or, when
    /// following, one JSON record per line).
    #[arg(long)]
    pub json: bool,
    /// Write the job's bytes as they are, also to a terminal (by default
    /// control characters and escape sequences show as `\x1b`, `\r` … there).
    #[arg(long)]
    pub raw: bool,
    /// Prefix each line with the time it was read, RFC 3339 in UTC
    /// (`2026-11-25T21:40:00.123Z hello`); `--json` lines carry `ts` anyway.
    #[arg(short, long, conflicts_with = "child")]
    pub timestamps: bool,
    /// The output of the job's child NAME (a container it started through
    /// its scoped engine; `berth ps` lists them), instead of the job's own.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["since", "limit", "follow", "stream"])]
    pub child: Option<String>,
}

/// Where pages go: lines on stdout/stderr, one streamed JSON document, or
/// a JSON record per line (following).
enum Sink {
    Text {
        id: JobId,
        mode: LineMode,
    },
    Document {
        started: bool,
        lost: Vec<Gap>,
        first: Option<(u64, Option<u64>)>,
    },
    Records,
}

impl Sink {
    /// Write one page out (and say what it lacks).
    fn page(&mut self, page: &LogPage) -> Result<(), StdoutClosed> {
        match self {
            Sink::Text { id, mode } => {
                if let Some(seq) = page.truncated_before {
                    eprintln!(
                        "berth: lines before seq {seq} of {id} were dropped by the output cap (max_output); showing from {seq}"
                    );
                }
                say_lost(id, &page.lost);
                write_lines(&page.lines, *mode)?;
            }
            Sink::Document { started, lost, first } => {
                first.get_or_insert((page.first_available_seq, page.truncated_before));
                lost.extend_from_slice(&page.lost);
                let mut text = String::with_capacity(page.lines.len() * 128);
                for l in &page.lines {
                    text.push_str(if *started { "," } else { "{\"lines\":[" });
                    *started = true;
                    text.push_str(&serde_json::to_string(l).unwrap_or_default());
                }
                out!("{text}");
            }
            Sink::Records => {
                for g in &page.lost {
                    outln!("{}", serde_json::json!({ "lost": g }));
                }
                for l in &page.lines {
                    outln!("{}", serde_json::to_string(l).unwrap_or_default());
                }
            }
        }
        Ok(())
    }

    /// After the last page: close the document with where the read ended.
    fn finish(&mut self, last: &LogPage) -> Result<(), StdoutClosed> {
        if let Sink::Document { started, lost, first } = self {
            let (first_available, truncated) = first.unwrap_or((last.first_available_seq, None));
            let mut tail = serde_json::json!({
                "next_seq": last.next_seq,
                "has_more": last.has_more,
                "last_seq": last.last_seq,
                "first_available_seq": first_available,
            });
            if let Some(t) = truncated {
                tail["truncated_before"] = t.into();
            }
            if !lost.is_empty() {
                tail["lost"] = serde_json::to_value(&*lost).unwrap_or_default();
            }
            let rest = tail.to_string();
            let opening = if *started { "]," } else { "{\"lines\":[]," };
            outln!("{opening}{}", &rest[1..]);
        }
        Ok(())
    }
}

fn say_lost(id: &JobId, lost: &[Gap]) {
    for g in lost {
        eprintln!(
            "berth: lines {}–{} of {id} ({} line(s)) were lost: the store could not write them, or their stored block is damaged (`berth doctor --check` lists those)",
            g.from,
            g.to,
            g.lines()
        );
    }
}

pub async fn logs(global: &Global, a: LogsArgs) -> anyhow::Result<i32> {
    let r = super::offline::reader(global).await?;
    let id = JobId::from(a.id.as_str());
    if let Some(name) = &a.child {
        return child_logs(&r, id, name, &a).await;
    }
    let stream: Option<Stream> = a.stream.as_deref().map(str::parse).transpose()?;
    let mut sink = match (a.json, a.follow) {
        (false, _) => Sink::Text {
            id: id.clone(),
            mode: LineMode::for_terminals(a.raw).with_timestamps(a.timestamps),
        },
        (true, false) => Sink::Document {
            started: false,
            lost: Vec::new(),
            first: None,
        },
        (true, true) => Sink::Records,
    };
    let last = if let Some(n) = a.tail {
        let page = r
            .logs(
                &id,
                &LogQuery {
                    tail: Some(n),
                    limit: a.limit,
                    stream,
                    ..Default::default()
                },
            )
            .await?;
        if n > PAGE_LINES && !a.json {
            eprintln!(
                "berth: a tail is one page: the last {PAGE_LINES} lines at most; read older ones with --since"
            );
        }
        sink.page(&page)?;
        page
    } else {
        match (&r, &sink) {
            (Reader::Daemon(c), Sink::Text { mode, .. }) if !mode.timestamps() => {
                text_pages(c, &id, &a, stream, *mode).await?
            }
            _ => pages(&r, &id, &a, stream, &mut sink).await?,
        }
    };
    if !a.follow {
        sink.finish(&last)?;
        if last.has_more && !a.json {
            eprintln!(
                "berth: more lines follow; continue with `berth logs {id} --since {}`",
                last.next_seq
            );
        }
        return Ok(0);
    }
    follow(
        &r,
        &id,
        last.next_seq,
        stream,
        a.json,
        LineMode::for_terminals(a.raw).with_timestamps(a.timestamps),
    )
    .await
}

/// `--child NAME`: the last lines a child container of the job printed.
async fn child_logs(r: &super::offline::Reader, id: JobId, name: &str, a: &LogsArgs) -> anyhow::Result<i32> {
    let lines = r.child_logs(&id, name, a.tail).await?;
    if a.json {
        let doc = crate::model::ChildLogs {
            job: id,
            child: name.to_string(),
            lines,
        };
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        let terminal = !a.raw && std::io::IsTerminal::is_terminal(&std::io::stdout());
        for l in &lines {
            match terminal {
                true => outln!("{}", crate::inert::visible(l)),
                false => outln!("{l}"),
            }
        }
    }
    Ok(0)
}

/// Read page after page from `--since` until `--limit` lines were written,
/// or up to the last line there was when the read began (a busy job is
/// not chased for ever; `--follow` goes on from there).
async fn pages(
    r: &super::offline::Reader,
    id: &JobId,
    a: &LogsArgs,
    stream: Option<Stream>,
    sink: &mut Sink,
) -> anyhow::Result<LogPage> {
    let mut since = a.since.unwrap_or(1).max(1);
    let mut left = a.limit;
    let mut end = None;
    loop {
        let q = LogQuery {
            since: Some(since),
            limit: left.map(|l| l.clamp(1, PAGE_LINES)),
            stream,
            tail: None,
        };
        let page = r.logs(id, &q).await?;
        let end = *end.get_or_insert(page.last_seq);
        sink.page(&page)?;
        if let Some(l) = &mut left {
            *l = l.saturating_sub(page.lines.len());
        }
        since = page.next_seq;
        if !page.has_more || left == Some(0) || since > end {
            return Ok(page);
        }
    }
}

/// What [`pages`] does for lines shown as text, in one request whose
/// answer is the job's text (`daemon/log_text.rs`): no object per line.
async fn text_pages(
    c: &crate::api::client::Client,
    id: &JobId,
    a: &LogsArgs,
    stream: Option<Stream>,
    mode: LineMode,
) -> anyhow::Result<LogPage> {
    let mut resume = a.since.unwrap_or(1).max(1);
    let q = LogQuery {
        since: Some(resume),
        limit: a.limit,
        stream,
        tail: None,
    };
    let mut answer = c.logs_text(id, &q).await?;
    let mut notes = Sink::Text { id: id.clone(), mode };
    while let Some((kind, payload)) = answer.next().await {
        match kind {
            frames::STDOUT => write_run(Stream::Stdout, &payload, mode)?,
            frames::STDERR => write_run(Stream::Stderr, &payload, mode)?,
            // What the page lacks, said where it happens.
            frames::PAGE => notes.page(&serde_json::from_slice(&payload)?)?,
            frames::NEXT => resume = std::str::from_utf8(&payload)?.parse()?,
            frames::END => return Ok(serde_json::from_slice(&payload)?),
            _ => {}
        }
    }
    // Lines of the page that broke off may have been printed: reading on
    // from its start repeats them rather than skip any.
    anyhow::bail!(
        "the daemon's answer for the logs of {id} broke off; read on with `berth logs {id} --since {resume}`"
    )
}

/// New lines as they come, from `since` until the job ends.
async fn follow(
    r: &super::offline::Reader,
    id: &JobId,
    since: u64,
    stream: Option<Stream>,
    json: bool,
    mode: LineMode,
) -> anyhow::Result<i32> {
    let q = LogQuery {
        since: Some(since),
        stream,
        ..Default::default()
    };
    // Batches for the terminal (one write per batch); one line per record for `--json`.
    let batch = if json { "" } else { "&batch=true" };
    let mut sse = r
        .client()?
        .follow(&format!("/v1/jobs/{id}/logs/follow{}{batch}", log_query(&q)))
        .await?;
    while let Some((event, data)) = sse.next().await {
        match event.as_str() {
            "line" if json => outln!("{data}"),
            "lines" => {
                if let Ok(lines) = serde_json::from_str::<Vec<Line>>(&data) {
                    write_lines(&lines, mode)?;
                }
            }
            "lost" if json => {
                if let Ok(gaps) = serde_json::from_str::<Vec<Gap>>(&data) {
                    for g in gaps {
                        outln!("{}", serde_json::json!({ "lost": g }));
                    }
                }
            }
            "lost" => {
                if let Ok(gaps) = serde_json::from_str::<Vec<Gap>>(&data) {
                    say_lost(id, &gaps);
                }
            }
            "end" => break,
            _ => {}
        }
    }
    Ok(0)
}
