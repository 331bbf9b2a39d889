//! berth: a sandboxed process manager for AI coding agents, the people who
//! watch them, and CI.
//!
//! A caller starts a job (a container or a host process group) and gets its
//! id at once, waits *smartly* until it is ready (port, log line, HTTP), reads
//! its output by tail or by seq cursor, gets events, and stops it. Nothing
//! outlives the manager.
//!
//! ```no_run
//! # async fn demo() -> berth::Result<()> {
//! use berth::{Config, Manager, JobSpec, ReadyCondition};
//! use std::time::Duration;
//! let manager = Manager::open(Config::isolated("/tmp/berth-demo", "demo")).await?;
//! let job = manager
//!     .start(JobSpec::shell("echo ready; sleep 30").background())
//!     .await?;
//! job.wait(&[ReadyCondition::log("ready")], Duration::from_secs(5)).await?;
//! job.kill().await?;
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - [`job`]: the rules of the job model: parsing what callers type and checking a spec (the data is in [`model`]).
//! - [`manager`]: registry, cap and queue, lifecycle, session-owned jobs, teardown.
//! - [`runner`]: how a job runs: `host` (a process group led by the `shim`, a
//!   child subreaper, so nothing a job starts escapes it) and `docker` (bollard).
//! - [`layers`]: where a job's writes go in `layer` mode: the overlay's upper
//!   directory, read as changes (`berth diff`), applied to the checkout or discarded.
//! - [`output`]: line splitting, seq numbering, the bounded ring, pages, the follow stream.
//! - [`watch`]: regex watchers that turn output lines into events.
//! - [`events`]: the global event log with its own seq.
//! - [`ready`]: readiness conditions (port, log, HTTP) and `wait_for_port`.
//! - [`safety`]: command filter, workspace guard, security log.
//! - [`api`], [`daemon`]: the socket API (server, client, the bounded
//!   connection loop in `listen`, MCP sessions upgraded from `POST /v1/mcp`
//!   in `attach`) and serving it.
//! - [`persist`]: what output and events need from storage (traits the store implements).
//! - [`store`]: the SQLite store; `store::private` keeps state 0700/0600.
//! - [`mcp`]: the MCP server for agents (hosting the instance, or a session
//!   on the manager that does); [`tui`]: the terminal panel.
//! - [`card`]: the human-readable card of a job.
//! - [`inert`]: job-controlled text made visible (not obeyed) on its way to a terminal or a model.
//! - [`images`]: which image a job runs in and why, the pull policy.
//! - [`net`]: how container jobs talk to the world: berth's port forwarder,
//!   the egress proxy and its allowlist.
//! - [`config`]: the user's config + `berth.toml` + `BERTH_*` + flags;
//!   [`trust`]: which project files may loosen the sandbox (`berth trust`).
//! - [`cli`]: the `berth` command line (`main.rs` only calls into it).
//! - [`logfile`]: the process's own log: never panics, capped and rotated.
//! - [`embed`]: berth inside another program: its executable serves the
//!   host-job shim and the crash watchdog; [`claim`]: one manager per instance.
//!
//! The faces (`cli`, `daemon`, `mcp`, `tui`) are cargo features, on by
//! default; without them the crate is the core library. `test-util` adds the
//! scripted fake runner ([`runner::fake`]).
//! - [`error`]: typed errors, one variant per failed operation.

pub mod api;
pub mod card;
pub mod claim;
#[cfg(feature = "cli")]
pub mod cli;
pub mod config;
#[cfg(feature = "daemon")]
pub mod daemon;
pub mod embed;
pub mod error;
pub mod events;
pub mod images;
pub mod inert;
pub mod job;
pub mod layers;
pub mod logfile;
pub mod manager;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod model;
pub mod net;
pub mod output;
pub mod persist;
pub mod procinfo;
pub mod ready;
pub mod runner;
pub mod safety;
pub mod store;
pub mod teardown;
pub mod trust;
#[cfg(feature = "tui")]
pub mod tui;
pub mod watch;
pub mod watchdog;

pub use config::Config;
pub use error::{Error, Result};
pub use events::{Event, EventKind};
pub use manager::{Foreground, JobHandle, KillOutcome, KillRequest, ListFilter, Manager};
pub use model::{EndedBy, JobId, JobInfo, JobSpec, JobStatus, PortSpec, RunnerChoice, StartMode};
pub use output::{Line, LogPage, LogQuery, Stream};
pub use ready::{ReadyCondition, WaitOutcome};
