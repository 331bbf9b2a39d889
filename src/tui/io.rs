//! The panel's side of the socket: carries out the [`Action`]s the app asks
//! for as background tasks, so the screen never waits on the manager, and
//! sends the answers back over one channel as [`Reply`]s (for the app, a
//! [`Msg`]). `Action` and `Msg` are the whole vocabulary between the state
//! in `app.rs` and the manager.
//!
//! Three kinds of task: the events follower (one for the whole session,
//! reconnecting after a second when the manager goes away), the log follower
//! of the open details/diagnostic screen (replaced when another opens), and
//! one-shot requests (kill, resume, background, copy, refresh; most are in
//! `io/requests.rs`). Refreshes are coalesced: while one batch is in flight,
//! further ids only join the next, so a burst of events costs one request
//! per job, not one per event.

mod requests;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::task::JoinHandle;

use super::logpane::{OlderPage, PaneKind};
use crate::api::JobView;
use crate::api::client::Client;
use crate::events::Event;
use crate::model::{JobId, JobInfo};
use crate::output::{Line, LogPage, LogQuery};

/// Wait before following events again once the manager went away.
const RECONNECT: Duration = Duration::from_secs(1);
/// Lines per request when collecting a whole log for `c`.
const COPY_PAGE: usize = 5000;

/// Work for the run loop; the answers come back as [`Msg`]s.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    None,
    Quit,
    Kill(JobId),
    Background(JobId),
    Resume(JobId),
    /// Fetch the job and the first page of its log, then follow new lines.
    Open(JobId, PaneKind),
    /// Stop following the open pane's log.
    Close,
    LoadOlder(JobId, OlderPage),
    Copy(JobId),
    Refresh(JobId),
    RefreshAll,
}

/// What the manager said.
#[derive(Debug, Clone)]
pub enum Msg {
    Jobs(Vec<JobInfo>),
    Job(Box<JobView>),
    Event(Box<Event>),
    Connected(bool),
    LogPage(JobId, LogPage),
    LogLine(JobId, Line),
    LogEnd(JobId),
    Resumed {
        from: JobId,
        view: Box<JobView>,
    },
    Notice(String),
    /// A text for the open pane (a layer's diff).
    Text(JobId, String),
}

/// What a background task reports.
pub enum Reply {
    /// For the app.
    App(Msg),
    /// A refresh batch finished; the next may start.
    RefreshDone,
    /// A whole log, ready for the clipboard.
    CopyText { job: JobId, text: String, lines: usize },
}

/// Runs the app's actions against one manager.
pub struct Io {
    client: Client,
    tx: UnboundedSender<Reply>,
    copies_dir: PathBuf,
    events: Option<JoinHandle<()>>,
    pane: Option<JoinHandle<()>>,
    pending: BTreeSet<JobId>,
    refreshing: bool,
}

impl Io {
    pub fn new(client: Client, copies_dir: PathBuf) -> (Io, UnboundedReceiver<Reply>) {
        let (tx, rx) = unbounded_channel();
        let io = Io {
            client,
            tx,
            copies_dir,
            events: None,
            pane: None,
            pending: BTreeSet::new(),
            refreshing: false,
        };
        (io, rx)
    }

    fn spawn<F>(&self, task: impl FnOnce(Client, UnboundedSender<Reply>) -> F) -> JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        tokio::spawn(task(self.client.clone(), self.tx.clone()))
    }

    /// Start following the manager's events (for the whole session).
    pub fn follow_events(&mut self) {
        self.events = Some(self.spawn(follow_events));
    }

    pub fn perform(&mut self, action: Action) {
        match action {
            Action::None | Action::Quit => {}
            Action::Kill(id) => {
                self.spawn(|c, tx| requests::kill(c, tx, id));
            }
            Action::Background(id) => {
                self.spawn(|c, tx| requests::background(c, tx, id));
            }
            Action::Resume(id) => {
                self.spawn(|c, tx| requests::resume(c, tx, id));
            }
            Action::Open(id, PaneKind::Layer) => {
                self.close_pane();
                self.refresh(id.clone());
                self.spawn(|c, tx| requests::layer_diff(c, tx, id));
            }
            Action::Open(id, kind) => {
                self.close_pane();
                self.refresh(id.clone());
                let first = kind.first_page();
                self.pane = Some(self.spawn(|c, tx| follow_log(c, tx, id, first)));
            }
            Action::Close => self.close_pane(),
            Action::LoadOlder(id, older) => {
                self.spawn(|c, tx| requests::load_older(c, tx, id, older));
            }
            Action::Copy(id) => {
                self.spawn(|c, tx| requests::copy(c, tx, id));
            }
            Action::Refresh(id) => self.refresh(id),
            Action::RefreshAll => {
                self.spawn(requests::refresh_all);
            }
        }
    }

    fn close_pane(&mut self) {
        if let Some(t) = self.pane.take() {
            t.abort();
        }
    }

    /// Fetch `id` again (with usage and snippet), batched with other refreshes.
    pub fn refresh(&mut self, id: JobId) {
        self.pending.insert(id);
        self.pump();
    }

    pub fn refresh_done(&mut self) {
        self.refreshing = false;
        self.pump();
    }

    fn pump(&mut self) {
        if self.refreshing || self.pending.is_empty() {
            return;
        }
        self.refreshing = true;
        let ids = std::mem::take(&mut self.pending);
        self.spawn(|c, tx| async move {
            for id in ids {
                if let Ok(view) = c.info_with_usage(&id).await {
                    let _ = tx.send(Reply::App(Msg::Job(Box::new(view))));
                }
            }
            let _ = tx.send(Reply::RefreshDone);
        });
    }

    /// Put a log on the terminal's clipboard (OSC 52: the terminal the
    /// panel is drawn on sets its clipboard, over ssh and tmux too, with no
    /// display server) and always in a file, since a terminal may not
    /// honour OSC 52 and none takes an unbounded payload. Returns the notice
    /// to show.
    pub fn copy_out(&mut self, job: &JobId, text: &str, lines: usize) -> String {
        let path = self.copies_dir.join(format!("{job}.log"));
        let written = std::fs::create_dir_all(&self.copies_dir).and_then(|_| std::fs::write(&path, text));
        let clipboard = set_clipboard(text);
        match (clipboard, written) {
            (Ok(()), Ok(())) => format!(
                "copied {lines} lines of {job} to the terminal clipboard; also saved to {}",
                path.display()
            ),
            (Ok(()), Err(e)) => format!(
                "copied {lines} lines of {job} to the terminal clipboard (could not save {}: {e})",
                path.display()
            ),
            (Err(why), Ok(())) => format!("{lines} lines of {job} saved to {} ({why})", path.display()),
            (Err(why), Err(e)) => format!(
                "could not copy the log of {job}: {why}; could not write {}: {e}",
                path.display()
            ),
        }
    }
}

/// The largest text sent to the terminal's clipboard: terminals drop longer
/// OSC 52 payloads (xterm, hterm and tmux cap them near 100 000 base64
/// characters, which is 75 000 bytes).
pub const CLIPBOARD_MAX: usize = 74_000;

/// Send `text` to the terminal's clipboard with OSC 52. The payload is
/// base64, so no byte of the log reaches the terminal as a control.
fn set_clipboard(text: &str) -> Result<(), String> {
    if text.len() > CLIPBOARD_MAX {
        return Err(format!(
            "too large for the terminal clipboard: {} KiB, at most {} KiB",
            text.len().div_ceil(1024),
            CLIPBOARD_MAX / 1024
        ));
    }
    crossterm::execute!(
        std::io::stdout(),
        crossterm::clipboard::CopyToClipboard::to_clipboard_from(text.as_bytes())
    )
    .map_err(|e| format!("the terminal clipboard failed: {e}"))
}

impl Drop for Io {
    fn drop(&mut self) {
        self.close_pane();
        if let Some(t) = self.events.take() {
            t.abort();
        }
    }
}

/// Every event from the first on, reconnecting when the stream ends. The
/// backlog replays history (the app only refreshes jobs it does not know).
async fn follow_events(client: Client, tx: UnboundedSender<Reply>) {
    let mut since = 1;
    loop {
        if let Ok(mut sse) = client.follow(&format!("/v1/events/follow?since={since}")).await {
            if tx.send(Reply::App(Msg::Connected(true))).is_err() {
                return;
            }
            while let Some((kind, data)) = sse.next().await {
                let Ok(event) = serde_json::from_str::<Event>(&data) else {
                    continue;
                };
                if kind != "event" {
                    continue;
                }
                since = event.seq + 1;
                if tx.send(Reply::App(Msg::Event(Box::new(event)))).is_err() {
                    return;
                }
            }
        }
        if tx.send(Reply::App(Msg::Connected(false))).is_err() {
            return;
        }
        tokio::time::sleep(RECONNECT).await;
    }
}

/// The newest `first` lines of `job`, then every new line until it ends.
async fn follow_log(client: Client, tx: UnboundedSender<Reply>, job: JobId, first: usize) {
    let send = |msg| tx.send(Reply::App(msg)).is_ok();
    let tail = LogQuery {
        tail: Some(first),
        ..Default::default()
    };
    let page = match client.logs(&job, &tail).await {
        Ok(p) => p,
        Err(e) => {
            send(Msg::Notice(format!("could not read the log of {job}: {e}")));
            return;
        }
    };
    let next = page.next_seq;
    if !send(Msg::LogPage(job.clone(), page)) {
        return;
    }
    let Ok(mut sse) = client
        .follow(&format!("/v1/jobs/{job}/logs/follow?since={next}"))
        .await
    else {
        return;
    };
    while let Some((kind, data)) = sse.next().await {
        let ok = match kind.as_str() {
            "line" => match serde_json::from_str::<Line>(&data) {
                Ok(line) => send(Msg::LogLine(job.clone(), line)),
                Err(_) => true,
            },
            "end" => {
                send(Msg::LogEnd(job.clone()));
                return;
            }
            _ => true,
        };
        if !ok {
            return;
        }
    }
}

/// The whole log of `job` as text, paged by seq; and its line count.
async fn whole_log(client: &Client, job: &JobId) -> crate::Result<(String, usize)> {
    let (mut text, mut lines, mut since) = (String::new(), 0, 1);
    loop {
        let q = LogQuery {
            since: Some(since),
            limit: Some(COPY_PAGE),
            ..Default::default()
        };
        let page = client.logs(job, &q).await?;
        for l in &page.lines {
            text.push_str(&l.text);
            text.push('\n');
        }
        lines += page.lines.len();
        if !page.has_more || page.next_seq <= since {
            return Ok((text, lines));
        }
        since = page.next_seq;
    }
}
