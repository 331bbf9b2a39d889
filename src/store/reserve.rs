//! The store's reserve (`berth.db.reserve`): disk space set aside while the
//! disk has room, and a note of output held in memory, for when it has none.
//!
//! While the store cannot write, each job's newest output is held in memory
//! (`held.rs`). A manager that stops then (`down`, SIGTERM) must still
//! record how far each job's output went, or the lines it held vanish
//! unmarked; on a full disk even those few records do not fit. So the store
//! keeps a file of [`BALLAST`] bytes written while there is room, and gives
//! it back (truncates it) when it settles at shutdown: then the held output,
//! or at least the records with their last seq, fit. A manager that is
//! SIGKILLed cannot settle; so the writer keeps a small note at the start of
//! the same file, written in place into space it already owns, of each
//! job's last seq it took (before committing it, or holding it while
//! degraded) and why the store could not write, if it could not. Whoever
//! reaps the dead manager's runs (the watchdog, or the next manager)
//! records that seq, so readers show the lines that died with it as lost.
//!
//! One manager writes a store at a time (the instance's claim); the crash
//! watchdog only reads the note and gives the ballast back.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// Room for the note at the start of the file (JSON, then zero bytes).
const NOTE_BYTES: u64 = 64 * 1024;
/// The whole file while there is room: the note, then space to give back.
pub(super) const BALLAST: u64 = 8 * 1024 * 1024;

/// Free space the ballast leaves on the file system when it is written.
const HEADROOM: u64 = BALLAST;

/// Bytes free for an unprivileged writer on `path`'s file system.
pub(super) fn free_space(path: &Path) -> Option<u64> {
    let dir = path.parent().unwrap_or(path);
    rustix::fs::statvfs(dir)
        .ok()
        .map(|s| s.f_bavail.saturating_mul(s.f_frsize))
}

/// The reserve's file beside database `db`.
fn path_of(db: &Path) -> PathBuf {
    let mut path = db.as_os_str().to_owned();
    path.push(".reserve");
    PathBuf::from(path)
}

/// Give the ballast of the reserve beside database `db` back (the note at
/// its start stays: a dead manager's note is still read); false when there
/// was none to give.
pub(super) fn give_back(db: &Path) -> bool {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path_of(db))
        .is_ok_and(|f| f.metadata().is_ok_and(|m| m.len() > NOTE_BYTES) && f.set_len(NOTE_BYTES).is_ok())
}

/// How far each job's output went, as the manager that took it knew.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HeldNote {
    /// Why the store could not write (empty while it could).
    pub reason: String,
    /// Each running job's last seq taken.
    pub jobs: BTreeMap<String, u64>,
}

/// The reserve file, when it could be made, and this process's note.
pub(super) struct Reserve {
    path: PathBuf,
    file: Option<File>,
    /// Only the manager's store writes the note (the watchdog only reads it).
    writes: bool,
    note: Mutex<HeldNote>,
}

impl Reserve {
    /// The reserve beside the database at `db`, and the note a manager that
    /// died left in it. A manager's store (`writes`) then starts the note
    /// afresh and writes the ballast back to its full size.
    pub fn open(db: &Path, writes: bool) -> (Reserve, Option<HeldNote>) {
        let path = path_of(db);
        let file = super::private::open(
            std::fs::OpenOptions::new().read(true).write(true).create(true),
            &path,
        )
        .map_err(|e| tracing::warn!(path = %path.display(), error = %e, "no store reserve"))
        .ok();
        let reserve = Reserve {
            path,
            file,
            writes,
            note: Mutex::default(),
        };
        let left = reserve.read();
        if writes {
            reserve.write(&HeldNote::default());
            reserve.fill();
        }
        (reserve, left)
    }

    /// The note in the file, if it names a job.
    fn read(&self) -> Option<HeldNote> {
        let file = self.file.as_ref()?;
        let mut buf = vec![0; NOTE_BYTES as usize];
        let n = file.read_at(&mut buf, 0).ok()?;
        let end = buf[..n].iter().position(|&b| b == 0).unwrap_or(n);
        serde_json::from_slice::<HeldNote>(&buf[..end])
            .ok()
            .filter(|n| !n.jobs.is_empty())
    }

    /// Job `job`'s output reached seq `last` (noted before anyone can read
    /// it, so no line a reader saw dies unmarked with this process).
    pub fn took(&self, job: &str, last: u64) {
        self.change(|n| {
            let at = n.jobs.entry(job.to_string()).or_default();
            *at = (*at).max(last);
        });
    }

    /// Why the store cannot write (empty: it can).
    pub fn reason(&self, why: &str) {
        self.change(|n| why.clone_into(&mut n.reason));
    }

    /// Jobs whose end is committed: their records say how far they went.
    pub fn ended(&self, jobs: &[String]) {
        self.change(|n| {
            for j in jobs {
                n.jobs.remove(j);
            }
        });
    }

    fn change(&self, f: impl FnOnce(&mut HeldNote)) {
        if !self.writes || self.file.is_none() {
            return;
        }
        let mut note = self.note.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut note);
        self.write(&note);
    }

    /// Overwrite the note in place (the file's first blocks exist already:
    /// no new space is needed). A note that would not fit keeps the jobs
    /// with the highest seqs it can hold.
    fn write(&self, note: &HeldNote) {
        let Some(file) = &self.file else { return };
        let mut text = serde_json::to_vec(note).unwrap_or_default();
        if text.len() >= NOTE_BYTES as usize {
            let mut note = note.clone();
            while text.len() >= NOTE_BYTES as usize && !note.jobs.is_empty() {
                let smallest = note.jobs.iter().min_by_key(|(_, s)| **s).map(|(j, _)| j.clone());
                smallest.map(|j| note.jobs.remove(&j));
                text = serde_json::to_vec(&note).unwrap_or_default();
            }
        }
        // Read up to the first zero byte: what an older, longer note left
        // after it is never read.
        text.push(0);
        if let Err(e) = file.write_all_at(&text, 0) {
            tracing::warn!(path = %self.path.display(), error = %e, "could not note how far output went");
        }
    }

    /// Write the ballast back to its full size, while there is room: never
    /// past the room the store wants free ([`HEADROOM`]), so the ballast
    /// itself never fills the disk a manager starts on (its pid file, its
    /// socket and the store's log still need a little).
    fn fill(&self) {
        let Some(file) = &self.file else { return };
        let have = file.metadata().map_or(0, |m| m.len());
        let free = free_space(&self.path).unwrap_or(0);
        let want = BALLAST.min(have.max(NOTE_BYTES) + free.saturating_sub(HEADROOM));
        let zeros = vec![0u8; 1024 * 1024];
        let mut at = have.max(NOTE_BYTES);
        while at < want {
            let n = zeros.len().min((want - at) as usize);
            if let Err(e) = file.write_all_at(&zeros[..n], at) {
                tracing::warn!(path = %self.path.display(), error = %e, "the store reserve could not be filled");
                let _ = file.set_len(at);
                return;
            }
            at += n as u64;
        }
    }

    /// Give the ballast back to the file system (the note stays).
    pub fn release(&self) {
        if let Some(file) = &self.file
            && let Err(e) = file.set_len(NOTE_BYTES)
        {
            tracing::warn!(path = %self.path.display(), error = %e, "could not give the store reserve back");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Giving the ballast back keeps the note a dead manager left (the next
    /// manager still reads how far its output went), and says when there
    /// was nothing to give.
    #[test]
    fn giving_the_ballast_back_keeps_the_note() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("berth.db");
        let (reserve, _) = Reserve::open(&db, true);
        reserve.took("job-1", 42);
        drop(reserve);
        let file = dir.path().join("berth.db.reserve");
        assert_eq!(
            std::fs::metadata(&file).unwrap().len(),
            BALLAST,
            "filled on a roomy disk"
        );
        assert!(give_back(&db));
        assert_eq!(std::fs::metadata(&file).unwrap().len(), NOTE_BYTES);
        assert!(!give_back(&db), "nothing left to give");
        let (_, left) = Reserve::open(&db, false);
        assert_eq!(left.unwrap().jobs.get("job-1"), Some(&42));
    }
}
