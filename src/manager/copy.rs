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
                (None, _) if info.node.is_some() => format!(
                    "runs on a swarm node ({}), whose engine berth does not reach: nothing comes back from a swarm job",
                    info.node.as_deref().unwrap_or_default()
                ),
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
        let tar = self
            .inner
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
            })?;
        // The engine reads as root; the copy gets only what the job could.
        if let Some(unreadable) = info.limits.user.as_deref().and_then(|u| unreadable(&tar, u)) {
            return Err(Error::InvalidValue {
                what: "path",
                input: full,
                message: format!(
                    "holds {unreadable}, which {id} cannot read (it runs as {}): berth copies only what the job could read",
                    info.limits.user.as_deref().unwrap_or("?")
                ),
            });
        }
        Ok(tar)
    }
}

/// The first entry of `tar` that `user` (`uid:gid`, or `root`) could not
/// read by its mode bits (a directory also needs `x`), named with its mode
/// and owner. Supplementary groups are not counted: a file readable only
/// through one is refused, erring on the side of the job's reach.
fn unreadable(tar: &[u8], user: &str) -> Option<String> {
    let (uid, gid) = match user.split_once(':') {
        _ if user == "root" => return None,
        Some((u, g)) => (u.parse::<u64>().ok()?, g.parse::<u64>().ok()?),
        None => return None,
    };
    if uid == 0 {
        return None;
    }
    let mut archive = tar::Archive::new(tar);
    for entry in archive.entries().ok()? {
        let Ok(entry) = entry else { break };
        let h = entry.header();
        let (Ok(mode), Ok(owner), Ok(group)) = (h.mode(), h.uid(), h.gid()) else {
            continue;
        };
        let bits = if owner == uid {
            mode >> 6
        } else if group == gid {
            mode >> 3
        } else {
            mode
        } & 0o7;
        let need = if h.entry_type().is_dir() { 0o5 } else { 0o4 };
        if h.entry_type().is_symlink() || bits & need == need {
            continue;
        }
        let name = entry.path().map(|p| p.display().to_string()).unwrap_or_default();
        return Some(format!(
            "`{name}` (mode {:04o}, owner {owner}:{group})",
            mode & 0o7777
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::unreadable;

    fn tar_of(entries: &[(&str, u32, u64, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, mode, uid, data) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(*mode);
            h.set_uid(*uid);
            h.set_gid(*uid);
            h.set_cksum();
            b.append_data(&mut h, name, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn what_the_job_cannot_read_is_named_and_what_it_can_passes() {
        let tar = tar_of(&[("report.xml", 0o644, 0, b"<ok/>"), ("secret", 0o600, 0, b"s")]);
        let why = unreadable(&tar, "1000:1000").expect("refused");
        assert!(
            why.contains("secret") && why.contains("0600") && why.contains("0:0"),
            "{why}"
        );
        assert_eq!(unreadable(&tar, "root"), None);
        let own = tar_of(&[("mine", 0o600, 1000, b"m")]);
        assert_eq!(unreadable(&own, "1000:1000"), None);
    }
}
