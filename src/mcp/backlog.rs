//! Backlog steering: every tool answer ends with the events this client has
//! not seen yet (watch hits, ends, promotions, readiness), each once, one
//! line each, so the agent learns that a build failed or a user killed its
//! server without polling.
//!
//! The server serves one stdio client (one session), so the cursors here
//! are the session's. Only the session's own jobs (started, or asked about,
//! by this client) are told, unless the client asked for every job's
//! (`events` with `all: true`): several agents on one instance must not
//! read each other's work. There is one cursor per scope: reading its own
//! events moves only the own-scope cursor, so the other jobs' events it
//! stepped over are still unseen when the session later asks for all of
//! them (the all-scope cursor shows them, skipping its own ones already told). The store's state is told to everyone. Noise is
//! left out: the `started`/`queued` events of jobs this client started
//! itself, and lifecycle events an answer already reports (a call marks its
//! job with [`cover`] while it runs; the events of that job emitted so far
//! are then implied by the answer). Watch hits are never dropped.

use std::cell::RefCell;
use std::collections::HashSet;
use std::future::Future;
use std::sync::Mutex;

use crate::events::{Event, EventKind};
use crate::manager::Manager;
use crate::model::JobId;

use super::format;

/// Most event lines appended to one answer; the rest follow in the next ones.
pub const MAX_PER_ANSWER: usize = 20;
/// Bytes of event lines after which an answer takes no more (the line that
/// crosses it is kept whole: a watch hit with its snippet).
pub const ANSWER_BYTES: usize = 4 * 1024;
/// Bytes of event lines in one `events` page.
pub const PAGE_BYTES: usize = 8 * 1024;

tokio::task_local! {
    static COVERED: RefCell<Vec<(JobId, u64)>>;
    /// The JSON-RPC id of the tool call being answered.
    static CALL_ID: Option<String>;
}

/// The JSON-RPC id of the tool call being answered (inside [`scope`]).
pub fn call_id() -> Option<String> {
    CALL_ID.try_with(Clone::clone).ok().flatten()
}

/// Say that the answer being built reports `id`'s lifecycle so far.
pub fn cover(manager: &Manager, id: &JobId) {
    let upto = manager.events_log().next_seq();
    let _ = COVERED.try_with(|c| c.borrow_mut().push((id.clone(), upto)));
}

/// Run the tool call `call_id`, collecting what it [`cover`]s.
pub async fn scope<T>(call_id: Option<String>, fut: impl Future<Output = T>) -> (T, Vec<(JobId, u64)>) {
    CALL_ID
        .scope(
            call_id,
            COVERED.scope(RefCell::new(Vec::new()), async {
                let out = fut.await;
                let covered = COVERED.with(|c| c.take());
                (out, covered)
            }),
        )
        .await
}

struct State {
    /// Seq of the first event not yet read in the session's own scope.
    cursor: u64,
    /// Seq of the first event not yet read in the all-jobs scope: behind
    /// [`State::cursor`] by the events read while only its own were asked.
    all_cursor: u64,
    /// Jobs this client started.
    own: HashSet<JobId>,
    /// Jobs seen queued: their start is news.
    queued: HashSet<JobId>,
    /// Jobs this client asked about (a tool call on them): theirs too.
    touched: HashSet<JobId>,
    /// Every job's events, not only the session's (`events` `all: true`).
    all: bool,
}

/// The per-client cursor into the manager's event log.
pub struct Backlog {
    state: Mutex<State>,
}

impl Backlog {
    pub fn new(manager: &Manager) -> Self {
        Backlog {
            state: Mutex::new(State {
                cursor: manager.events_log().next_seq(),
                all_cursor: manager.events_log().next_seq(),
                own: HashSet::new(),
                queued: HashSet::new(),
                touched: HashSet::new(),
                all: false,
            }),
        }
    }

    /// Remember that this client started `id` (its start is not news to it).
    pub fn own(&self, id: &JobId) {
        self.state.lock().unwrap().own.insert(id.clone());
    }

    /// Tell every job's events from now on (`true`), or the session's only.
    pub fn set_all(&self, all: bool) {
        self.state.lock().unwrap().all = all;
    }

    /// The unseen events worth telling, formatted, advancing the cursor.
    /// `meta` may add a suffix to each line (a tool set's event fields).
    /// `may_read`: the jobs `all: true` reaches (`apart.rs`).
    pub fn take(
        &self,
        manager: &Manager,
        covered: &[(JobId, u64)],
        meta: &dyn Fn(&Event) -> Option<String>,
        may_read: &dyn Fn(&JobId) -> bool,
    ) -> Vec<String> {
        let mut st = self.state.lock().unwrap();
        st.touched.extend(covered.iter().map(|(id, _)| id.clone()));
        let events = manager.events(st.from(), 10_000);
        let mut lines: Vec<String> = Vec::new();
        let mut bytes = 0;
        let mut pending = 0;
        for e in &events {
            let told = st.told(e);
            if lines.len() >= MAX_PER_ANSWER || bytes >= ANSWER_BYTES {
                pending += usize::from(!told && worth(e, &st, covered, may_read));
                continue;
            }
            st.advance(e.seq + 1);
            if matches!(e.kind, EventKind::Queued) {
                st.queued.insert(e.job.clone());
            }
            if !told && worth(e, &st, covered, may_read) {
                let mut l = line(manager, e);
                if let Some(m) = meta(e) {
                    l = format!("{l} {m}");
                }
                bytes += l.len() + 1;
                lines.push(l);
            }
        }
        if pending > 0 {
            lines.push(format!("… {pending} more events follow in your next answers"));
        }
        lines
    }

    /// Events from `since` (default: the scope's cursor, skipping its own
    /// events already told) for the `events` tool; marks what it shows as
    /// seen in each scope whose cursor it reads from or before.
    /// A page is at most `limit` events and [`PAGE_BYTES`] of lines; the
    /// seq returned is where the next page starts.
    pub fn list(
        &self,
        manager: &Manager,
        (since, limit): (Option<u64>, usize),
        may_read: &dyn Fn(&JobId) -> bool,
    ) -> (Vec<String>, u64) {
        let mut st = self.state.lock().unwrap();
        let from = since.unwrap_or(st.from());
        let events = manager.events(from, limit);
        let mut next = events.last().map(|e| e.seq + 1).unwrap_or(from);
        let mut lines = Vec::new();
        let mut bytes = 0;
        for e in events.iter() {
            if !((st.all && may_read(&e.job)) || st.is_mine(e)) || (since.is_none() && st.told(e)) {
                continue;
            }
            let l = line(manager, e);
            if bytes + l.len() + 1 > PAGE_BYTES && !lines.is_empty() {
                next = e.seq;
                break;
            }
            bytes += l.len() + 1;
            lines.push(l);
        }
        if from <= st.cursor {
            st.cursor = st.cursor.max(next);
        }
        if st.all && from <= st.all_cursor {
            st.all_cursor = st.all_cursor.max(next);
        }
        (lines, next)
    }

    /// The first unseen watch hit of `job`: an answer now would end with it.
    pub fn unseen_watch_hit(&self, manager: &Manager, job: &JobId) -> Option<u64> {
        let cursor = self.state.lock().unwrap().cursor;
        manager
            .events(cursor, 10_000)
            .into_iter()
            .find(|e| e.job == *job && matches!(e.kind, EventKind::WatchHit { .. }))
            .map(|e| e.seq)
    }
}

impl State {
    /// Where the scope asked for reads from.
    fn from(&self) -> u64 {
        if self.all { self.all_cursor } else { self.cursor }
    }

    /// Everything before `next` read in the scope asked for; the all-jobs
    /// scope holds the session's own, so reading it reads both.
    fn advance(&mut self, next: u64) {
        self.cursor = self.cursor.max(next);
        if self.all {
            self.all_cursor = self.all_cursor.max(next);
        }
    }

    /// Read from the all-jobs cursor, an event the own-scope cursor has
    /// already passed over and that is the session's own: it was told (or
    /// judged not worth telling) there, and is not told twice.
    fn told(&self, e: &Event) -> bool {
        self.all && e.seq < self.cursor && self.is_mine(e)
    }

    /// An event of this session's jobs, or one every session is told.
    fn is_mine(&self, e: &Event) -> bool {
        self.own.contains(&e.job)
            || self.touched.contains(&e.job)
            || matches!(
                e.kind,
                EventKind::StoreDegraded { .. } | EventKind::StoreRecovered
            )
    }
}

fn worth(e: &Event, st: &State, covered: &[(JobId, u64)], may_read: &dyn Fn(&JobId) -> bool) -> bool {
    let is_covered = covered.iter().any(|(id, upto)| *id == e.job && e.seq < *upto);
    let own = st.own.contains(&e.job);
    if !(st.is_mine(e) || (st.all && may_read(&e.job))) {
        return false;
    }
    match &e.kind {
        // Running unsandboxed, or a request the sandbox refused, is never
        // news the agent may miss.
        EventKind::WatchHit { .. }
        | EventKind::WatchDropped { .. }
        | EventKind::Fallback { .. }
        | EventKind::EgressDenied { .. } => true,
        // Lost output and refused starts are never news the agent may miss.
        EventKind::StoreDegraded { .. } | EventKind::StoreRecovered => true,
        EventKind::Queued => !own,
        // Progress is on the job's own answer; the backlog would only be noise.
        EventKind::Pulling(_) | EventKind::Building(_) => false,
        EventKind::Started { .. } => !own || (st.queued.contains(&e.job) && !is_covered),
        EventKind::Ready { .. } | EventKind::Promoted { .. } | EventKind::Ended { .. } => !is_covered,
        // A sweep that found nothing is no news.
        EventKind::Swept { cleared, .. } => *cleared > 0,
    }
}

/// One event as one line: `[event #12] job-3 (sleep 30) ended: killed by user (exit 143)`.
pub fn line(manager: &Manager, e: &Event) -> String {
    let label = manager
        .info(&e.job)
        .map(|i| format!(" ({})", format::short(&i.label, 40)))
        .unwrap_or_default();
    let what = match &e.kind {
        EventKind::Queued => "queued: waiting for a free background slot".to_string(),
        EventKind::Fallback { note } => format!("runs on the host: {note}"),
        EventKind::Pulling(p) => p.line(),
        EventKind::Building(b) => b.line(),
        EventKind::Started {
            runner,
            start_mode,
            ports,
        } => {
            let ports: Vec<String> = ports.iter().map(|m| format!(" {}→{}", m.url(), m.port)).collect();
            format!("started ({runner}, {start_mode}){}", ports.concat())
        }
        EventKind::Ready { elapsed_ms } => {
            format!("ready after {}", format::elapsed(*elapsed_ms as f64 / 1000.0))
        }
        EventKind::WatchHit {
            line_seq,
            line,
            pattern,
            ..
        } => format!(
            "watch /{pattern}/ matched line {line_seq}: {}",
            format::short(line, 200)
        ),
        EventKind::WatchDropped { count, total } => format!(
            "{count} more watch matches not reported (over {}/s; {total} in all): read the output with `logs`",
            crate::watch::HITS_PER_SEC
        ),
        EventKind::Promoted { reason, .. } => format!("promoted: {reason}"),
        EventKind::EgressDenied { request, reason } => {
            format!("egress denied: {request} ({reason}; allow hosts with egress_allow in berth.toml)")
        }
        EventKind::StoreDegraded { reason } => format!(
            "store cannot be written ({reason}): newest output held in memory, older lines may be lost, new jobs refused"
        ),
        EventKind::StoreRecovered => "store can be written again: held output stored".to_string(),
        EventKind::Swept {
            cleared, incomplete, ..
        } => format!(
            "cleared the set-uid/set-gid bits of {cleared} file(s) it left in the workspace{}",
            if *incomplete {
                " (the walk stopped at its bound)"
            } else {
                ""
            }
        ),
        EventKind::Ended {
            status,
            ended_by,
            exit_code,
            reason,
            ..
        } => format!(
            "ended: {}",
            format::end_words(status, *ended_by, *exit_code, reason.as_deref())
        ),
    };
    format!("[event #{}] {}{label} {what}", e.seq, e.job)
}
