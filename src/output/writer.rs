//! One stream of one job: raw log file (rotated at the store's raw-file
//! cap), line splitting, and hand-off of whole lines to the job's output.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memchr::memchr;

use super::split::LineSplitter;
use super::{JobOutput, Stream};
use crate::error::{Error, Result};
use crate::model::LineBuf;

/// Open a raw log file for appending (a re-adopted job keeps what it
/// holds), private to its user whatever the umask.
fn open_raw(path: &Path) -> Result<File> {
    crate::store::private::open(std::fs::OpenOptions::new().create(true).append(true), path)
        .map_err(|e| Error::io("create", path, e))
}

/// Writes one stream of one job: raw file, line splitting, hand-off to the ring.
pub struct StreamWriter {
    output: Arc<JobOutput>,
    stream: Stream,
    raw_path: PathBuf,
    /// Bytes in the current raw file, and the size at which it is rotated.
    raw_len: u64,
    raw_cap: u64,
    raw: BufWriter<File>,
    splitter: LineSplitter,
    pending: LineBuf,
    /// Lines still to drop (a replay of output that is already stored).
    skip: u64,
    /// Complete lines this stream has produced since it was (re)read from
    /// its start, the skipped ones included: what a replay must skip.
    seen: u64,
    closed: bool,
}

impl StreamWriter {
    pub(super) fn new(output: &Arc<JobOutput>, stream: Stream) -> Result<Self> {
        let paths = output.paths();
        let path = match stream {
            Stream::Stdout => paths.stdout,
            Stream::Stderr => paths.stderr,
        };
        let file = open_raw(&path)?;
        let raw_len = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(StreamWriter {
            output: output.clone(),
            stream,
            raw_path: path,
            raw_len,
            raw_cap: output.store.raw_file_cap(),
            raw: BufWriter::with_capacity(64 * 1024, file),
            splitter: LineSplitter::default(),
            pending: LineBuf::default(),
            skip: 0,
            seen: 0,
            closed: false,
        })
    }

    /// Drop the next `n` complete lines: they are a replay of stored output.
    pub fn skip_lines(&mut self, n: u64) {
        self.skip = n;
    }

    /// The stream will be read again from its start (a container re-attached
    /// after the engine's connection broke; the engine keeps its logs): the
    /// lines already taken are skipped, and the line begun is dropped, as
    /// the replay brings it whole.
    pub fn rewind(&mut self) {
        // What is still to skip counts too: a replay can itself be cut
        // off before it caught up (a second blip, a failed final read).
        self.skip += self.seen;
        self.seen = 0;
        self.splitter = LineSplitter::default();
    }

    /// Wait until the store can take a write without blocking this thread,
    /// and while the job's foreground reader is far behind (an async reader
    /// calls this before [`StreamWriter::write`]).
    pub async fn ready(&self) {
        self.output.store.room().await;
        self.output.reader_room().await;
    }

    pub fn write(&mut self, chunk: &[u8]) {
        // The raw file already has a replayed chunk; the seq'd lines skip below.
        if self.skip == 0 {
            let _ = self.raw.write_all(chunk);
            self.raw_len += chunk.len() as u64;
            if self.raw_len > self.raw_cap {
                self.rotate_raw();
            }
        }
        // Room for every line of this read at once: one allocation per read,
        // and chunks of the same few sizes that the allocator reuses.
        self.pending.reserve(chunk.len() + self.splitter.pending());
        let before = self.pending.len();
        self.splitter.push(chunk, &mut self.pending);
        self.seen += self.pending.len().saturating_sub(before) as u64;
        if self.skip > 0 {
            let n = (self.skip as usize).min(self.pending.len());
            self.pending.drop_first(n);
            self.skip -= n as u64;
        }
        self.output.append(self.stream, &mut self.pending);
        // Keep the raw file close to live for `tail -f` without a syscall per chunk.
        if self.raw.buffer().len() > 32 * 1024 || memchr(b'\n', chunk).is_some() {
            let _ = self.raw.flush();
        }
    }

    /// Move the full raw file to `*.log.1` and start a new one (`tail -F`
    /// follows the rotation); the store keeps every line regardless.
    fn rotate_raw(&mut self) {
        let _ = self.raw.flush();
        let mut old = self.raw_path.clone().into_os_string();
        old.push(".1");
        // Removed first: ext4 writes a file's pages out before it replaces
        // another by rename, which cost a busy job a visible stall.
        let _ = std::fs::remove_file(&old);
        if std::fs::rename(&self.raw_path, &old).is_ok()
            && let Ok(file) = open_raw(&self.raw_path)
        {
            self.raw = BufWriter::with_capacity(64 * 1024, file);
        }
        self.raw_len = 0;
    }

    /// The stream ended: deliver the last partial line and mark the stream closed.
    pub fn finish(mut self) {
        self.close();
    }

    fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        self.splitter.finish(&mut self.pending);
        self.output.append(self.stream, &mut self.pending);
        let _ = self.raw.flush();
        self.output.close_stream();
    }
}

impl Drop for StreamWriter {
    fn drop(&mut self) {
        // A reader task that errors out must still count its stream as closed,
        // or waiters on "all output in" would hang.
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventLog;
    use crate::model::JobId;
    use crate::persist::memory::Memory;
    use crate::watch::Watchers;

    #[test]
    fn a_replay_cut_off_before_it_caught_up_is_rewound_without_repeats() {
        let dir = tempfile::tempdir().unwrap();
        let store = Memory::new();
        let id = JobId::from_number(1);
        let out = JobOutput::create(
            id.clone(),
            &dir.path().join("job-1"),
            1024,
            Watchers::default(),
            EventLog::new(),
            store.clone(),
            1,
        )
        .unwrap();
        let mut w = out.writer(Stream::Stdout).unwrap();
        w.write(b"a\nb\nc\n");
        // The source is read again from its start and breaks after one line.
        w.rewind();
        w.write(b"a\n");
        // Read again from its start, this time to the end.
        w.rewind();
        w.write(b"a\nb\nc\nd\n");
        assert_eq!(store.count(&id), 4, "each line stored once");
    }
}
