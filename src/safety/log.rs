//! The security log: one JSON line per refused job, appended to a file that
//! only its owner can read (created 0600). Append-only by construction: it is
//! opened with `O_APPEND` for each entry and never rewritten, so concurrent
//! managers interleave whole lines and nothing here can truncate history.
//! A log that cannot be written is a warning, never a reason to let the
//! refused command through or to fail the caller differently.
//!
//! The log is bounded: when the next line would take it past [`MAX_BYTES`]
//! it is renamed to `security.log.1` (`.1` to `.2`, …, keeping [`KEEP`] old
//! files, the oldest dropped) and a fresh file is started, so a flood of
//! refusals cannot fill the disk.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

/// Mode of a newly created log: the commands may carry secrets.
const LOG_MODE: u32 = 0o600;
/// Size at which the log is rotated.
pub const MAX_BYTES: u64 = 10 << 20;
/// Rotated files kept (`security.log.1` … `security.log.3`).
pub const KEEP: usize = 3;

/// One refusal, as written.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SecurityRecord {
    /// RFC 3339, UTC.
    pub timestamp: String,
    /// `blocked` (the filter), `outside_workspace` (the guard), `engine` (a
    /// job's scoped engine) or `egress` (a job's egress proxy).
    pub kind: &'static str,
    pub reason: String,
    pub pattern: String,
    pub command: String,
    /// The normalised view that matched, when the filter refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched: Option<String>,
    /// A scoped engine's refusal: the request (`POST /containers/create`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// A scoped engine's refusal: the field refused (`HostConfig.Privileged`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    pub cwd: PathBuf,
    pub instance: String,
    /// Who asked: `cli`, `api`, `mcp`, `resume`, ….
    pub client: String,
}

/// A line as written: `{"blocked": true, "timestamp": …, "reason": …,
/// "command": …, …}`, the record shape security tooling expects, with
/// berth's detail (`kind`, `pattern`, …) beside it.
#[derive(Serialize)]
struct Line<'a> {
    blocked: bool,
    #[serde(flatten)]
    entry: &'a SecurityRecord,
}

/// The append-only log file of one manager.
#[derive(Debug)]
pub struct SecurityLog {
    path: PathBuf,
    /// One writer at a time within this process: lines never interleave.
    lock: Mutex<()>,
    max_bytes: u64,
}

impl SecurityLog {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::with_limit(path, MAX_BYTES)
    }

    /// A log rotated at `max_bytes` instead of [`MAX_BYTES`].
    pub fn with_limit(path: impl Into<PathBuf>, max_bytes: u64) -> Self {
        SecurityLog {
            path: path.into(),
            lock: Mutex::new(()),
            max_bytes,
        }
    }

    /// The `n`th rotated file (`security.log.n`).
    pub fn rotated(&self, n: usize) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(format!(".{n}"));
        PathBuf::from(p)
    }

    /// Shift `.1` → `.2` … and the live file to `.1` (renames are atomic;
    /// the oldest is overwritten by the one before it).
    fn rotate(&self) -> std::io::Result<()> {
        for n in (1..KEEP).rev() {
            let from = self.rotated(n);
            if from.exists() {
                std::fs::rename(&from, self.rotated(n + 1))?;
            }
        }
        std::fs::rename(&self.path, self.rotated(1))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append `entry`; on failure, warn and carry on. The file is written
    /// before this returns (a refusal's answer follows its line), off an
    /// async caller's worker: a slow or full disk stalls only the caller.
    pub fn append(&self, entry: &SecurityRecord) {
        if let Err(e) = crate::store::off_worker(|| self.try_append(entry)) {
            tracing::warn!(
                log = %self.path.display(),
                error = %e,
                command = %entry.command,
                "could not write the security log; the command is refused all the same"
            );
        }
    }

    fn try_append(&self, entry: &SecurityRecord) -> std::io::Result<()> {
        let line = Line { blocked: true, entry };
        let mut line = serde_json::to_string(&line).map_err(std::io::Error::other)?;
        line.push('\n');
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let size = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        if size > 0 && size + line.len() as u64 > self.max_bytes {
            self.rotate()?;
        }
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(LOG_MODE)
            .open(&self.path)?;
        // One write of the whole line: with O_APPEND it lands at the end intact.
        file.write_all(line.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn entry(command: &str) -> SecurityRecord {
        SecurityRecord {
            timestamp: chrono::Utc::now().to_rfc3339(),
            kind: "blocked",
            reason: "r".into(),
            pattern: "p".into(),
            command: command.into(),
            matched: Some("m".into()),
            endpoint: None,
            field: None,
            cwd: "/w".into(),
            instance: "i".into(),
            client: "test".into(),
        }
    }

    #[test]
    fn appends_one_json_line_per_entry_to_a_private_file() {
        let dir = tempfile::tempdir().unwrap();
        let log = SecurityLog::new(dir.path().join("sub/security.log"));
        log.append(&entry("sudo id"));
        log.append(&entry("multi\nline"));
        let text = std::fs::read_to_string(log.path()).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["blocked"], true);
        assert!(lines[0]["timestamp"].is_string() && lines[0]["reason"] == "r");
        assert_eq!(lines[0]["command"], "sudo id");
        assert_eq!(lines[1]["command"], "multi\nline");
        let mode = std::fs::metadata(log.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn the_log_rotates_and_keeps_three_old_files() {
        let dir = tempfile::tempdir().unwrap();
        let log = SecurityLog::with_limit(dir.path().join("security.log"), 600);
        let one = serde_json::to_string(&entry("sudo id")).unwrap().len() as u64 + 1;
        let per_file = 600 / one;
        for i in 0..per_file * 6 {
            log.append(&entry(&format!("sudo id # {i:04}")));
        }
        for n in 1..=KEEP {
            let size = std::fs::metadata(log.rotated(n)).unwrap().len();
            assert!(size <= 600, "{n}: {size}");
        }
        assert!(!log.rotated(KEEP + 1).exists(), "only {KEEP} old files are kept");
        assert!(std::fs::metadata(log.path()).unwrap().len() <= 600);
        // The newest entry is in the live file, whole.
        let live = std::fs::read_to_string(log.path()).unwrap();
        let last = format!("sudo id # {:04}", per_file * 6 - 1);
        assert!(live.lines().last().unwrap().contains(&last), "{live}");
    }

    #[test]
    fn an_unwritable_log_is_only_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), "").unwrap();
        // A path under a regular file can never be created.
        let log = SecurityLog::new(dir.path().join("file/security.log"));
        log.append(&entry("sudo id"));
        assert!(!log.path().exists());
    }

    /// A log whose write blocks (a FIFO no one reads yet: a stuck disk)
    /// holds up only the caller: on a runtime with one worker, another
    /// task still runs while the append waits.
    #[test]
    fn a_blocked_append_does_not_hold_the_runtimes_worker() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("security.log");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let log = std::sync::Arc::new(SecurityLog::new(&path));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let (started, appending) = std::sync::mpsc::channel();
        let writer = log.clone();
        let append = rt.spawn(async move {
            // No await from here on: the worker is this task's until the
            // append lets it go.
            started.send(()).unwrap();
            writer.append(&entry("sudo id"));
        });
        appending.recv().unwrap();
        let (ran, other) = std::sync::mpsc::channel();
        rt.spawn(async move { ran.send(()).unwrap() });
        // A hang detector, not a speed bound: with the worker held, the
        // other task never runs.
        let other_ran = other.recv_timeout(std::time::Duration::from_secs(30));
        // Let the append through either way, and read what it wrote.
        let text = std::fs::read_to_string(&path).unwrap();
        rt.block_on(append).unwrap();
        assert!(
            other_ran.is_ok(),
            "another task waited for the security log's write"
        );
        assert!(text.contains("sudo id"), "{text}");
    }
}
