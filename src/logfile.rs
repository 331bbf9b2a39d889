//! The process's own log (tracing's output, and the few lines a serving
//! process says on its own), written so that logging can never take berth
//! down.
//!
//! Why: a write to a full disk or a closed stderr fails, and Rust's
//! `eprintln!` (which tracing's formatter used to report its own failed
//! writes) panics when stderr cannot be written. A panic there killed the
//! daemon's store writer thread and wedged the manager. Here every write that
//! fails is dropped and counted; the next write that succeeds says how many
//! records were lost. A daemon or watchdog started by `berth up` logs to a
//! file of its instance (`--log-file`): that file is capped at
//! [`MAX_LOG_BYTES`] and rotated to `<name>.1` (one previous file kept), and
//! the process's stderr is pointed at the new file on each rotation so that
//! a panic message lands beside the rest.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Size at which a log file is rotated (the previous one is kept as `.1`):
/// at most twice this on disk per log.
pub const MAX_LOG_BYTES: u64 = 8 * 1024 * 1024;

/// Where records go.
enum Target {
    Stderr,
    /// A file of berth's own, rotated at `max` bytes.
    File {
        path: PathBuf,
        max: u64,
        /// Point stderr at the current file.
        own_stderr: bool,
        state: Mutex<FileState>,
    },
}

struct FileState {
    file: Option<File>,
    size: u64,
}

/// The sink behind the process's tracing subscriber.
pub struct LogSink {
    target: Target,
    /// Records dropped since the last one that was written.
    dropped: AtomicU64,
}

impl LogSink {
    /// Records go to stderr; a failed write drops the record.
    pub fn stderr() -> LogSink {
        LogSink {
            target: Target::Stderr,
            dropped: AtomicU64::new(0),
        }
    }

    /// Records go to `path` (appended, private to the user), rotated at
    /// `max` bytes. With `own_stderr`, stderr follows the file (so a panic
    /// message lands there too).
    pub fn file(path: &Path, max: u64, own_stderr: bool) -> LogSink {
        let file = open(path);
        let size = file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map_or(0, |m| m.len());
        if let (Some(f), true) = (&file, own_stderr) {
            let _ = nix::unistd::dup2_stderr(f);
        }
        LogSink {
            target: Target::File {
                path: path.to_path_buf(),
                max: max.max(4096),
                own_stderr,
                state: Mutex::new(FileState { file, size }),
            },
            dropped: AtomicU64::new(0),
        }
    }

    /// Records dropped since the last one written (for tests and `doctor`).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Write one record; never fails, never panics.
    pub fn write_record(&self, record: &[u8]) {
        let lost = self.dropped.load(Ordering::Relaxed);
        let ok = match &self.target {
            Target::Stderr => write_all(&mut std::io::stderr().lock(), record, lost),
            Target::File {
                path,
                max,
                own_stderr,
                state,
            } => {
                let Ok(mut state) = state.lock() else { return };
                if state.file.is_none() || state.size >= *max {
                    rotate(path, &mut state, *own_stderr);
                }
                match state.file.as_mut() {
                    Some(f) => {
                        let ok = write_all(f, record, lost);
                        if ok {
                            state.size += record.len() as u64;
                        }
                        ok
                    }
                    None => false,
                }
            }
        };
        match ok {
            true if lost > 0 => {
                self.dropped.fetch_sub(lost, Ordering::Relaxed);
            }
            true => {}
            false => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Write `record`, after a line saying how many were lost before it.
fn write_all(w: &mut impl Write, record: &[u8], lost: u64) -> bool {
    if lost > 0 {
        let note = format!("berth: {lost} log record(s) were dropped: the log could not be written\n");
        if w.write_all(note.as_bytes()).is_err() {
            return false;
        }
    }
    w.write_all(record).and_then(|()| w.flush()).is_ok()
}

fn open(path: &Path) -> Option<File> {
    crate::store::private::open(std::fs::OpenOptions::new().create(true).append(true), path).ok()
}

/// Move a full log to `<name>.1` (the previous `.1` goes) and start a new
/// one, with stderr pointed at it. A rename costs no space, so this works on
/// a full disk too; when the new file cannot be made, records are dropped
/// until it can.
fn rotate(path: &Path, state: &mut FileState, own_stderr: bool) {
    if state.file.is_some() {
        let mut old = path.as_os_str().to_owned();
        old.push(".1");
        let _ = std::fs::rename(path, PathBuf::from(old));
    }
    state.file = open(path);
    state.size = 0;
    if let (Some(f), true) = (&state.file, own_stderr) {
        let _ = nix::unistd::dup2_stderr(f);
    }
}

/// The writer tracing gets for each record: it collects the formatted
/// record and hands it to the sink whole when dropped, answering every
/// write with success (a failure is the sink's to count, not tracing's to
/// report).
pub struct RecordWriter<'a> {
    sink: &'a LogSink,
    buf: Vec<u8>,
}

impl Write for RecordWriter<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for RecordWriter<'_> {
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            self.sink.write_record(&self.buf);
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogSink {
    type Writer = RecordWriter<'a>;
    fn make_writer(&'a self) -> Self::Writer {
        RecordWriter {
            sink: self,
            buf: Vec::new(),
        }
    }
}

/// Say `line` on stderr like `eprintln!`, but drop it when stderr cannot be
/// written (a full disk, a closed pipe) instead of panicking.
pub fn say(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

/// Send this process's `tracing` output (filtered by `BERTH_LOG`, `warn` by
/// default) to `log_file` (capped and rotated) or stderr, through a sink that drops what it cannot write, so
/// logging never panics.
pub fn init_tracing(log_file: Option<&std::path::Path>) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("BERTH_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    use std::io::IsTerminal;
    // Colours only for a person reading a terminal, never in a log file.
    let ansi = log_file.is_none() && std::io::stderr().is_terminal();
    let sink = match log_file {
        Some(path) => LogSink::file(path, MAX_LOG_BYTES, true),
        None => LogSink::stderr(),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(sink)
        .with_ansi(ansi)
        .log_internal_errors(false)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_over_its_cap_rotates_to_one_previous_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.log");
        let sink = LogSink::file(&path, 4096, false);
        let record = format!("{}\n", "x".repeat(99));
        for _ in 0..200 {
            sink.write_record(record.as_bytes());
        }
        let now = std::fs::metadata(&path).unwrap().len();
        let prev = std::fs::metadata(dir.path().join("daemon.log.1")).unwrap().len();
        assert!(now <= 4096 + 100, "{now}");
        assert!(prev <= 4096 + 100, "{prev}");
        assert!(!dir.path().join("daemon.log.2").exists());
        assert_eq!(sink.dropped(), 0);
    }

    #[test]
    fn a_failed_write_is_dropped_counted_and_said_later() {
        let mut full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        assert!(!write_all(&mut full, b"one\n", 0));
        let mut out = Vec::new();
        assert!(write_all(&mut out, b"two\n", 3));
        let out = String::from_utf8(out).unwrap();
        assert!(out.starts_with("berth: 3 log record(s) were dropped"), "{out}");
        assert!(out.ends_with("two\n"));
    }
}
