//! A job on a remote engine (`endpoint.rs` says which engines are): the
//! engine sees neither this machine's files nor its container addresses,
//! so what a local job gets by a bind mount or a route it gets another way.
//!
//! - **The workspace** is uploaded: the files under it minus `.dockerignore`
//!   (walked as a build context is, no symlink followed, at most
//!   `MAX_CONTEXT_BYTES`), as a tar owned by the job's user, into a volume
//!   of the container's own at the workspace's path, after the create and
//!   before the start. Nothing is synced back: `berth cp` fetches files
//!   from a running job.
//! - **Ports** are published by the engine on its host (the address the
//!   caller names it by when that is an address, else all of its
//!   interfaces, with a note), and berth's 127.0.0.1 listeners relay to
//!   them ([`crate::net::Upstream::Published`]), so the caller sees the
//!   same `127.0.0.1:PORT` as with a local engine.
//! - **Egress**: berth's egress proxy listens on the job network's gateway,
//!   an address of the engine host, so `egress = "proxy"` becomes `none`
//!   there (with a note); a job with ports needs a network with a way out
//!   (the engine publishes only there), so it gets `all`, as with
//!   `publish = "engine"`.
//! - No pause containers, `/etc` files, protected copies or set-uid sweep:
//!   each of those is a file of this machine's; the job's files on the
//!   engine are a copy that nothing of the caller's reads back.

use std::net::IpAddr;
use std::path::Path;

use super::endpoint::{Endpoint, Place};
use super::reach::{self, Decision};
use crate::error::{Error, Result};
use crate::model::{Egress, JobId, JobSpec, Network, Publish};

/// What a remote engine's job is launched with.
pub struct RemoteJob {
    /// Where the engine publishes the job's ports on its host.
    pub publish_ip: String,
    /// The engine host's address as this machine reaches it.
    pub reach: IpAddr,
    /// The workspace as a tar, unpacked at `/` (its entries carry the path;
    /// `Bytes`: each create attempt sends it without a copy).
    pub upload: bytes::Bytes,
    /// Said on the card (`not_enforced`).
    pub notes: Vec<String>,
    /// When the workspace was read for the upload (a `layer` job's copy).
    pub uploaded_at: chrono::DateTime<chrono::Utc>,
}

/// The engine's host when `endpoint` is remote.
pub fn remote_host(endpoint: &Endpoint) -> Option<String> {
    match endpoint.place() {
        Place::Local => None,
        Place::Remote { host } => Some(host),
    }
}

impl RemoteJob {
    /// Read the workspace (off the async workers) and work out the addresses.
    pub async fn prepare(
        id: &JobId,
        endpoint: &Endpoint,
        workspace: &Path,
        user: &str,
        layer: Option<&str>,
    ) -> Result<RemoteJob> {
        let host = remote_host(endpoint).unwrap_or_default();
        let reach = endpoint.host_addr().ok_or_else(|| Error::EngineUnavailable {
            endpoint: endpoint.host.clone(),
            message: format!("the engine host `{host}` does not resolve to an address"),
        })?;
        let mut notes = Vec::new();
        let publish_ip = match host.parse::<IpAddr>() {
            Ok(ip) => ip.to_string(),
            Err(_) => {
                notes.push(format!(
                    "ports are published on all interfaces of {host} (it is named, not addressed, in the engine endpoint)"
                ));
                "0.0.0.0".into()
            }
        };
        // The path the container mounts it at (`create::mount_plan`: canonical).
        let ws = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
        let owner = owner_ids(user);
        let started = std::time::Instant::now();
        let uploaded_at = chrono::Utc::now();
        let (upload, files, excluded) =
            tokio::task::spawn_blocking(move || -> Result<(Vec<u8>, usize, usize)> {
                let ctx = crate::images::context::walk_workspace(&ws)?;
                let prefix = ws.to_string_lossy().trim_start_matches('/').to_string();
                let mut tar = Vec::with_capacity(ctx.bytes as usize + 64 * 1024);
                ctx.write_tar_under(&mut tar, &prefix, owner)
                    .map_err(|e| Error::io("pack", &ws, e))?;
                Ok((tar, ctx.len(), ctx.excluded))
            })
            .await
            .map_err(|e| Error::Docker {
                action: "upload the workspace",
                job: id.to_string(),
                message: format!("packing it failed: {e}"),
            })??;
        // On the card: what went, and what comes back.
        let back = match layer {
            Some(l) => format!(
                "its changes come back into layer {l} when it ends (`berth diff {l}`, `berth apply {l}`)"
            ),
            None => "nothing is synced back (`berth cp` fetches files)".into(),
        };
        notes.insert(
            0,
            format!(
                "remote engine on {host}: the workspace is a copy ({files} entries, {:.1} MiB, {excluded} kept out by .dockerignore, packed in {} ms) uploaded at the start; {back}",
                upload.len() as f64 / (1 << 20) as f64,
                started.elapsed().as_millis()
            ),
        );
        Ok(RemoteJob {
            publish_ip,
            reach,
            upload: bytes::Bytes::from(upload),
            notes,
            uploaded_at,
        })
    }
}

/// The numeric owner of the uploaded files: the job's `UID:GID` (`root` is 0:0).
pub fn owner_ids(user: &str) -> (u64, u64) {
    let (u, g) = user.split_once(':').unwrap_or((user, user));
    (u.parse().unwrap_or(0), g.parse().unwrap_or(0))
}

/// [`reach::decide`] for a remote engine: no proxy there, the engine publishes.
pub fn decide(spec: &JobSpec, network: Network, egress: Egress) -> Decision {
    let asked = spec.egress.unwrap_or(egress);
    if asked != Egress::Proxy {
        return reach::decide(spec, network, asked, Publish::Engine);
    }
    let mut none = spec.clone();
    none.egress = Some(Egress::None);
    let mut d = reach::decide(&none, network, Egress::None, Publish::Engine);
    d.notes.retain(|n| !n.starts_with("egress none"));
    d.notes.push(match d.egress {
        Egress::All => "egress proxy: not available on a remote engine, and the engine publishes ports only on a network with a way out, so all".into(),
        _ => "egress proxy: not available on a remote engine, so none (set egress = \"all\" to let the job out)".into(),
    });
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn egress_and_publishing_on_a_remote_engine() {
        let plain = JobSpec::shell("true");
        let d = decide(&plain, Network::Isolated, Egress::Proxy);
        assert_eq!(
            (d.egress, d.engine_publishes, d.internal),
            (Egress::None, false, true)
        );
        assert!(
            d.notes.iter().any(|n| n.contains("remote engine")),
            "{:?}",
            d.notes
        );
        let served = JobSpec::shell("true").with_port(8080);
        let d = decide(&served, Network::Isolated, Egress::Proxy);
        assert_eq!((d.egress, d.engine_publishes), (Egress::All, true));
        assert_eq!(d.notes.len(), 1, "{:?}", d.notes);
        assert!(d.notes[0].contains("remote engine") && d.notes[0].ends_with("so all"));
        let d = decide(&plain, Network::Isolated, Egress::All);
        assert_eq!((d.egress, d.internal), (Egress::All, false));
        assert_eq!(owner_ids("1000:1001"), (1000, 1001));
        assert_eq!(owner_ids("root"), (0, 0));
    }
}
