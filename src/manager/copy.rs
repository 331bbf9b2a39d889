//! `berth cp JOB:PATH DEST` (API `GET /v1/jobs/{id}/archive`, MCP
//! `copy_out`): files out of a running container job, as the engine's
//! archive of them. What a job on a remote engine writes exists only in its
//! container (its workspace is an uploaded copy, nothing is synced back),
//! so this is how test reports and build outputs come home; it works the
//! same for a local engine's job. A host job's files are on this machine
//! already and are refused with where they are.

use super::Manager;
use crate::error::{Error, Result};
use crate::model::JobId;

/// Largest archive copied out (the answer is held in memory on both sides).
pub const MAX_COPY_BYTES: u64 = 64 << 20;
/// Longest path accepted.
const MAX_PATH_BYTES: usize = 4096;

impl Manager {
    /// The tar of `path` in job `id`'s container; a relative `path` is taken
    /// from the job's workspace (where it starts unless `--cwd`).
    pub async fn copy_out(&self, id: &JobId, path: &str) -> Result<Vec<u8>> {
        if path.is_empty() || path.len() > MAX_PATH_BYTES || path.contains('\0') {
            return Err(Error::InvalidValue {
                what: "path",
                input: path.chars().take(64).collect(),
                message: format!("must be a path of 1 to {MAX_PATH_BYTES} bytes"),
            });
        }
        let info = self.info(id)?;
        let Some(container) = info.container_id.clone().filter(|_| info.status.is_active()) else {
            let message = match (&info.container_id, &info.workspace) {
                (None, Some(ws)) => format!(
                    "is a host job: its files are on this machine, in {}",
                    ws.display()
                ),
                _ => "has ended and its container is gone: copy files out while it runs".into(),
            };
            return Err(Error::InvalidValue {
                what: "job",
                input: id.to_string(),
                message,
            });
        };
        let full = match (path.starts_with('/'), &info.workspace) {
            (false, Some(ws)) => ws.join(path).to_string_lossy().into_owned(),
            _ => path.to_string(),
        };
        self.inner
            .engine
            .copy_out(&container, &full, MAX_COPY_BYTES)
            .await
            .map_err(|e| match e.engine_status() {
                Some(404) => Error::InvalidValue {
                    what: "path",
                    input: full.clone(),
                    message: format!("is not in {id}'s container"),
                },
                _ => e,
            })
    }
}
