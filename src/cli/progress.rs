//! Image pull and project image build progress on stderr: one line rewritten
//! in place on a terminal (cut to its width), plain lines otherwise (a pull
//! at most every 2 s, a build at each new step, and the last report). The
//! reports come from the engine directly (`berth images pull|build`), from an
//! in-process manager's events (`berth run --no-daemon`), or from the
//! daemon's event stream while its create request is under way (`berth run`,
//! with or without `-d`): that request answers only once the image is there,
//! so the job is recognised by a token of ours in its spec (`client_ref`).

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::api::client::Client;
use crate::events::{Event, EventKind};
use crate::images::{BuildProgress, ImageChoice, PullProgress};
use crate::inert::visible;

/// Before this, a create has not been slow enough to be worth a progress line.
const QUIET_START: Duration = Duration::from_millis(300);

/// Where progress lines go.
pub struct Printer {
    tty: bool,
    /// Last plain line, last build step shown, a terminal line left open.
    state: Mutex<(Option<Instant>, u32, bool)>,
    /// Something was shown.
    shown: std::sync::atomic::AtomicBool,
}

impl Printer {
    pub fn new() -> Arc<Self> {
        Arc::new(Printer {
            tty: std::io::stderr().is_terminal(),
            state: Mutex::new((None, 0, false)),
            shown: Default::default(),
        })
    }

    fn show(&self, text: &str, done: bool, new_step: Option<u32>) {
        // Build steps quote the Dockerfile and the builder's output.
        let text = &*visible(text);
        self.shown.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut state = self.state.lock().unwrap();
        let (last, step, open) = &mut *state;
        let mut e = std::io::stderr().lock();
        if self.tty {
            let width = crossterm::terminal::size()
                .map_or(100, |(w, _)| w as usize)
                .max(20);
            let cut: String = text.chars().take(width - 1).collect();
            let _ = write!(e, "\r\x1b[2K{cut}");
            if done {
                let _ = writeln!(e);
            }
            *open = !done;
            let _ = e.flush();
            return;
        }
        let stepped = new_step.is_some_and(|s| s != *step);
        if done || stepped || last.is_none_or(|t| t.elapsed() >= Duration::from_secs(2)) {
            *last = Some(Instant::now());
            if let Some(s) = new_step {
                *step = s;
            }
            let _ = writeln!(e, "{text}");
        }
    }

    pub fn pull(&self, p: &PullProgress) {
        self.show(&p.line(), p.done, None);
    }

    pub fn build(&self, b: &BuildProgress) {
        self.show(&b.line(), b.done, Some(b.step));
    }

    /// End a terminal line a report left open (the follower was stopped
    /// before the last report came).
    pub fn close(&self) {
        let mut state = self.state.lock().unwrap();
        if std::mem::take(&mut state.2) {
            let _ = writeln!(std::io::stderr());
        }
    }

    /// Show one event's progress; true when it was progress.
    fn event(&self, kind: &EventKind) -> bool {
        match kind {
            EventKind::Pulling(p) => self.pull(p),
            EventKind::Building(b) => self.build(b),
            _ => return false,
        }
        true
    }
}

/// The pull progress callback `berth images pull` hands the engine.
pub fn pull_fn(printer: Arc<Printer>) -> crate::runner::docker::ProgressFn {
    Arc::new(move |p| printer.pull(&p))
}

/// The build progress callback `berth images build project` hands the engine.
pub fn build_fn(printer: Arc<Printer>) -> crate::runner::docker::BuildProgressFn {
    Arc::new(move |b| printer.build(&b))
}

/// Show the pulls and builds of an in-process manager's starting job (the
/// only job it has); the task ends once the job started or ended.
pub fn follow_local(manager: &crate::Manager) -> (tokio::task::JoinHandle<()>, Arc<Printer>) {
    let mut events = manager.events_log().subscribe();
    let printer = Printer::new();
    let shown = printer.clone();
    let task = tokio::spawn(async move {
        while let Ok(e) = events.recv().await {
            if !printer.event(&e.kind)
                && matches!(e.kind, EventKind::Started { .. } | EventKind::Ended { .. })
            {
                break;
            }
        }
        printer.close();
    });
    (task, shown)
}

/// Show the progress of the daemon job whose spec carries `token`, until
/// the task is aborted (when the create request answered). Quiet for the
/// first [`QUIET_START`]: a start that quick had nothing to pull or build.
pub fn follow_remote(client: Client, token: String, printer: Arc<Printer>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        tokio::time::sleep(QUIET_START).await;
        let Ok(page) = client.events(u64::MAX, 1).await else {
            return;
        };
        // Progress reports come every 250 ms; starting a little back catches the latest.
        let since = page.next_seq.saturating_sub(20).max(1);
        let Ok(mut sse) = client.follow(&format!("/v1/events/follow?since={since}")).await else {
            return;
        };
        let mut mine: HashMap<String, bool> = HashMap::new();
        while let Some((_, data)) = sse.next().await {
            let Ok(event) = serde_json::from_str::<Event>(&data) else {
                continue;
            };
            if !matches!(event.kind, EventKind::Pulling(_) | EventKind::Building(_)) {
                continue;
            }
            let id = event.job.to_string();
            let ours = match mine.get(&id) {
                Some(&ours) => ours,
                None => {
                    let ours = client
                        .info(&event.job)
                        .await
                        .is_ok_and(|v| v.info.spec.client_ref.as_deref() == Some(token.as_str()));
                    mine.insert(id, ours);
                    ours
                }
            };
            if ours {
                printer.event(&event.kind);
            }
        }
    })
}

/// Stop following once the create answered: a terminal line left open is
/// closed and, when progress was shown, the answer's pull or build time
/// ends it (the last report may not have come through before the answer).
pub async fn stop_remote(task: tokio::task::JoinHandle<()>, printer: &Printer, image: Option<&ImageChoice>) {
    task.abort();
    let _ = task.await;
    printer.close();
    if !printer.shown.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let secs = |ms: u64| ms as f64 / 1000.0;
    match image.map(|i| (i, i.pull_ms, i.build_ms)) {
        Some((i, Some(ms), _)) => eprintln!("berth: pulled {} in {:.1}s", visible(&i.name), secs(ms)),
        Some((i, None, Some(ms))) => eprintln!("berth: built {} in {:.1}s", visible(&i.name), secs(ms)),
        _ => {}
    }
}

/// A token unique enough to find our own job among the daemon's.
pub fn token() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("cli-{}-{nanos}", std::process::id())
}
