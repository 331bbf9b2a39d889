//! Reads without a daemon. `berth ps`, `logs` and `events` ask the instance's
//! daemon when one answers; otherwise they read the instance's store
//! directly (saying so on stderr), so history stays readable after `berth
//! down` or a crash. Following (`--follow`) needs a daemon: nothing would
//! write new lines without one.

use std::path::PathBuf;
use std::sync::Arc;

use crate::api::EventsPage;
use crate::api::client::Client;
use crate::api::socket_path;
use crate::error::{Error, Result};
use crate::manager::{JobPage, ListFilter, MAX_PAGE_ITEMS, newest_first, take_page};
use crate::model::{JobId, JobInfo};
use crate::output::{LogPage, LogQuery, PAGE_BYTES, PAGE_LINES};
use crate::store::Store;

/// Where reads are answered from.
pub enum Reader {
    Daemon(Client),
    /// The store, and the instance and socket to name for what needs a daemon.
    Store(Arc<Store>, String, PathBuf),
}

/// The daemon when one answers, else the instance's store (if it has one).
pub async fn reader(global: &super::Global) -> Result<Reader> {
    let config = global.config()?;
    match Client::connect(&config).await {
        Ok(c) => return Ok(Reader::Daemon(c)),
        Err(e @ Error::SocketDenied { .. }) => return Err(e),
        Err(_) => {}
    }
    let no_daemon = || Error::NoDaemon {
        instance: config.instance.clone(),
        socket: socket_path(&config),
    };
    let db = config.instance_dir().join("berth.db");
    if !db.is_file() {
        return Err(no_daemon());
    }
    eprintln!(
        "berth: no daemon answers for instance `{}`; reading its store {}",
        config.instance,
        db.display()
    );
    Ok(Reader::Store(
        Store::open_read_only(&db)?,
        config.instance.clone(),
        socket_path(&config),
    ))
}

impl Reader {
    /// The daemon's client, for what only a daemon can do (following).
    pub fn client(&self) -> Result<&Client> {
        match self {
            Reader::Daemon(c) => Ok(c),
            Reader::Store(_, instance, socket) => Err(Error::NoDaemon {
                instance: instance.clone(),
                socket: socket.clone(),
            }),
        }
    }

    pub async fn list_page(
        &self,
        filter: ListFilter,
        limit: usize,
        before: Option<&JobId>,
        usage: bool,
    ) -> Result<JobPage> {
        match self {
            // As many pages as `limit` takes.
            Reader::Daemon(c) => c.list_up_to(filter, limit, before, usage).await,
            Reader::Store(s, ..) => {
                let jobs: Vec<JobInfo> = s
                    .runs()?
                    .into_iter()
                    .map(|r| r.info)
                    .filter(|i| filter.admits(&i.status))
                    .collect();
                let mut jobs = newest_first(jobs, before, usize::MAX);
                let more = (jobs.len() > limit).then(|| jobs[limit - 1].id.clone());
                jobs.truncate(limit);
                Ok(JobPage { jobs, more })
            }
        }
    }

    /// The output of child `name` of job `id` (a container it started through its scoped engine).
    pub async fn child_logs(&self, id: &JobId, name: &str, tail: Option<usize>) -> Result<Vec<String>> {
        let store = match self {
            Reader::Daemon(c) => return Ok(c.child_logs(id, name, tail).await?.lines),
            Reader::Store(s, ..) => s,
        };
        let row = crate::store::find_run(store, id)?.ok_or_else(|| Error::UnknownJob(id.to_string()))?;
        let dir = row
            .info
            .logs
            .stdout
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default();
        crate::runner::docker::read_child_log(&dir, id.as_str(), name, tail)
    }

    pub async fn logs(&self, id: &JobId, q: &LogQuery) -> Result<LogPage> {
        let store = match self {
            Reader::Daemon(c) => return c.logs(id, q).await,
            Reader::Store(s, ..) => s,
        };
        let Some(run) = crate::store::find_run(store, id)? else {
            return Err(Error::UnknownJob(id.to_string()));
        };
        // An ended run's record says how far its output went: lines past
        // the stored ones were lost (its manager died while the store could
        // not write), and are said so.
        let mut last_seq = store.last_seq(id)?;
        if run.info.status.is_terminal() {
            last_seq = last_seq.max(run.info.last_seq);
        }
        let first = store.dropped_before(id)?;
        let limit = q.limit.unwrap_or(PAGE_LINES).clamp(1, PAGE_LINES);
        if let Some(n) = q.tail {
            let (lines, lost) = store.tail_page(id, (n.min(limit), last_seq + 1), PAGE_BYTES, q.stream)?;
            return Ok(LogPage {
                lines,
                next_seq: last_seq + 1,
                has_more: false,
                last_seq,
                first_available_seq: first,
                truncated_before: None,
                lost,
            });
        }
        let since = q.since.unwrap_or(1).max(1);
        let page = store.page(id, (since, last_seq + 1), (limit, PAGE_BYTES), q.stream)?;
        Ok(LogPage {
            lines: page.lines,
            next_seq: page.next,
            has_more: page.next <= last_seq,
            last_seq,
            first_available_seq: page.start,
            truncated_before: (since < page.start).then_some(page.start),
            lost: page.lost,
        })
    }

    pub async fn events(&self, since: u64, limit: usize) -> Result<EventsPage> {
        match self {
            Reader::Daemon(c) => c.events(since, limit).await,
            Reader::Store(s, ..) => {
                let limit = limit.clamp(1, MAX_PAGE_ITEMS);
                let (events, more) = take_page(s.events(since, limit)?, limit);
                let next_seq = events.last().map(|e| e.seq + 1).unwrap_or(since.max(1));
                // A full page may be followed by more.
                let more = more || events.len() == limit;
                Ok(EventsPage {
                    events,
                    next_seq,
                    more,
                })
            }
        }
    }
}
