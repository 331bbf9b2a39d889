//! The seed-compatible `--tools exec` set: one `shell` tool driven by
//! `action` — spawn (background, with `watch` regexes), poll (status,
//! exit code, snippet), log (items after `since_seq`, `next_seq` to go on),
//! kill; no action runs the command synchronously.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::args::{job_id, opt_id_de};
use super::core::{Answer, off_worker, reply};
use super::format::{self, Dialect};
use super::logs::{self, LogMode, LogRequest};
use super::service::BerthMcp;
use super::tools::kill_json;
use crate::error::{Error, Result};
use crate::events::EventKind;
use crate::manager::KillRequest;
use crate::model::{EndedBy, JobSpec, RunRequest};

/// What the exec `shell` tool does.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Spawn,
    Poll,
    Log,
    Kill,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellActionArgs {
    /// spawn | poll | log | kill. Absent: run `command` synchronously and return its output.
    pub action: Option<Action>,
    /// Shell command line (spawn, or the synchronous run).
    pub command: Option<String>,
    /// spawn: run in the background (default true).
    pub background: Option<bool>,
    /// spawn: regexes to watch; each match is reported once in a later answer.
    #[serde(default)]
    pub watch: Vec<String>,
    /// spawn: ports to publish, e.g. ["8000"]; the answer maps each to its URL http://127.0.0.1:PORT.
    #[serde(default, deserialize_with = "crate::mcp::args::ports_de")]
    #[schemars(with = "Vec<crate::mcp::args::PortArg>")]
    pub ports: Vec<String>,
    /// spawn: the Docker image to run in (default: the project's).
    pub image: Option<String>,
    /// kill: why it is stopped (kept in its record and its `ended` event).
    pub reason: Option<String>,
    /// The run_id from spawn (poll, log, kill).
    #[serde(default, deserialize_with = "opt_id_de")]
    #[schemars(with = "Option<String>")]
    pub run_id: Option<String>,
    /// log: return items after this seq (default 0: from the start); pass the previous
    /// answer's next_seq to read on.
    pub since_seq: Option<u64>,
    /// log: most items to return (default 120, at most 1000).
    pub limit: Option<usize>,
}

#[tool_router(router = exec_router, vis = "pub(super)")]
impl BerthMcp {
    #[tool(
        description = "Run shell commands without blocking. action spawn: start `command` in the background \
(with optional `watch` regexes) and get a run_id at once. action poll: status (running|success|failed), exit \
code and a short output snippet (the last ~1.5 KB; a snippet already sent in an event is named by its seq instead). \
spawn takes `ports` (answered as URLs) and `image`. action log: the run's items after since_seq (default 0) — \
output {seq, kind: output, stream, text} and events {seq, kind: event, event: watch_hit|ended, …} in seq order — \
with next_seq to pass as since_seq to continue. action kill: stop it (`reason` is kept). No action: run `command` synchronously (moves to the background after 60 s). \
Watch hits and exits are reported in later answers, so spawn with a watch pattern and carry on instead of polling."
    )]
    async fn shell(&self, Parameters(a): Parameters<ShellActionArgs>) -> CallToolResult {
        reply(self.exec_answer(a).await)
    }
}

impl BerthMcp {
    async fn exec_answer(&self, a: ShellActionArgs) -> Result<Answer> {
        let run_id = || {
            a.run_id
                .as_deref()
                .map(job_id)
                .ok_or_else(|| Error::InvalidSpec("this action needs `run_id` (from spawn)".into()))
        };
        let command = || {
            a.command
                .clone()
                .ok_or_else(|| Error::InvalidSpec("missing `command`: the shell command line to run".into()))
        };
        match a.action {
            None | Some(Action::Spawn) => self.exec_spawn(&a, command()?).await,
            Some(Action::Poll) => self.exec_poll(run_id()?).await,
            Some(Action::Log) => self.exec_log(run_id()?, a.since_seq.unwrap_or(0), a.limit).await,
            Some(Action::Kill) => {
                let req = KillRequest {
                    ended_by: Some(EndedBy::Agent),
                    reason: a.reason.clone(),
                    ..Default::default()
                };
                Ok(Answer::json(&kill_json(&self.core.kill(&run_id()?, req).await?)))
            }
        }
    }
}

impl BerthMcp {
    /// `spawn`: `command` started in the background and answered at once
    /// with its run_id; with no action (or `background: false`) run in the
    /// foreground and answered as `Core::run` answers.
    async fn exec_spawn(&self, a: &ShellActionArgs, command: String) -> Result<Answer> {
        let mut spec = JobSpec::shell(command);
        spec.background = a.action.is_some() && a.background.unwrap_or(true);
        RunRequest {
            ports: a.ports.clone(),
            image: a.image.clone(),
            watch: a.watch.clone(),
            ..Default::default()
        }
        .apply(&mut spec)?;
        if !spec.background {
            return self.core.run(spec, None, Dialect::Exec).await;
        }
        let (info, _) = self.core.start(spec, None).await?;
        let mut v = serde_json::json!({
            "run_id": info.id,
            "status": poll_status(&info),
            "pid": info.pid,
            "stdout": info.logs.stdout,
            "stderr": info.logs.stderr,
        });
        if !info.ports.is_empty() {
            v["ports"] = super::format::port_urls(&info).into();
        }
        Ok(Answer::json(&v))
    }

    /// `poll`: the run's state in the seed's words, and a short snippet of its output.
    async fn exec_poll(&self, id: crate::JobId) -> Result<Answer> {
        let info = self.core.manager.read_info(&id).await?;
        super::backlog::cover(&self.core.manager, &id);
        Ok(Answer::json(&serde_json::json!({
            "run_id": id,
            "status": poll_status(&info),
            // The seed's restart states: taken over after a restart
            // (`recovered`), or waiting for a slot (`queued`).
            "recovery": if info.recovered { Some("recovered") } else if info.status == crate::JobStatus::Queued { Some("queued") } else { None },
            "state": info.status.name(),
            "exit_code": info.exit_code,
            "ended_by": info.ended_by,
            "reason": info.reason.clone().or(info.promotion_reason.clone()),
            "runtime": format::duration(&info),
            "next_seq": info.last_seq,
            "snippet": self.poll_snippet(&id).await?,
        })))
    }

    /// `log`: the run's items after seq `after` (at most `limit`), and the
    /// seq to pass back to read on.
    async fn exec_log(&self, id: crate::JobId, after: u64, limit: Option<usize>) -> Result<Answer> {
        // The seed's cursor is exclusive: items *after* since_seq, and
        // next_seq is the seq to pass back (the last one returned).
        let req = LogRequest {
            mode: LogMode::Body,
            since: Some(after + 1),
            limit,
            stream: None,
        };
        let page = logs::read(&self.core.manager, &id, &req).await?.page;
        let items = self.items(&id, after, &page).await?;
        Ok(Answer::json(&serde_json::json!({
            "run_id": id,
            "next_seq": items.last().and_then(|i| i["seq"].as_u64()).unwrap_or(after),
            "items": items,
            "has_more": page.has_more,
            "last_seq": page.last_seq,
        })))
    }

    /// `poll`'s snippet, or the event that carries the same output: one
    /// this session was sent, or an unseen watch hit this answer ends with.
    /// Off the async workers: the events, record and output it looks at
    /// may be read from the store.
    async fn poll_snippet(&self, id: &crate::JobId) -> Result<String> {
        let (core, id) = (self.core.clone(), id.clone());
        off_worker(move || {
            if let Some(n) = core.snippets.current(&core.manager, &id) {
                return Ok(format!("see event #{n} (no output since)"));
            }
            if let Some(n) = core.backlog.unseen_watch_hit(&core.manager, &id) {
                return Ok(format!("see event #{n} below"));
            }
            core.manager.snippet(&id)
        })
        .await
    }

    /// The seed's run items: output lines and the run's events in one
    /// seq-ordered stream. A watch hit sits right after the line it matched
    /// (same seq); the end of the run is the item after the last line
    /// (`last_seq + 1`), once the page reaches it.
    async fn items(
        &self,
        id: &crate::JobId,
        after: u64,
        page: &crate::output::LogPage,
    ) -> Result<Vec<serde_json::Value>> {
        // The run's events and record, read off the async workers (older
        // events and a finished run's record come from the store).
        let (events, info) = {
            let (m, id) = (self.core.manager.clone(), id.clone());
            off_worker(move || {
                let events: Vec<crate::events::Event> = m
                    .events(0, crate::events::MAX_EVENTS)
                    .into_iter()
                    .filter(|e| e.job == id)
                    .collect();
                (events, m.info(&id))
            })
            .await
        };
        let mut items = Vec::new();
        for l in &page.lines {
            items.push(
                serde_json::json!({"seq": l.seq, "kind": "output", "stream": l.stream, "text": l.text}),
            );
            for e in &events {
                if let EventKind::WatchHit {
                    line_seq, pattern, ..
                } = &e.kind
                    && *line_seq == l.seq
                {
                    // Right after the line it matched (same seq): its text is not repeated.
                    items.push(serde_json::json!({
                        "seq": l.seq, "kind": "event", "event": "watch_hit", "pattern": pattern,
                        "event_seq": e.seq,
                    }));
                }
            }
        }
        let info = info?;
        let end_seq = page.last_seq + 1;
        if !page.has_more && !info.status.is_active() && after < end_seq {
            items.push(serde_json::json!({
                "seq": end_seq, "kind": "event", "event": "ended", "status": info.status.name(),
                "exit_code": info.exit_code, "ended_by": info.ended_by, "reason": info.reason,
            }));
        }
        Ok(items)
    }
}

/// A watcher notification's snippet: the last ~1.5 KB of the run's output,
/// once (`snippets.rs`).
pub fn exec_event_meta(core: &super::core::Core, e: &crate::events::Event) -> Option<String> {
    if !matches!(e.kind, crate::events::EventKind::WatchHit { .. }) {
        return None;
    }
    core.snippets.for_event(&core.manager, &e.job, e.seq)
}

/// running | success | failed (queued counts as running).
fn poll_status(info: &crate::JobInfo) -> &'static str {
    if info.status.is_active() {
        "running"
    } else if info.status.is_success() {
        "success"
    } else {
        "failed"
    }
}
