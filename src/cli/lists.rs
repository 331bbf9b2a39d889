//! `berth ps` and `berth events`: lists read page by page. The manager cuts
//! every page by count and by bytes (`manager::pages`), so these verbs ask
//! for as many pages as the caller's `--limit` (ps) or the log (events)
//! takes, and print events as their pages come. Job text in the table and
//! the event lines is shown inert (`crate::inert`); `--json` is the API's
//! data as is.

use clap::Args;

use super::Global;
use super::jobs::print_json;
use super::out::{out, outln};
use crate::card;
use crate::inert::visible;
use crate::manager::{ListFilter, MAX_PAGE_ITEMS};
use crate::model::{JobId, JobInfo};

#[derive(Debug, Args)]
pub struct PsArgs {
    /// Every job, whatever its state.
    #[arg(long, conflicts_with_all = ["completed", "failed"])]
    pub all: bool,
    /// Jobs that ended without failure.
    #[arg(long, conflicts_with = "failed")]
    pub completed: bool,
    /// Jobs that failed (non-zero exit, crash, timeout, OOM, lost).
    #[arg(long)]
    pub failed: bool,
    /// Most jobs to list, newest first.
    #[arg(long, default_value_t = crate::manager::DEFAULT_LIST_LIMIT)]
    pub limit: usize,
    /// Only jobs older than this one (continue a list where the last page ended).
    #[arg(long, value_name = "ID")]
    pub before: Option<String>,
    /// Add CPU and memory of running jobs (sampled live: about a second with containers).
    #[arg(long)]
    pub usage: bool,
    /// Only jobs with this label (`berth run --label`; else the command).
    #[arg(long, value_name = "LABEL")]
    pub label: Option<String>,
    /// Only jobs of this workspace (a directory; without one, this project's).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<Option<std::path::PathBuf>>,
    /// Print JSON (the API's answer) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// What `--label` and `--workspace` keep.
struct Only {
    label: Option<String>,
    workspace: Option<std::path::PathBuf>,
}

impl Only {
    fn from(global: &Global, a: &PsArgs) -> anyhow::Result<Option<Only>> {
        let workspace = match &a.workspace {
            None => None,
            Some(None) => Some(global.config()?.workspace),
            Some(Some(d)) => Some(d.clone()),
        };
        // Job records hold the real path (symlinks resolved).
        let workspace = workspace.map(|w| std::fs::canonicalize(&w).unwrap_or(w));
        Ok((a.label.is_some() || workspace.is_some()).then_some(Only {
            label: a.label.clone(),
            workspace,
        }))
    }

    fn keeps(&self, j: &JobInfo) -> bool {
        self.label.as_ref().is_none_or(|l| &j.label == l)
            && self
                .workspace
                .as_ref()
                .is_none_or(|w| j.workspace.as_ref() == Some(w))
    }
}

pub async fn ps(global: &Global, a: PsArgs) -> anyhow::Result<i32> {
    let filter = match (a.all, a.completed, a.failed) {
        (true, _, _) => ListFilter::All,
        (_, true, _) => ListFilter::Completed,
        (_, _, true) => ListFilter::Failed,
        _ => ListFilter::Running,
    };
    let mut before = a.before.as_deref().map(JobId::from);
    let only = Only::from(global, &a)?;
    let reader = super::offline::reader(global).await?;
    let mut page = reader
        .list_page(filter, a.limit, before.as_ref(), a.usage)
        .await?;
    if let Some(only) = only {
        // Filtered here: page on until `limit` jobs match or none are left.
        let mut kept: Vec<JobInfo> = Vec::new();
        let older_left = loop {
            kept.extend(page.jobs.drain(..).filter(|j| only.keeps(j)));
            match page.more.take() {
                Some(last) if kept.len() < a.limit => {
                    before = Some(last);
                    page = reader
                        .list_page(filter, a.limit, before.as_ref(), a.usage)
                        .await?;
                }
                more => break more.is_some(),
            }
        };
        let cut = kept.len() > a.limit;
        kept.truncate(a.limit);
        // `--before` the last one shown continues the filtered list.
        page.more = (cut || older_left)
            .then(|| kept.last().map(|j| j.id.clone()))
            .flatten();
        page.jobs = kept;
    }
    if a.json {
        print_json(&page.jobs)?;
    } else if page.jobs.is_empty()
        && (a.all || a.completed || a.failed || a.label.is_some() || a.workspace.is_some())
    {
        // Nothing matched what was asked: say so, not "use --all".
        outln!("no jobs match (none {})", what_was_asked(&a));
    } else {
        out!("{}", table(&page.jobs, a.usage));
        if a.usage && page.jobs.iter().any(|j| j.node.is_some()) {
            out!("{}", nodes_table(&reader.client()?.nodes().await?));
        }
        if let Some(last) = page.more {
            eprintln!(
                "berth: more may follow: `berth ps --before {last} --limit {}`",
                a.limit
            );
        }
    }
    Ok(0)
}

/// The filters of a `ps` that matched nothing, in words.
fn what_was_asked(a: &PsArgs) -> String {
    let mut parts = vec![match (a.all, a.completed, a.failed) {
        (true, ..) => "of any state".to_string(),
        (_, true, _) => "completed".to_string(),
        (_, _, true) => "failed".to_string(),
        _ => "running".to_string(),
    }];
    if let Some(l) = &a.label {
        parts.push(format!("labelled `{}`", visible(l)));
    }
    if let Some(w) = &a.workspace {
        parts.push(match w {
            Some(dir) => format!("in workspace {}", visible(&dir.display().to_string())),
            None => "in this project's workspace".into(),
        });
    }
    parts.join(", ")
}

/// `job-4  running  host  direct  background  127.0.0.1:4000→3000  01:43  sleep 120`,
/// with a `CPU MEM` column when `usage` was sampled.
pub fn table(jobs: &[JobInfo], usage: bool) -> String {
    if jobs.is_empty() {
        return "no jobs (use --all to include ended ones)\n".into();
    }
    let usage_col = |text: String| {
        if usage {
            format!("{text:<16} ")
        } else {
            String::new()
        }
    };
    let mut out = format!(
        "{:<8} {:<12} {:<7} {:<6} {:<20} {:<18} {:<24} {}{:>8}  {}\n",
        "ID",
        "STATUS",
        "RUNNER",
        "WRITES",
        "MODE",
        "WORKSPACE",
        "PORTS",
        usage_col("CPU MEM".into()),
        "TIME",
        "COMMAND"
    );
    for j in jobs {
        let time = j.runtime().map(card::clock).unwrap_or_else(|| "-".into());
        let status = match (j.exit_code, j.queue_position) {
            (Some(c), _) if j.status.is_terminal() => format!("{} ({c})", j.status.name()),
            (_, Some(p)) => format!("queued #{p}"),
            // `starting (pulling 40%)` while its image is pulled.
            _ if j.pulling.is_some() || j.building.is_some() => card::status_text(j),
            _ => j.status.name().to_string(),
        };
        let used = match &j.usage {
            Some(u) => format!("{:.1}% {}", u.cpu_percent, card::bytes(u.memory_bytes)),
            None => "-".into(),
        };
        // `layer`, `direct` or `ro`: where the job's writes go (`layers`).
        let writes = match j.writes.as_ref().map(|w| w.mode) {
            Some(crate::model::WriteMode::ReadOnly) => "ro".to_string(),
            Some(m) => m.to_string(),
            None => "-".into(),
        };
        out += &format!(
            "{:<8} {:<12} {:<7} {:<6} {:<20} {:<18} {:<24} {}{:>8}  {}\n",
            j.id.to_string(),
            status,
            j.runner.map(|r| r.to_string()).unwrap_or_else(|| "-".into()),
            writes,
            j.start_mode.to_string(),
            visible(&card::workspace_short(j)),
            card::ports_text(j),
            usage_col(used),
            time,
            visible(&j.command)
        );
        // A swarm job's node, under it.
        if let Some(node) = &j.node {
            out += &format!("  └ node {}\n", visible(node));
        }
        // Containers the job started through its scoped engine, under it.
        for c in &j.children {
            out += &format!("  └ child {}\n", visible(&c.summary()));
        }
    }
    out
}

/// A swarm's nodes under `ps --usage`: what berth's running jobs reserve
/// on each, of what it has (the swarm reads no usage of another node's
/// containers).
fn nodes_table(nodes: &[crate::model::NodeLoad]) -> String {
    let mut out = format!(
        "\n{:<20} {:<8} {:>4}  {:<16} {}\n",
        "NODE", "STATE", "JOBS", "CPUS RESERVED", "MEMORY RESERVED"
    );
    for n in nodes {
        out += &format!(
            "{:<20} {:<8} {:>4}  {:<16} {} of {}\n",
            visible(&n.node),
            visible(&n.state),
            n.jobs,
            format!("{:.2} of {:.0}", n.cpus_reserved, n.cpus),
            card::bytes(n.memory_reserved),
            card::bytes(n.memory)
        );
    }
    out
}

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// From this event seq on (inclusive).
    #[arg(long, default_value_t = 1)]
    pub since: u64,
    /// Keep printing new events.
    #[arg(short, long)]
    pub follow: bool,
    /// Print JSON (the API's answer) instead of text.
    #[arg(long)]
    pub json: bool,
}

pub async fn events(global: &Global, a: EventsArgs) -> anyhow::Result<i32> {
    let r = super::offline::reader(global).await?;
    if !a.follow {
        // Page by page, each printed as it comes (with `--json`, one
        // `{events, next_seq}` object, written as it goes).
        let mut since = a.since;
        let mut first = true;
        if a.json {
            out!("{{\"events\": [");
        }
        loop {
            let page = r.events(since, MAX_PAGE_ITEMS).await?;
            for e in &page.events {
                if a.json {
                    out!(
                        "{}\n  {}",
                        if first { "" } else { "," },
                        serde_json::to_string(e)?
                    );
                    first = false;
                } else {
                    outln!("{}", event_line(e));
                }
            }
            since = page.next_seq;
            if !page.more || page.events.is_empty() {
                break;
            }
        }
        if a.json {
            outln!("\n], \"next_seq\": {since}}}");
        }
        return Ok(0);
    }
    let mut sse = r
        .client()?
        .follow(&format!("/v1/events/follow?since={}", a.since))
        .await?;
    while let Some((_, data)) = sse.next().await {
        if a.json {
            outln!("{data}");
        } else if let Ok(e) = serde_json::from_str::<crate::events::Event>(&data) {
            outln!("{}", event_line(&e));
        }
    }
    Ok(0)
}

/// `#12 job-3 ended status=killed ended_by=user …`, inert.
pub fn event_line(e: &crate::events::Event) -> String {
    let mut v = serde_json::to_value(&e.kind).unwrap_or_default();
    let kind = v["kind"].as_str().unwrap_or("").to_string();
    if let Some(m) = v.as_object_mut() {
        m.remove("kind");
    }
    let details: Vec<String> = v
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| match v {
                    serde_json::Value::String(s) => format!("{k}={s}"),
                    other => format!("{k}={other}"),
                })
                .collect()
        })
        .unwrap_or_default();
    let line = format!(
        "#{} {} {} {kind} {}",
        e.seq,
        e.ts.format("%H:%M:%S"),
        e.job,
        details.join(" ")
    );
    visible(&line).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Event, EventKind};
    use crate::model::Stream;

    /// A watch hit whose line sets the clipboard, clears the screen and
    /// reverses the text reads as escapes.
    #[test]
    fn event_lines_are_inert() {
        let e = Event {
            seq: 7,
            ts: chrono::Utc::now(),
            job: JobId::from_number(3),
            kind: EventKind::WatchHit {
                line_seq: 1,
                stream: Stream::Stdout,
                line: "\x1b]52;c;cm0gLXJm\x07\x1b[2Jok\rX\u{202e}".into(),
                pattern: "ok".into(),
            },
        };
        let line = event_line(&e);
        assert!(
            line.contains(r"line=\x1b]52;c;cm0gLXJm\x07\x1b[2Jok\rX\u202e"),
            "{line}"
        );
        assert!(!line.contains(['\x1b', '\r', '\x07', '\u{202e}']), "{line}");
    }
}
