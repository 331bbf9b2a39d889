//! A child's output, kept with its job: from its start berth follows the
//! child's logs into `children/<name>.log` in the job's private directory
//! (stdout and stderr as they came, bounded by [`MAX_BYTES`]), so `berth
//! logs JOB --child NAME` reads it while the child runs and after berth
//! removed it with its job.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use bollard::container::LogOutput;
use bollard::query_parameters::LogsOptions;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

use crate::error::{Error, Result};
use crate::runner::docker::DockerClient;

/// Most output kept per child; what comes later is counted, not kept.
pub const MAX_BYTES: u64 = 8 << 20;
/// Most of a child's log read back at once (its tail).
pub const MAX_READ: u64 = 1 << 20;

/// Where child `name`'s output of the job whose directory is `job_dir` goes.
pub fn path(job_dir: &Path, name: &str) -> PathBuf {
    job_dir.join("children").join(format!("{name}.log"))
}

/// Follow child `id`'s output (from `since`, seconds since the epoch) into
/// its file until the child stops.
pub async fn follow(docker: DockerClient, id: String, file: PathBuf, since: i64) {
    if let Some(dir) = file.parent()
        && let Err(e) = crate::store::private::create_dir(dir)
    {
        tracing::warn!(error = %e, "a child's output cannot be kept");
        return;
    }
    let opened = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&file)
        .await;
    let Ok(mut out) = opened else { return };
    let mut written = out.metadata().await.map(|m| m.len()).unwrap_or(0);
    let opts = LogsOptions {
        follow: true,
        stdout: true,
        stderr: true,
        since: i32::try_from(since).unwrap_or(0),
        ..Default::default()
    };
    let mut stream = docker.logs(&id, opts);
    let mut dropped = 0u64;
    while let Some(Ok(item)) = stream.next().await {
        let bytes = match item {
            LogOutput::StdOut { message }
            | LogOutput::StdErr { message }
            | LogOutput::Console { message } => message,
            LogOutput::StdIn { .. } => continue,
        };
        if written + bytes.len() as u64 > MAX_BYTES {
            dropped += bytes.len() as u64;
            continue;
        }
        if out.write_all(&bytes).await.is_err() {
            return;
        }
        written += bytes.len() as u64;
    }
    if dropped > 0 {
        let note = format!(
            "\n[berth: {dropped} more bytes of output not kept (over {} MiB)]\n",
            MAX_BYTES >> 20
        );
        let _ = out.write_all(note.as_bytes()).await;
    }
    let _ = out.flush().await;
}

/// The last `tail` lines (all when `None`) of child `name`'s output, from
/// at most the last [`MAX_READ`] bytes of its file.
pub fn read(job_dir: &Path, job: &str, name: &str, tail: Option<usize>) -> Result<Vec<String>> {
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    let missing = || Error::InvalidValue {
        what: "child",
        input: name.to_string(),
        message: format!("{job} has no child of that name (`berth ps` lists its children)"),
    };
    if !plain {
        return Err(missing());
    }
    let file = path(job_dir, name);
    let mut f = std::fs::File::open(&file).map_err(|_| missing())?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let from = len.saturating_sub(MAX_READ);
    f.seek(SeekFrom::Start(from))
        .map_err(|e| Error::io("read the output of", &file, e))?;
    let mut bytes = Vec::new();
    f.take(MAX_READ)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("read the output of", &file, e))?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if from > 0 && !lines.is_empty() {
        // The first line was cut by the window.
        lines.remove(0);
    }
    if let Some(n) = tail {
        let skip = lines.len().saturating_sub(n);
        lines.drain(..skip);
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_childs_tail_is_read_back_and_names_are_plain() {
        let dir = tempfile::tempdir().unwrap();
        let file = path(dir.path(), "db");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "one\ntwo\nthree\n").unwrap();
        assert_eq!(
            read(dir.path(), "job-1", "db", Some(2)).unwrap(),
            ["two", "three"]
        );
        assert_eq!(read(dir.path(), "job-1", "db", None).unwrap().len(), 3);
        let err = read(dir.path(), "job-1", "../db", None).unwrap_err().to_string();
        assert!(err.contains("no child") && err.contains("job-1"), "{err}");
        assert!(read(dir.path(), "job-1", "web", None).is_err());
    }
}
