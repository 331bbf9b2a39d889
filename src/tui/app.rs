//! The panel's state and what changes it: key presses ([`App::handle_key`])
//! and answers from the manager ([`App::apply`]). Neither does I/O: each
//! returns an [`Action`] for the run loop to carry out, so every decision
//! here is tested without a manager or a terminal. Rendering lives in
//! `view.rs` and `details.rs` and only reads this state.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, FixedOffset, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::format::is_foreground;
pub use super::io::{Action, Msg};
use super::logpane::{LogPane, PaneKind};
pub use super::model::Tab;
use super::model::{noteworthy, patch, sort_key};
use crate::model::{JobId, JobInfo};

/// What is on screen.
#[derive(Debug, Clone)]
pub enum Screen {
    Panel,
    Pane(LogPane),
}

/// The panel's whole state.
#[derive(Debug)]
pub struct App {
    instance: String,
    jobs: BTreeMap<(u64, String), JobInfo>,
    snippets: HashMap<JobId, String>,
    tab: Tab,
    /// Selected row per tab, and the job on it: the id keeps the selection on
    /// the same job when rows come and go, the index is the fallback.
    sel: [usize; 3],
    sel_id: [Option<JobId>; 3],
    /// Jobs with a `new` badge: noteworthy events not yet looked at.
    unseen: BTreeSet<JobId>,
    screen: Screen,
    notice: Option<String>,
    connected: bool,
    now: DateTime<Utc>,
    /// Events before this are history: they update jobs but earn no badge.
    attached_at: DateTime<Utc>,
    utc_offset: FixedOffset,
    quit: bool,
    /// Height of the log viewport at the last render, for PgUp/PgDn.
    pub(super) log_height: Cell<usize>,
    /// A kill asked for and not yet confirmed (`y`): one stray `k` must
    /// not stop a server.
    confirm_kill: Option<JobId>,
}

impl App {
    pub fn new(instance: impl Into<String>, now: DateTime<Utc>) -> Self {
        App {
            instance: instance.into(),
            jobs: BTreeMap::new(),
            snippets: HashMap::new(),
            tab: Tab::Running,
            sel: [0; 3],
            sel_id: [None, None, None],
            unseen: BTreeSet::new(),
            screen: Screen::Panel,
            notice: None,
            connected: true,
            now,
            attached_at: now,
            utc_offset: FixedOffset::east_opt(0).expect("zero offset"),
            quit: false,
            log_height: Cell::new(10),
            confirm_kill: None,
        }
    }

    /// Show clock times in this time zone (the viewer's local one at run time).
    pub fn with_utc_offset(mut self, offset: FixedOffset) -> Self {
        self.utc_offset = offset;
        self
    }

    // ---- reading (for the views) ----

    pub fn instance(&self) -> &str {
        &self.instance
    }
    pub fn tab(&self) -> Tab {
        self.tab
    }
    pub fn screen(&self) -> &Screen {
        &self.screen
    }
    pub fn notice(&self) -> Option<&str> {
        self.notice.as_deref()
    }
    pub fn connected(&self) -> bool {
        self.connected
    }
    pub fn now(&self) -> DateTime<Utc> {
        self.now
    }
    pub fn utc_offset(&self) -> FixedOffset {
        self.utc_offset
    }
    pub fn should_quit(&self) -> bool {
        self.quit
    }
    pub fn is_new(&self, id: &JobId) -> bool {
        self.unseen.contains(id)
    }
    pub fn job(&self, id: &JobId) -> Option<&JobInfo> {
        self.jobs.get(&sort_key(id))
    }
    pub fn snippet(&self, id: &JobId) -> &str {
        self.snippets.get(id).map(String::as_str).unwrap_or("")
    }
    pub fn rows(&self, tab: Tab) -> Vec<&JobInfo> {
        self.jobs.values().filter(|j| tab.admits(j)).collect()
    }
    /// Index of the selected row in the current tab (meaningless when empty).
    pub fn selected_index(&self) -> usize {
        self.sel[self.tab.index()]
    }
    pub fn selected(&self) -> Option<&JobInfo> {
        self.sel_id[self.tab.index()].as_ref().and_then(|id| self.job(id))
    }
    /// Any foreground job running: the footer then offers Ctrl+R.
    pub fn foreground_running(&self) -> bool {
        self.jobs.values().any(is_foreground)
    }
    /// The job of the open details/diagnostic screen.
    pub fn pane_job(&self) -> Option<&JobId> {
        match &self.screen {
            Screen::Pane(p) => Some(&p.job),
            Screen::Panel => None,
        }
    }

    // ---- changing ----

    /// Take a job's record, unless it would bring an ended job back to life:
    /// an end is final, and a resume's answer (`starting`) may arrive after
    /// the job already failed to start (its `ended` event and refresh came
    /// first), which left a `[starting]` row forever.
    fn upsert(&mut self, info: JobInfo) {
        let key = sort_key(&info.id);
        if self
            .jobs
            .get(&key)
            .is_some_and(|old| old.status.is_terminal() && !info.status.is_terminal())
        {
            return;
        }
        self.jobs.insert(key, info);
    }

    /// Keep each tab's selection on its job, or on the same row when it left.
    fn reconcile(&mut self) {
        for tab in Tab::ALL {
            let i = tab.index();
            let rows: Vec<JobId> = self.rows(tab).iter().map(|j| j.id.clone()).collect();
            if let Some(pos) = self.sel_id[i]
                .as_ref()
                .and_then(|id| rows.iter().position(|r| r == id))
            {
                self.sel[i] = pos;
            } else {
                self.sel[i] = self.sel[i].min(rows.len().saturating_sub(1));
            }
            self.sel_id[i] = rows.get(self.sel[i]).cloned();
        }
    }

    fn select(&mut self, index: usize) {
        let i = self.tab.index();
        let len = self.rows(self.tab).len();
        self.sel[i] = index.min(len.saturating_sub(1));
        self.sel_id[i] = None;
        self.reconcile();
    }

    fn move_selection(&mut self, delta: isize) {
        let cur = self.selected_index();
        self.select(cur.saturating_add_signed(delta));
    }

    fn say(&mut self, text: impl Into<String>) {
        self.notice = Some(text.into());
    }

    /// Time passed; true when something on screen shows a clock.
    pub fn tick(&mut self, now: DateTime<Utc>) -> bool {
        self.now = now;
        self.jobs.values().any(|j| j.status.is_active())
    }

    /// Apply an answer from the manager.
    pub fn apply(&mut self, msg: Msg) -> Action {
        let mut action = Action::None;
        match msg {
            Msg::Jobs(jobs) => {
                self.jobs = jobs.into_iter().map(|j| (sort_key(&j.id), j)).collect();
            }
            Msg::Job(view) => {
                self.snippets.insert(view.info.id.clone(), view.snippet);
                self.upsert(view.info);
            }
            Msg::Event(e) => {
                let fresh = e.ts >= self.attached_at;
                let looking = self.pane_job() == Some(&e.job);
                if fresh && noteworthy(&e.kind) && !looking {
                    self.unseen.insert(e.job.clone());
                }
                // Show what the event says at once; the refresh fills in the rest.
                if fresh && let Some(info) = self.jobs.get_mut(&sort_key(&e.job)) {
                    patch(info, &e);
                }
                // History is already in the job list fetched at start.
                if fresh || self.job(&e.job).is_none() {
                    action = Action::Refresh(e.job.clone());
                }
            }
            Msg::Connected(up) => {
                if up && !self.connected {
                    action = Action::RefreshAll; // the manager may have restarted
                }
                self.connected = up;
            }
            Msg::LogPage(job, page) => self.with_pane(&job, |p| p.apply_page(page)),
            Msg::LogLine(job, line) => self.with_pane(&job, |p| p.push(line)),
            Msg::LogEnd(job) => self.with_pane(&job, LogPane::set_ended),
            Msg::Text(job, text) => self.with_pane(&job, |p| p.set_text(&text)),
            Msg::Resumed { from, view } => {
                let id = view.info.id.clone();
                self.say(format!("{from} resumed as {id}"));
                self.snippets.insert(id.clone(), view.snippet);
                self.upsert(view.info);
                // Fetch it again: its start may have failed meanwhile.
                action = Action::Refresh(id.clone());
                if let Screen::Pane(_) = self.screen {
                    self.screen = Screen::Panel;
                    action = Action::Close;
                }
                // The tab the new job is in (Failed when it already failed to start).
                self.tab = Tab::ALL
                    .into_iter()
                    .find(|t| self.job(&id).is_some_and(|j| t.admits(j)))
                    .unwrap_or(Tab::Running);
                self.sel_id[self.tab.index()] = Some(id);
            }
            Msg::Notice(text) => self.say(text),
        }
        self.reconcile();
        action
    }

    fn with_pane(&mut self, job: &JobId, f: impl FnOnce(&mut LogPane)) {
        if let Screen::Pane(p) = &mut self.screen
            && &p.job == job
        {
            f(p);
        }
    }

    /// A key was pressed.
    pub fn handle_key(&mut self, key: KeyEvent) -> Action {
        if key.kind == KeyEventKind::Release {
            return Action::None;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) {
            return match key.code {
                KeyCode::Char('c') => {
                    self.quit = true;
                    Action::Quit
                }
                KeyCode::Char('r') => self.send_to_background(),
                _ => Action::None,
            };
        }
        // A kill waiting for its `y`: that key kills, any other cancels.
        if let Some(id) = self.confirm_kill.take() {
            if key.code == KeyCode::Char('y') {
                self.say(format!("stopping {id}…"));
                return Action::Kill(id);
            }
            self.say(format!("{id} keeps running"));
            return Action::None;
        }
        match self.screen {
            Screen::Panel => self.panel_key(key.code),
            Screen::Pane(_) => self.pane_key(key.code),
        }
    }

    fn panel_key(&mut self, code: KeyCode) -> Action {
        let selected = self.selected().map(|j| j.id.clone());
        match code {
            KeyCode::Left | KeyCode::BackTab => self.tab = self.tab.step(2),
            KeyCode::Right | KeyCode::Tab => self.tab = self.tab.step(1),
            KeyCode::Up => self.move_selection(-1),
            KeyCode::Down => self.move_selection(1),
            KeyCode::PageUp => self.move_selection(-10),
            KeyCode::PageDown => self.move_selection(10),
            KeyCode::Home => self.select(0),
            KeyCode::End => self.select(usize::MAX),
            KeyCode::Char('q') | KeyCode::Esc => {
                self.quit = true;
                return Action::Quit;
            }
            KeyCode::Enter => return selected.map_or(Action::None, |id| self.open(id, PaneKind::Details)),
            KeyCode::Char('d') => {
                return selected.map_or(Action::None, |id| self.open(id, PaneKind::Diagnostic));
            }
            KeyCode::Char('l') => {
                return selected.map_or(Action::None, |id| self.open(id, PaneKind::Layer));
            }
            KeyCode::Char('k') => return selected.map_or(Action::None, |id| self.kill(id)),
            KeyCode::Char('r') => return selected.map_or(Action::None, |id| self.resume(id)),
            _ => {}
        }
        Action::None
    }

    fn pane_key(&mut self, code: KeyCode) -> Action {
        let height = self.log_height.get().max(1);
        let Screen::Pane(pane) = &mut self.screen else {
            return Action::None;
        };
        let job = pane.job.clone();
        let page = height.saturating_sub(1).max(1) as isize;
        let older = match code {
            KeyCode::Up => pane.scroll(-1, height),
            KeyCode::Down => pane.scroll(1, height),
            KeyCode::PageUp => pane.scroll(-page, height),
            KeyCode::PageDown => pane.scroll(page, height),
            KeyCode::Home => pane.jump(true, height),
            KeyCode::End => pane.jump(false, height),
            KeyCode::Char('q') | KeyCode::Esc | KeyCode::Enter => {
                self.screen = Screen::Panel;
                return Action::Close;
            }
            KeyCode::Char('c') => {
                self.say(format!("copying the log of {job}…"));
                return Action::Copy(job);
            }
            KeyCode::Char('k') => return self.kill(job),
            KeyCode::Char('r') => return self.resume(job),
            KeyCode::Char('l') => return self.open(job, PaneKind::Layer),
            _ => None,
        };
        older.map_or(Action::None, |p| Action::LoadOlder(job, p))
    }

    fn open(&mut self, id: JobId, kind: PaneKind) -> Action {
        self.unseen.remove(&id);
        self.screen = Screen::Pane(LogPane::new(id.clone(), kind));
        Action::Open(id, kind)
    }

    fn kill(&mut self, id: JobId) -> Action {
        match self.job(&id) {
            Some(j) if j.status.is_active() => {
                self.say(format!(
                    "kill {id} ({})? y to stop it, any other key keeps it",
                    sanitize_short(&j.command)
                ));
                self.confirm_kill = Some(id);
                Action::None
            }
            _ => {
                self.say(format!("{id} is not running: k stops running jobs"));
                Action::None
            }
        }
    }

    fn resume(&mut self, id: JobId) -> Action {
        match self.job(&id) {
            Some(j) if j.status.is_terminal() => {
                self.say(format!("resuming {id}…"));
                Action::Resume(id)
            }
            _ => {
                self.say(format!(
                    "{id} is still running: r resumes completed or failed jobs"
                ));
                Action::None
            }
        }
    }

    /// Ctrl+R: the job on screen (details) or selected, if it is a foreground
    /// one; else the only foreground job, as the footer hint promises.
    fn send_to_background(&mut self) -> Action {
        let target = self.pane_job().or(self.selected().map(|j| &j.id)).cloned();
        if let Some(id) = target.filter(|id| self.job(id).is_some_and(is_foreground)) {
            self.say(format!("moving {id} to background…"));
            return Action::Background(id);
        }
        let fg: Vec<JobId> = self
            .jobs
            .values()
            .filter(|j| is_foreground(j))
            .map(|j| j.id.clone())
            .collect();
        match fg.as_slice() {
            [only] => {
                self.say(format!("moving {only} to background…"));
                Action::Background(only.clone())
            }
            [] => {
                self.say("no foreground job: Ctrl+R moves a foreground job to background");
                Action::None
            }
            _ => {
                self.say("several foreground jobs: select one, then Ctrl+R");
                Action::None
            }
        }
    }
}

/// A command, on one line and at most 40 characters, for a question.
fn sanitize_short(command: &str) -> String {
    let one = super::format::sanitize(command).replace('\n', " ");
    match one.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &one[..i]),
        None => one,
    }
}
