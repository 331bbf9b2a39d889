//! What a caller asks of a job, as a face receives it ([`RunRequest`]): the
//! words and numbers of `berth run`'s flags and of every MCP tool set's
//! arguments (`"8080:3000"`, `"256m"`, `"isolated"`), before any of them is
//! parsed. Every face fills this one struct and turns it into a
//! [`JobSpec`](super::JobSpec) through the one conversion beside the
//! parsers (`job/request.rs`), so a value means the same, and is refused
//! with the same one-line error, whichever face it came through.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::ReadyAsk;

/// The settings a caller gave; an unset one is left to the job's project
/// (the manager fills it at admission).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunRequest {
    /// `auto`, `docker` or `host`.
    pub runner: Option<String>,
    pub image: Option<String>,
    /// `missing`, `always` or `never`.
    pub pull: Option<String>,
    /// `none` or `scoped`.
    pub engine: Option<String>,
    /// `isolated`, `bridge`, `none` or `project`.
    pub network: Option<String>,
    /// `none`, `proxy` or `all`.
    pub egress: Option<String>,
    /// `container` or `gvisor`.
    pub isolation: Option<String>,
    /// `layer`, `direct` or `read-only`.
    pub write: Option<String>,
    /// A layer to write (CLI: `--layer NAME`).
    pub layer: Option<String>,
    /// `3000`, `3000/udp`, `8080:3000`.
    pub ports: Vec<String>,
    /// Relative to the workspace root.
    pub cwd: Option<PathBuf>,
    pub cpus: Option<f64>,
    /// `256m`, `1g`, a number of bytes.
    pub memory: Option<String>,
    pub pids: Option<i64>,
    /// Can only switch a read-only root on: the project's applies whatever
    /// is asked.
    pub read_only: Option<bool>,
    /// The foreground budget in seconds.
    pub timeout: Option<f64>,
    pub keep_alive: Option<f64>,
    pub input: Option<String>,
    pub env: BTreeMap<String, String>,
    pub watch: Vec<String>,
    pub label: Option<String>,
    pub queue: bool,
    pub ready: ReadyAsk,
}
