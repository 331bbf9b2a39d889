//! Output as readers see it: numbered [`Line`]s from two [`Stream`]s, asked
//! for with a [`LogQuery`] and answered with a [`LogPage`].

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Which stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One line of output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    pub seq: u64,
    pub stream: Stream,
    pub ts: DateTime<Utc>,
    pub text: String,
}

/// Seqs `from..=to` whose lines are gone: the store could not be written
/// when they came (a full or failing disk), and memory held only the newest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gap {
    pub from: u64,
    pub to: u64,
}

impl Gap {
    /// How many lines the gap stands for.
    pub fn lines(&self) -> u64 {
        self.to + 1 - self.from
    }
}

/// A page of lines read by seq. At most a page is ever answered (see
/// `output::PAGE_LINES`, `output::PAGE_BYTES`): read on from `next_seq`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LogPage {
    pub lines: Vec<Line>,
    /// Seq to ask for next (`since = next_seq`).
    pub next_seq: u64,
    /// More lines exist at or after `next_seq` right now.
    pub has_more: bool,
    /// Seq of the last line written so far (0 = none).
    pub last_seq: u64,
    /// Lowest seq still readable; lines below it are gone (said, never skipped silently).
    pub first_available_seq: u64,
    /// Set when the page would have started below `first_available_seq`: the
    /// lines before this seq were dropped by the per-job output cap
    /// (`max_output`), and the page starts here instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated_before: Option<u64>,
    /// Seq ranges between the page's first seq and `next_seq` whose lines
    /// were lost (never skipped silently): each gap is said once, in the
    /// page whose range covers it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<Gap>,
}

/// What a reader can ask for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LogQuery {
    /// Last N lines (wins over `since`).
    pub tail: Option<usize>,
    /// First seq to return (inclusive; 0 or 1 = from the start).
    pub since: Option<u64>,
    /// Most lines to return.
    pub limit: Option<usize>,
    pub stream: Option<Stream>,
}
