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
//! SIGKILLed cannot settle; so while degraded the writer keeps a small note
//! at the start of the same file, written in place into space it already
//! owns, of each job's last held seq and why the store could not write.
//! Whoever reaps the dead manager's runs (the watchdog, or the next manager)
//! records that seq, so readers show the held lines as lost, with the reason.
//!
//! Several berth processes may share a store: the note is merged (the
//! highest seq per job wins), and only a process that has the store alone
//! starts it afresh.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Room for the note at the start of the file (JSON, then zero bytes).
const NOTE_BYTES: u64 = 64 * 1024;
/// The whole file while there is room: the note, then space to give back.
pub(super) const BALLAST: u64 = 8 * 1024 * 1024;

/// Output a manager held in memory while the store could not write.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HeldNote {
    /// Why the store could not write.
    pub reason: String,
    /// Each job's last held seq.
    pub jobs: BTreeMap<String, u64>,
}

/// The reserve file, when it could be made.
pub(super) struct Reserve {
    path: PathBuf,
    file: Option<File>,
}

impl Reserve {
    /// The reserve beside the database at `db`, and the note a manager left
    /// in it. `alone`: no other process has the store open, so the note is
    /// read and cleared, and the ballast written back to its full size.
    pub fn open(db: &Path, alone: bool) -> (Reserve, Option<HeldNote>) {
        let mut path = db.as_os_str().to_owned();
        path.push(".reserve");
        let path = PathBuf::from(path);
        let file = super::private::open(
            std::fs::OpenOptions::new().read(true).write(true).create(true),
            &path,
        )
        .map_err(|e| tracing::warn!(path = %path.display(), error = %e, "no store reserve"))
        .ok();
        let reserve = Reserve { path, file };
        let note = reserve.note();
        if alone {
            reserve.write_note(&HeldNote::default());
            reserve.fill();
        }
        (reserve, note)
    }

    /// The note in the file, if a manager left one.
    pub fn note(&self) -> Option<HeldNote> {
        let file = self.file.as_ref()?;
        let mut buf = vec![0; NOTE_BYTES as usize];
        let n = file.read_at(&mut buf, 0).ok()?;
        let end = buf[..n].iter().position(|&b| b == 0).unwrap_or(n);
        serde_json::from_slice::<HeldNote>(&buf[..end])
            .ok()
            .filter(|n| !n.jobs.is_empty())
    }

    /// Merge `jobs` into the note (the highest seq wins), or take `gone`
    /// out of it (their output was written after all).
    pub fn update(&self, reason: &str, jobs: &BTreeMap<String, u64>, gone: &[String]) {
        let mut note = self.note().unwrap_or_default();
        reason.clone_into(&mut note.reason);
        for (job, &seq) in jobs {
            let at = note.jobs.entry(job.clone()).or_default();
            *at = (*at).max(seq);
        }
        for job in gone {
            note.jobs.remove(job);
        }
        self.write_note(&note);
    }

    /// Overwrite the note in place (the file's first blocks exist already:
    /// no new space is needed). A note that would not fit keeps the jobs
    /// with the highest seqs it can hold.
    fn write_note(&self, note: &HeldNote) {
        let Some(file) = &self.file else { return };
        let mut note = note.clone();
        let mut text = serde_json::to_vec(&note).unwrap_or_default();
        while text.len() >= NOTE_BYTES as usize && !note.jobs.is_empty() {
            let smallest = note.jobs.iter().min_by_key(|(_, s)| **s).map(|(j, _)| j.clone());
            smallest.map(|j| note.jobs.remove(&j));
            text = serde_json::to_vec(&note).unwrap_or_default();
        }
        // Read up to the first zero byte: what an older, longer note left
        // after it is never read.
        text.push(0);
        if let Err(e) = file.write_all_at(&text, 0) {
            tracing::warn!(path = %self.path.display(), error = %e, "could not note the held output");
        }
    }

    /// Write the ballast back to its full size, while there is room.
    fn fill(&self) {
        let Some(file) = &self.file else { return };
        let have = file.metadata().map_or(0, |m| m.len());
        let zeros = vec![0u8; 1024 * 1024];
        let mut at = have.max(NOTE_BYTES);
        while at < BALLAST {
            let n = zeros.len().min((BALLAST - at) as usize);
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
