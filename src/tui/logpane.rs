//! The log behind the details and diagnostic screens: which lines of one
//! job are loaded, and where the view is scrolled to.
//!
//! The view is anchored at the bottom: `back` counts lines scrolled up from
//! the newest one, and 0 means "following". Anchoring there keeps the view
//! still both when new lines arrive at the end (`back` grows by as many) and
//! when an older page is prepended at the top (nothing to adjust). Older
//! pages are fetched by seq only when the user scrolls past the first loaded
//! line, so opening a job with a huge log costs one page.

use std::collections::VecDeque;

use crate::model::JobId;
use crate::output::{Line, LogPage};

/// Lines fetched when the details screen opens, and per older page.
pub const PAGE_LINES: usize = 500;
/// The diagnostic screen shows this many of the newest lines.
pub const DIAGNOSTIC_LINES: usize = 120;
/// Most lines the details screen keeps while following a chatty job; the
/// oldest are dropped (and fetched again by seq if scrolled back to).
pub const MAX_PANE_LINES: usize = 20_000;

/// Which screen a pane belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaneKind {
    /// Card, status, timing, limits, and the whole log.
    Details,
    /// The newest [`DIAGNOSTIC_LINES`] lines, full screen.
    Diagnostic,
    /// The job's layer as a unified diff (`berth diff --patch`), full screen.
    Layer,
}

impl PaneKind {
    /// How many of the newest lines to fetch when the screen opens.
    pub fn first_page(self) -> usize {
        match self {
            PaneKind::Details | PaneKind::Layer => PAGE_LINES,
            PaneKind::Diagnostic => DIAGNOSTIC_LINES,
        }
    }
}

/// An older page to fetch: `since` (inclusive), at most `limit` lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OlderPage {
    pub since: u64,
    pub limit: usize,
}

/// One job's loaded log lines and scroll position.
#[derive(Debug, Clone)]
pub struct LogPane {
    pub job: JobId,
    pub kind: PaneKind,
    lines: VecDeque<Line>,
    first_available: u64,
    back: usize,
    loaded: bool,
    loading_older: bool,
    ended: bool,
}

impl LogPane {
    pub fn new(job: JobId, kind: PaneKind) -> Self {
        LogPane {
            job,
            kind,
            lines: VecDeque::new(),
            first_available: 1,
            back: 0,
            loaded: false,
            loading_older: false,
            ended: false,
        }
    }

    fn cap(&self) -> usize {
        match self.kind {
            PaneKind::Details | PaneKind::Layer => MAX_PANE_LINES,
            PaneKind::Diagnostic => DIAGNOSTIC_LINES,
        }
    }

    /// A page arrived: the first one (the tail), or an older one to prepend.
    pub fn apply_page(&mut self, page: LogPage) {
        self.first_available = page.first_available_seq.max(1);
        if !self.loaded {
            self.loaded = true;
            // Lines may already have come in through the follower.
            let first_followed = self.lines.front().map(|l| l.seq).unwrap_or(u64::MAX);
            for l in page.lines.into_iter().rev().filter(|l| l.seq < first_followed) {
                self.lines.push_front(l);
            }
            self.trim();
            return;
        }
        self.loading_older = false;
        let first = self.first_seq().unwrap_or(u64::MAX);
        for l in page.lines.into_iter().rev().filter(|l| l.seq < first) {
            self.lines.push_front(l);
        }
    }

    /// A new line from the follower.
    pub fn push(&mut self, line: Line) {
        if self.lines.back().is_some_and(|l| l.seq >= line.seq) {
            return; // already have it (page and follower overlap)
        }
        self.lines.push_back(line);
        if self.back > 0 {
            self.back += 1;
        }
        self.trim();
    }

    fn trim(&mut self) {
        while self.lines.len() > self.cap() {
            self.lines.pop_front();
        }
        self.back = self.back.min(self.lines.len());
    }

    /// A text that is not the job's log (its layer's diff): one numbered
    /// line each, loaded whole.
    pub fn set_text(&mut self, text: &str) {
        let ts = chrono::Utc::now();
        self.lines = text
            .lines()
            .enumerate()
            .map(|(i, t)| Line {
                seq: i as u64 + 1,
                stream: crate::output::Stream::Stdout,
                ts,
                text: t.to_string(),
            })
            .collect();
        self.trim();
        self.loaded = true;
        self.ended = true;
    }

    pub fn set_ended(&mut self) {
        self.ended = true;
    }

    pub fn ended(&self) -> bool {
        self.ended
    }

    pub fn loaded(&self) -> bool {
        self.loaded
    }

    pub fn following(&self) -> bool {
        self.back == 0
    }

    pub fn lines(&self) -> &VecDeque<Line> {
        &self.lines
    }

    pub fn first_seq(&self) -> Option<u64> {
        self.lines.front().map(|l| l.seq)
    }

    /// Lines exist before the first loaded one (details only: the diagnostic
    /// screen is the tail by definition).
    pub fn has_older(&self) -> bool {
        self.kind == PaneKind::Details && self.first_seq().is_some_and(|s| s > self.first_available)
    }

    /// Index range of the lines shown in a viewport `height` lines high.
    pub fn window(&self, height: usize) -> std::ops::Range<usize> {
        let len = self.lines.len();
        let end = len - self.back.min(len.saturating_sub(height));
        end.saturating_sub(height)..end
    }

    /// Scroll by `delta` lines (negative = up, towards older lines) in a
    /// viewport `height` high. Returns the older page to fetch when the top
    /// of what is loaded comes into view.
    pub fn scroll(&mut self, delta: isize, height: usize) -> Option<OlderPage> {
        let max_back = self.lines.len().saturating_sub(height);
        self.back = if delta < 0 {
            (self.back + delta.unsigned_abs()).min(max_back)
        } else {
            self.back.saturating_sub(delta as usize).min(max_back)
        };
        if delta < 0 && self.back == max_back {
            return self.older_page();
        }
        None
    }

    /// Jump to the oldest loaded line (fetching older ones) or back to following.
    pub fn jump(&mut self, top: bool, height: usize) -> Option<OlderPage> {
        if top {
            self.back = self.lines.len().saturating_sub(height);
            self.older_page()
        } else {
            self.back = 0;
            None
        }
    }

    fn older_page(&mut self) -> Option<OlderPage> {
        if !self.has_older() || self.loading_older {
            return None;
        }
        let first = self.first_seq()?;
        let since = first.saturating_sub(PAGE_LINES as u64).max(self.first_available);
        self.loading_older = true;
        Some(OlderPage {
            since,
            limit: (first - since) as usize,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::Stream;

    fn line(seq: u64) -> Line {
        Line {
            seq,
            stream: Stream::Stdout,
            ts: chrono::DateTime::UNIX_EPOCH,
            text: format!("line {seq}"),
        }
    }

    fn page(seqs: std::ops::RangeInclusive<u64>) -> LogPage {
        LogPage {
            next_seq: seqs.end() + 1,
            last_seq: *seqs.end(),
            lines: seqs.map(line).collect(),
            has_more: false,
            first_available_seq: 1,
            truncated_before: None,
            lost: Vec::new(),
        }
    }

    #[test]
    fn follows_at_the_bottom_and_holds_still_when_scrolled() {
        let mut p = LogPane::new(JobId::from("job-1"), PaneKind::Details);
        p.apply_page(page(1..=10));
        assert_eq!(p.window(4), 6..10);
        p.push(line(11));
        assert_eq!(p.window(4), 7..11, "following shows the new line");
        p.scroll(-2, 4);
        assert_eq!(p.window(4), 5..9);
        p.push(line(12));
        p.push(line(12)); // duplicate from an overlapping page
        assert_eq!(p.window(4), 5..9, "a scrolled view stays where it is");
        assert_eq!(p.lines().len(), 12);
        p.jump(false, 4);
        assert!(p.following());
    }

    #[test]
    fn scrolling_to_the_top_asks_for_the_page_before() {
        let mut p = LogPane::new(JobId::from("job-1"), PaneKind::Details);
        p.apply_page(page(601..=610));
        assert_eq!(p.scroll(-3, 4), None);
        let older = p.scroll(-10, 4).expect("older page");
        assert_eq!(
            older,
            OlderPage {
                since: 101,
                limit: 500
            }
        );
        assert_eq!(p.scroll(-1, 4), None, "one request at a time");
        let before = p.window(4);
        p.apply_page(page(101..=600));
        assert_eq!(p.first_seq(), Some(101));
        assert_eq!(p.window(4), before.start + 500..before.end + 500);
        assert_eq!(p.jump(true, 4), Some(OlderPage { since: 1, limit: 100 }));
    }

    #[test]
    fn diagnostic_keeps_only_the_newest_lines() {
        let mut p = LogPane::new(JobId::from("job-1"), PaneKind::Diagnostic);
        p.apply_page(page(1..=120));
        for s in 121..=130 {
            p.push(line(s));
        }
        assert_eq!(p.lines().len(), DIAGNOSTIC_LINES);
        assert_eq!(p.first_seq(), Some(11));
        assert_eq!(p.jump(true, 10), None, "no older pages in the diagnostic view");
    }
}
