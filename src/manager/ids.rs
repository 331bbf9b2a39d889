//! Job ids: `job-N`, N counting up per instance and never reused, also across
//! restarts and across several short-lived managers (`berth run` without a
//! daemon) of the same instance. The counter lives in `<instance>/next-id`,
//! updated under an exclusive file lock.
//!
//! The counter is not fsynced: every process of the instance reads it through
//! the page cache under the lock, so a crashed process never makes an id come
//! back; and a manager starting after a power loss raises it above the
//! highest id in the store's records (`ensure_above` in `manager/recover.rs`).
//! A sync here cost ~4 ms (with the truncate, ~5 ms) on every job start, more
//! than the rest of a host job's start together.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::model::JobId;

pub struct IdAllocator {
    path: PathBuf,
}

impl IdAllocator {
    pub fn new(instance_dir: &Path) -> Result<Self> {
        crate::store::private::own_dir(instance_dir)
            .map_err(|e| Error::io("create state directory", instance_dir, e))?;
        Ok(IdAllocator {
            path: instance_dir.join("next-id"),
        })
    }

    /// Take the next id.
    pub fn next(&self) -> Result<JobId> {
        self.update(|n| Some(n + 1)).map(JobId::from_number)
    }

    /// Make sure future ids are above `n` (after reading records back).
    pub fn ensure_above(&self, n: u64) -> Result<()> {
        self.update(|current| (current <= n).then_some(n + 1)).map(|_| ())
    }

    /// Under the file lock: read the next free number, write back what `f`
    /// makes of it (if anything), and return the number read.
    fn update(&self, f: impl FnOnce(u64) -> Option<u64>) -> Result<u64> {
        let io = |e| Error::io("update job counter", &self.path, e);
        let mut file = crate::store::private::open(
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false),
            &self.path,
        )
        .map_err(io)?;
        file.lock().map_err(io)?;
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(io)?;
        let n: u64 = text.trim().parse().unwrap_or(1).max(1);
        if let Some(next) = f(n) {
            // Written over the old text, then cut to its length: truncating to
            // zero first would free and re-allocate the file's block each time.
            let text = next.to_string();
            file.seek(SeekFrom::Start(0)).map_err(io)?;
            file.write_all(text.as_bytes()).map_err(io)?;
            file.set_len(text.len() as u64).map_err(io)?;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_count_up_across_allocators() {
        let dir = tempfile::tempdir().unwrap();
        let a = IdAllocator::new(dir.path()).unwrap();
        assert_eq!(a.next().unwrap().as_str(), "job-1");
        assert_eq!(a.next().unwrap().as_str(), "job-2");
        let b = IdAllocator::new(dir.path()).unwrap();
        assert_eq!(b.next().unwrap().as_str(), "job-3");
        assert_eq!(a.next().unwrap().as_str(), "job-4");
    }

    #[test]
    fn the_counter_file_holds_exactly_the_next_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("next-id");
        // Written by hand, with padding longer than the next number.
        std::fs::write(&path, "9   \n").unwrap();
        let a = IdAllocator::new(dir.path()).unwrap();
        assert_eq!(a.next().unwrap().as_str(), "job-9");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "10");
        a.ensure_above(41).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "42");
        a.ensure_above(5).unwrap();
        assert_eq!(a.next().unwrap().as_str(), "job-42");
    }
}
