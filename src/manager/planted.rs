//! A project file a job may have written is not the user's word.
//!
//! A job that writes the checkout directly (`write = "direct"`, host jobs)
//! can create or rewrite `berth.toml`: a `test_command` that fakes a
//! passing run, a loosening the user never read. Trust by content hash
//! covers loosenings of a file the user trusted; this covers the rest. A
//! project file whose change time (ctime: a job cannot set it back, as it
//! can the mtime) falls while such a job of its workspace ran is not used
//! at all until the user trusts these exact bytes (`berth trust`) or saves
//! the file again with no such job running. Layer and read-only jobs never
//! reach the checkout, so they never make a file suspect.

use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::Inner;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::model::{JobInfo, WriteMode};

/// Refuse when `config`'s project file changed while a job that writes its
/// checkout ran, unless the user trusts the file as it is now.
pub(super) fn check(inner: &Arc<Inner>, config: &Config) -> Result<()> {
    let Some(file) = &config.project_file else {
        return Ok(());
    };
    let Ok(meta) = std::fs::metadata(file) else {
        return Ok(());
    };
    let Some(changed) = DateTime::<Utc>::from_timestamp(meta.ctime(), meta.ctime_nsec() as u32) else {
        return Ok(());
    };
    let real = std::fs::canonicalize(file).unwrap_or_else(|_| file.clone());
    let writer = {
        let reg = inner.registry.lock().unwrap();
        reg.jobs
            .values()
            .find(|e| wrote_during(&e.info, &real, changed))
            .map(|e| e.info.id.clone())
    };
    let Some(job) = writer else {
        return Ok(());
    };
    let bytes = crate::trust::read_capped(file)?;
    if config.trusted.allows(&real, &bytes) {
        return Ok(());
    }
    Err(Error::ProjectFile {
        why: format!(
            "`{}` changed at {} while {job} ran, which writes this checkout (a job may have written it): read it, then run `berth trust` (or save it again with no such job running)",
            file.display(),
            changed.with_timezone(&chrono::Local).format("%H:%M:%S"),
        ),
    })
}

/// `job` could write `file` (its checkout holds it and it writes directly)
/// and ran at `at`.
fn wrote_during(job: &JobInfo, file: &std::path::Path, at: DateTime<Utc>) -> bool {
    let direct = job.writes.as_ref().is_none_or(|w| w.mode == WriteMode::Direct);
    // Workspaces are recorded canonical (admission resolves them).
    let holds = job.workspace.as_ref().is_some_and(|w| file.starts_with(w));
    // From its creation: a quick job writes before its start is recorded.
    let ended = job.ended_at.unwrap_or_else(Utc::now);
    direct && holds && job.created_at <= at && at <= ended
}
