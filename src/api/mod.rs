//! The socket API: HTTP/JSON over a Unix socket, the one protocol between the
//! manager (daemon or `berth mcp`) and its clients (CLI verbs, TUI). This
//! module holds what both sides share: the socket's location, the request and
//! answer shapes, and how errors travel (`{"error": {"code", "message"}}`).
//! The routes are listed in `API.md`; the server side is `daemon/`.

pub mod client;
pub mod frames;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::events::Event;
use crate::model::{EndedBy, JobInfo};
use crate::ready::ReadyCondition;

/// Where the instance's socket lives: `$BERTH_SOCKET`, else
/// `$XDG_RUNTIME_DIR/berth/<instance>.sock`, else `<state_dir>/run/<instance>.sock`.
pub fn socket_path(config: &Config) -> PathBuf {
    if let Some(p) = std::env::var_os("BERTH_SOCKET").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let dir = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("berth"),
        None => config.state_dir.join("run"),
    };
    dir.join(format!("{}.sock", config.instance))
}

/// Header berth's own clients name themselves with (`cli`, `tui`), so the
/// security log says who started a job; see [`client_name`].
pub const CLIENT_HEADER: &str = "x-berth-client";

/// The client a start is recorded for: berth's own front ends by the name
/// they send, anything else (curl, scripts, a missing or unknown name)
/// `api`. Only these names are taken: `mcp` changes what a start may do
/// and is never claimed through a header.
pub fn client_name(header: Option<&str>) -> &'static str {
    match header {
        Some("cli") => "cli",
        Some("tui") => "tui",
        _ => "api",
    }
}

/// The protocol `POST /v1/mcp` switches the connection to (`Upgrade:
/// berth-mcp`): MCP's JSON-RPC messages, one per line, both ways.
pub const MCP_UPGRADE: &str = "berth-mcp";

/// Query of `POST /v1/mcp`: the client's working directory (absolute; the
/// session's jobs get it as `caller_cwd`), its `BERTH_*` variables (a JSON
/// object; they become `caller_env`) and the tool set (default `canonical`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpAttachQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<String>,
}

/// Files of a running container job, as `GET /v1/jobs/{id}/archive`
/// answers: the engine's tar of `path`, base64 in `tar`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Archive {
    pub job: crate::model::JobId,
    pub path: String,
    pub bytes: u64,
    pub tar: String,
}

/// A job record plus its recent output, as `GET /v1/jobs/{id}` answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobView {
    #[serde(flatten)]
    pub info: JobInfo,
    pub snippet: String,
}

/// Answer of `POST /v1/jobs?ready_timeout=SECS`: the job once its ready
/// conditions were met (or the wait gave up), and how the wait ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreatedReady {
    pub job: JobView,
    pub ready: crate::ready::WaitOutcome,
}

/// Body of `POST /v1/jobs/{id}/wait`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitRequest {
    #[serde(default)]
    pub conditions: Vec<ReadyCondition>,
    /// Seconds (default `config::DEFAULT_WAIT_SECS`, 60).
    #[serde(default)]
    pub timeout: Option<f64>,
}

/// Body of `POST /v1/jobs/{id}/background`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackgroundRequest {
    /// Who moves it (default `user`: a person pressed Ctrl+R or ran `berth bg`).
    #[serde(default)]
    pub by: Option<EndedBy>,
}

/// Body of `POST /v1/wait_for_port`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitForPortRequest {
    #[serde(default = "localhost")]
    pub host: String,
    pub port: u16,
    #[serde(default)]
    pub timeout: Option<f64>,
}

fn localhost() -> String {
    "127.0.0.1".into()
}

/// Answer of `GET /v1/events`: a page (by count and bytes, see
/// `manager::MAX_PAGE_BYTES`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EventsPage {
    pub events: Vec<Event>,
    /// Seq to ask for next.
    pub next_seq: u64,
    /// Newer events are in the log already: ask again from `next_seq`.
    #[serde(default)]
    pub more: bool,
}

/// The header of a `GET /v1/jobs` answer when older jobs of the same filter
/// remain (the page was cut by count or by bytes): the `before` to ask for
/// next. The body stays a plain array.
pub const MORE_BEFORE_HEADER: &str = "berth-more-before";

/// Answer of `GET /v1/health`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Health {
    /// The daemon answers (also while degraded).
    pub ok: bool,
    /// `ok`, `degraded` while the store cannot be written (see `store`), or
    /// `stopping` once shutdown began (`berth up` waits for it to end).
    #[serde(default = "status_ok")]
    pub status: String,
    /// While degraded: since when, why, and how much output is held in memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreTrouble>,
    /// Said when the store was found damaged at start and started afresh
    /// (where the damaged one was moved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
    pub pid: u32,
    pub instance: String,
    pub version: String,
}

fn status_ok() -> String {
    "ok".into()
}

/// Why `/v1/health` says `degraded`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoreTrouble {
    pub since: chrono::DateTime<chrono::Utc>,
    pub reason: String,
    /// Output held in memory until the store can be written.
    pub held_bytes: usize,
}

/// The error shape on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
}

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// `POST /v1/layers/{layer}/diff`: a layer's changes as text.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffRequest {
    /// A unified diff of the text files (else one line a path).
    #[serde(default)]
    pub patch: bool,
    /// Only these paths (relative to the workspace) and what is under them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<PathBuf>,
}

/// The answer of `POST /v1/layers/{layer}/diff`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DiffAnswer {
    pub layer: String,
    pub text: String,
}

/// `POST /v1/layers/{layer}/apply`: bring a layer's changes to its checkout.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApplyRequest {
    /// Only these paths and what is under them (all when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<PathBuf>,
}

/// Most bytes of a diff's text in one answer.
pub const MAX_DIFF_BYTES: usize = 8 << 20;
