//! The TUI panel (`berth tui`): a live view of a running manager's jobs,
//! attached through its socket, for the person watching the agents.
//!
//! Theory of operation. [`run`] first checks that a manager answers — if none
//! does it returns [`Error::NoDaemon`] before the terminal is touched — then
//! takes the terminal (raw mode, alternate screen, and a panic hook that gives
//! it back before the panic message is printed) and runs one loop that
//! `select!`s over three sources: key presses and resizes, answers from the
//! manager (events from `/v1/events/follow`, refreshed jobs, log lines), and a
//! slow tick for the clocks. The screen is redrawn only after one of them
//! changed something; ratatui then writes only the cells that differ, so
//! nothing flickers and an idle panel costs nothing.
//!
//! # Layout
//! - `app.rs`: the state (`App`), keys → actions, answers → state.
//! - `io.rs`: actions → requests to the manager, run as background tasks.
//! - `view.rs`: the panel (tabs, table, footer); `details.rs`: the details
//!   and diagnostic screens; `logpane.rs`: a job's loaded log and its scroll.
//! - `model.rs`: tabs, row order, badges, and events applied to job records.
//! - `format.rs`: cell texts (badges, clocks, ETA) and sanitising job output.

mod app;
mod details;
mod footer;
mod format;
mod io;
mod logpane;
mod model;
mod view;

#[cfg(test)]
mod tests;

use std::io::{IsTerminal, Stdout};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{Local, Offset, Utc};
use crossterm::event::{Event as TermEvent, EventStream, KeyEventKind};
use crossterm::terminal::{EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode};
use futures_util::StreamExt;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::signal::unix::{SignalKind, signal};

use crate::api::client::Client;
use crate::api::socket_path;
use crate::config::Config;
use crate::error::{Error, Result};
use app::{App, Msg};
use io::{Io, Reply};

/// How often clocks (runtimes, ETAs) move on; also paces usage refreshes.
pub const TICK: Duration = Duration::from_secs(1);
/// The open job's usage is refreshed every this many ticks.
const USAGE_TICKS: u64 = 3;
/// Most answers applied before the screen is redrawn, so a flood of log
/// lines cannot starve the keyboard.
const BATCH: usize = 1000;

/// Attach to the instance's manager and run the panel until the user leaves.
pub async fn run(config: Config) -> Result<()> {
    let no_daemon = || Error::NoDaemon {
        instance: config.instance.clone(),
        socket: socket_path(&config),
    };
    let client = Client::connect(&config)
        .await
        .map_err(|_| no_daemon())?
        .named("tui");
    // Taken before the list, so events racing with it count as fresh.
    let attached = Utc::now();
    let jobs = client.panel_jobs().await.map_err(|_| no_daemon())?;
    if !std::io::stdout().is_terminal() {
        return Err(Error::io(
            "draw the panel on",
            "stdout",
            std::io::Error::other("stdout is not a terminal"),
        ));
    }
    let offset = Local::now().offset().fix();
    let mut app = App::new(config.instance.clone(), attached).with_utc_offset(offset);
    app.apply(Msg::Jobs(jobs));
    let (io, replies) = Io::new(client, config.instance_dir().join("copies"));

    let _guard = TerminalGuard::enter()?;
    let backend = CrosstermBackend::new(std::io::stdout());
    let mut terminal = Terminal::new(backend).map_err(term_err)?;
    terminal.clear().map_err(term_err)?;
    event_loop(&mut terminal, app, io, replies).await
}

async fn event_loop(
    terminal: &mut Terminal<CrosstermBackend<Stdout>>,
    mut app: App,
    mut io: Io,
    mut replies: tokio::sync::mpsc::UnboundedReceiver<Reply>,
) -> Result<()> {
    io.follow_events();
    let mut keys = EventStream::new();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut ticks: u64 = 0;
    // SIGINT never comes in raw mode (Ctrl+C is a key); these still should
    // leave through the guard rather than kill us with the terminal raw.
    let mut term = signal(SignalKind::terminate()).map_err(term_err)?;
    let mut hup = signal(SignalKind::hangup()).map_err(term_err)?;
    let mut dirty = true;
    loop {
        if dirty {
            terminal.draw(|f| view::render(&app, f)).map_err(term_err)?;
            dirty = false;
        }
        tokio::select! {
            ev = keys.next() => match ev {
                Some(Ok(TermEvent::Key(key))) if key.kind != KeyEventKind::Release => {
                    let action = app.handle_key(key);
                    io.perform(action);
                    dirty = true;
                }
                Some(Ok(TermEvent::Resize(..))) => dirty = true,
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(term_err(e)),
                None => return Ok(()),
            },
            Some(reply) = replies.recv() => {
                handle_reply(&mut app, &mut io, reply);
                // Take what else is already waiting before drawing once.
                for _ in 0..BATCH {
                    match replies.try_recv() {
                        Ok(reply) => handle_reply(&mut app, &mut io, reply),
                        Err(_) => break,
                    }
                }
                dirty = true;
            }
            _ = tick.tick() => {
                ticks += 1;
                dirty = app.tick(Utc::now());
                if ticks.is_multiple_of(USAGE_TICKS)
                    && let Some(id) = app.pane_job().filter(|id| app.job(id).is_some_and(|j| j.status.is_active()))
                {
                    io.refresh(id.clone());
                }
            }
            _ = term.recv() => return Ok(()),
            _ = hup.recv() => return Ok(()),
        }
        if app.should_quit() {
            return Ok(());
        }
    }
}

fn handle_reply(app: &mut App, io: &mut Io, reply: Reply) {
    match reply {
        Reply::App(msg) => {
            let action = app.apply(msg);
            io.perform(action);
        }
        Reply::RefreshDone => io.refresh_done(),
        Reply::CopyText { job, text, lines } => {
            let notice = io.copy_out(&job, &text, lines);
            app.apply(Msg::Notice(notice));
        }
    }
}

fn term_err(e: std::io::Error) -> Error {
    Error::io("drive the terminal", "/dev/tty", e)
}

/// Whether the terminal is ours right now (raw mode, alternate screen).
static TERMINAL_TAKEN: AtomicBool = AtomicBool::new(false);
static PANIC_HOOK: Once = Once::new();

/// Takes the terminal; gives it back when dropped, on any way out.
struct TerminalGuard;

impl TerminalGuard {
    fn enter() -> Result<Self> {
        // A panic prints its message before unwinding drops the guard: the
        // hook restores first, so the message lands on the normal screen.
        PANIC_HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore_terminal();
                previous(info);
            }));
        });
        enable_raw_mode().map_err(term_err)?;
        TERMINAL_TAKEN.store(true, Ordering::SeqCst);
        let guard = TerminalGuard;
        crossterm::execute!(std::io::stdout(), EnterAlternateScreen, crossterm::cursor::Hide)
            .map_err(term_err)?;
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// Give the terminal back (once: the hook and the guard may both call it).
fn restore_terminal() {
    if TERMINAL_TAKEN.swap(false, Ordering::SeqCst) {
        let _ = disable_raw_mode();
        let _ = crossterm::execute!(std::io::stdout(), LeaveAlternateScreen, crossterm::cursor::Show);
    }
}
