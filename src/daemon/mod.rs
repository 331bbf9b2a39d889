//! Serving a manager on its instance socket: one manager per instance, the
//! socket private to its user, and teardown that leaves nothing behind.
//! `server.rs` holds the HTTP routes (the protocol's shapes are `api/`),
//! `attach.rs` upgrades a request to an MCP session, `listen.rs` accepts
//! connections, and `mcp_host.rs` is `berth mcp` hosting the instance when
//! no daemon serves it.
//!
//! [`bind`] takes the instance lock (`<instance>/daemon.lock`, held for the
//! life of the process, so a second daemon is refused with the first one's
//! pid), replaces a stale socket left by a dead daemon, and binds the socket
//! with mode 0600 in a 0700 directory. [`Daemon::serve`] answers requests until
//! its shutdown future completes (SIGINT, SIGTERM, `POST /v1/shutdown`, or
//! the caller's own, e.g. stdin EOF for `berth mcp`), then stops every job
//! (grace, then kill), closes the attached MCP sessions, stops serving, and
//! removes the socket.

mod attach;
mod exec;
mod files;
mod layers;
mod listen;
mod log_text;
mod mcp_host;
mod run;
pub mod server;
mod state;

pub use mcp_host::run_mcp;
pub(crate) use run::stream_job;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::api::socket_path;
use crate::claim::Claim;
use crate::error::{Error, Result};
use crate::manager::Manager;
use crate::mcp::session::Sessions;
use crate::store::private;
use server::{AppState, router};

/// How long in-flight requests (log follows, long polls) get after teardown.
const DRAIN_REQUESTS: Duration = Duration::from_millis(500);
/// How long attached MCP sessions get to send their last answers after teardown.
const DRAIN_SESSIONS: Duration = Duration::from_secs(2);
/// How often a serving manager applies the history policy (`keep_runs`, `keep_days`).
const PRUNE_EVERY: Duration = Duration::from_secs(60 * 60);

/// A manager with its socket bound, ready to serve.
pub struct Daemon {
    manager: Manager,
    listener: UnixListener,
    socket: PathBuf,
    claim: Claim,
    sessions: Sessions,
}

/// Take the instance lock and bind the socket for `manager`.
pub fn bind(manager: &Manager) -> Result<Daemon> {
    let config = manager.config();
    let claim = Claim::take(config)?;
    let socket = socket_path(config);
    prepare_socket_path(&socket)?;
    // Bind under a temporary name, restrict it, then rename it into place:
    // the socket never appears at its path with the umask's mode, even for
    // a moment, in a directory berth did not create.
    let mut staging = socket.clone().into_os_string();
    staging.push(format!(".{}.tmp", std::process::id()));
    let staging = PathBuf::from(staging);
    let _ = std::fs::remove_file(&staging);
    let listener = UnixListener::bind(&staging).map_err(|e| Error::io("bind socket", &staging, e))?;
    let placed = std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(private::FILE_MODE))
        .map_err(|e| Error::io("restrict socket", &staging, e))
        .and_then(|()| std::fs::rename(&staging, &socket).map_err(|e| Error::io("place socket", &socket, e)));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&staging);
        return Err(e);
    }
    claim.publish()?;
    Ok(Daemon {
        manager: manager.clone(),
        listener,
        socket,
        claim,
        sessions: Sessions::default(),
    })
}

/// Make `socket` ready to bind. Its directory is created (0700) only when
/// missing, and only the last component: a directory berth did not create
/// keeps its mode. A stale socket is replaced (we hold the instance lock);
/// anything else at the path (a file, a directory, another user's socket)
/// is refused and left alone.
fn prepare_socket_path(socket: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
    let dir = socket
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .mode(private::DIR_MODE)
            .create(dir)
            .map_err(|e| Error::io("create socket directory", dir, e))?;
        // Ours: make it 0700 whatever the umask.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(private::DIR_MODE))
            .map_err(|e| Error::io("restrict socket directory", dir, e))?;
    }
    let refuse = |why: &str| Error::InvalidValue {
        what: "socket path",
        input: socket.display().to_string(),
        message: format!("{why}; berth will not remove it (set BERTH_SOCKET to a free path)"),
    };
    match std::fs::symlink_metadata(socket) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("inspect", socket, e)),
        Ok(m) if !m.file_type().is_socket() => Err(refuse("it exists and is not a socket")),
        Ok(m) if m.uid() != nix::unistd::geteuid().as_raw() => Err(refuse("it is another user's socket")),
        Ok(_) => {
            tracing::info!(socket = %socket.display(), "replacing a stale socket");
            std::fs::remove_file(socket).map_err(|e| Error::io("remove stale socket", socket, e))
        }
    }
}

impl Daemon {
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The MCP sessions attached over the socket (`POST /v1/mcp`).
    pub fn sessions(&self) -> Sessions {
        self.sessions.clone()
    }

    /// Serve until `stop` is cancelled (a signal, `POST /v1/shutdown`, the
    /// MCP host's stdin), then tear down in order: the jobs, the attached
    /// sessions, the listener (each with its bound), the socket, the claim.
    pub async fn serve(self, stop: CancellationToken) -> Result<()> {
        let state = AppState {
            manager: self.manager.clone(),
            shutdown: stop.clone(),
            sessions: self.sessions.clone(),
        };
        // Not a child of `stop`: the socket keeps answering (health says
        // `stopping`) while the jobs end, and closes last.
        let listening = CancellationToken::new();
        let tasks = TaskTracker::new();
        let server = tasks.spawn(listen::serve(self.listener, router(state), listening.clone()));
        // History retention: once now, then every hour while serving.
        tasks.spawn({
            let (manager, stop) = (self.manager.clone(), stop.clone());
            async move {
                let mut every = tokio::time::interval(PRUNE_EVERY);
                while stop.run_until_cancelled(every.tick()).await.is_some() {
                    // SQLite deletes and directory removals: off the async workers.
                    let m = manager.clone();
                    match tokio::task::spawn_blocking(move || m.prune(&Default::default())).await {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => tracing::warn!(error = %e, "pruning history failed"),
                        Err(e) => tracing::warn!(error = %e, "pruning history stopped"),
                    }
                }
            }
        });
        tasks.close();
        stop.cancelled().await;
        tracing::info!("shutdown requested");
        // Jobs first: ending them also ends the log follows and long polls
        // that would otherwise hold the server open.
        self.manager.shutdown().await;
        // Attached MCP sessions let their last answers out and close.
        self.sessions.close();
        let _ = tokio::time::timeout(DRAIN_SESSIONS, self.sessions.none_attached()).await;
        listening.cancel();
        if tokio::time::timeout(DRAIN_REQUESTS, tasks.wait()).await.is_err() {
            server.abort();
        }
        let _ = std::fs::remove_file(&self.socket);
        drop(self.claim);
        Ok(())
    }
}

/// How often an idle-exit daemon looks whether it is still idle.
const IDLE_CHECK: Duration = Duration::from_millis(500);

/// Cancel `stop` once the manager had no active job and no attached MCP
/// session for `limit` without a break (a daemon `berth run` started on
/// demand: it goes when the last CI step that used it is done).
async fn exit_when_idle(manager: Manager, sessions: Sessions, limit: Duration, stop: CancellationToken) {
    let mut idle_since: Option<tokio::time::Instant> = None;
    let mut every = tokio::time::interval(IDLE_CHECK);
    while stop.run_until_cancelled(every.tick()).await.is_some() {
        let idle = manager.active_jobs() == 0 && sessions.count() == 0;
        let since = match (idle, idle_since) {
            (false, _) => {
                idle_since = None;
                continue;
            }
            (true, Some(t)) => t,
            (true, None) => *idle_since.insert(tokio::time::Instant::now()),
        };
        if since.elapsed() >= limit {
            crate::logfile::say(&format!(
                "berth daemon: no job and no session for {:.0} s (started on demand, daemon_idle): stopping",
                limit.as_secs_f64()
            ));
            stop.cancel();
        }
    }
}

/// `berth daemon`: run a manager on the instance socket until a signal or
/// `berth down`; with `idle`, also once it was idle that long.
pub async fn run(config: crate::config::Config, idle: Option<Duration>) -> Result<()> {
    let manager = Manager::open(config.clone()).await?;
    manager.keep_warm();
    let bound = bind(&manager)?;
    // Only once we own the instance: a refused second daemon starts none.
    crate::watchdog::spawn(&config)?;
    let adopted = manager.adopt_orphans().await?;
    if !adopted.is_empty() {
        tracing::info!(?adopted, "adopted jobs of a manager that died");
    }
    if let Some(notice) = manager.store().notice() {
        crate::logfile::say(&format!("berth daemon: {notice}"));
    }
    tracing::info!(socket = %bound.socket().display(), pid = std::process::id(), "berth daemon serving");
    // Not `eprintln!`: a stderr that cannot be written (a full disk) must
    // not take the daemon down.
    crate::logfile::say(&format!(
        "berth daemon: serving {} (pid {})",
        bound.socket().display(),
        std::process::id()
    ));
    let stop = CancellationToken::new();
    if let Some(limit) = idle {
        tokio::spawn(exit_when_idle(
            manager.clone(),
            bound.sessions(),
            limit,
            stop.clone(),
        ));
    }
    let on_signal = {
        let stop = stop.clone();
        async move {
            if stop
                .run_until_cancelled(crate::teardown::signals())
                .await
                .is_some()
            {
                tracing::info!("signal received");
                stop.cancel();
            }
        }
    };
    tokio::join!(bound.serve(stop), on_signal).0
}
