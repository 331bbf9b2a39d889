//! Each container job's own `/etc/hosts`, `/etc/resolv.conf` and
//! `/etc/hostname`, written by berth into the job's private directory
//! (`<state>/<instance>/jobs/<id>/etc/`) and bind-mounted read-only over
//! the engine's (the engine skips its own files when a mount targets them).
//!
//! Why: a job that joins a pause container's namespace (`container:<pause>`)
//! would otherwise get the pause's files, the very files every later job
//! on that network gets: one job appending `7.7.7.7 pypi.org` to
//! `/etc/hosts` would redirect the next job's names. A job's own file,
//! read-only to it, is seen by nobody else, and nobody else's is seen by it.
//!
//! What the files say: `hosts` has the usual localhost lines plus the job's
//! name (its id) on its address when that is known before the start (a
//! pause's address, which the job shares); a job with an endpoint of its
//! own gets its address from the engine at start, so its name is given to
//! the engine as a network alias instead and resolves through the engine's
//! DNS (`127.0.0.11`, which `resolv.conf` names, as the engine's own would
//! on a user-defined network; on an internal network it answers only the
//! network's own names). `hostname` is the job's id, as is `$HOSTNAME`.
//!
//! A job in an MCP session's pod (`pod/`) gets the pod's `/etc/hosts`
//! instead of its own: one file, written by berth alone and read-only to
//! every member, naming the members on 127.0.0.1.
//!
//! The files are 0644 (the job's user inside, whoever it is, must read
//! them) in a 0700 directory, so no other local user reads them here.

use std::io::Write;
use std::net::IpAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use bollard::models::{Mount, MountBindOptions, MountBindOptionsPropagationEnum, MountType};

use crate::error::{Error, Result};
use crate::model::JobId;

/// The resolver a job on a berth network uses: the engine's embedded DNS.
pub const RESOLV_CONF: &str = "nameserver 127.0.0.11\noptions ndots:0\n";

/// The localhost lines every hosts file starts with (the engine's own).
pub(super) const LOCALHOST: &str = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n\
fe00::0\tip6-localnet\nff00::0\tip6-mcastprefix\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n";

/// A job's written files.
#[derive(Debug, Clone)]
pub struct EtcFiles {
    dir: PathBuf,
    /// Mount `resolv.conf` too (a berth network or none; the engine's
    /// default bridge keeps the engine's copy of the host's resolvers).
    resolv: bool,
}

/// The text of a job's hosts file; `address`: the job's own, when known.
pub fn hosts_text(id: &JobId, address: Option<IpAddr>) -> String {
    let mut text = LOCALHOST.to_string();
    if let Some(ip) = address {
        text.push_str(&format!("{ip}\t{id}\n"));
    }
    text
}

/// Write job `id`'s files under `job_dir/etc`. `address`: the job's address
/// when known now; `resolv`: write (and mount) `resolv.conf`. Written
/// again on each attempt (a pause that vanished changes the address).
pub fn write(job_dir: &Path, id: &JobId, address: Option<IpAddr>, resolv: bool) -> Result<EtcFiles> {
    let dir = job_dir.join("etc");
    let fail = |source| Error::JobFiles {
        job: id.clone(),
        dir: dir.clone(),
        source,
    };
    crate::store::private::create_dir(&dir).map_err(fail)?;
    let mut files = vec![
        ("hosts", hosts_text(id, address)),
        ("hostname", format!("{id}\n")),
    ];
    if resolv {
        files.push(("resolv.conf", RESOLV_CONF.to_string()));
    }
    for (name, text) in files {
        put(&dir.join(name), &text).map_err(fail)?;
    }
    Ok(EtcFiles { dir, resolv })
}

/// Replace `path`'s contents, readable by any user inside the container.
pub(super) fn put(path: &Path, text: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .open(path)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
    f.write_all(text.as_bytes())
}

impl EtcFiles {
    /// Read-only bind mounts of the files over the engine's.
    pub fn mounts(&self) -> Vec<Mount> {
        let mut names = vec!["hosts", "hostname"];
        if self.resolv {
            names.push("resolv.conf");
        }
        names
            .into_iter()
            .map(|name| Mount {
                target: Some(format!("/etc/{name}")),
                source: Some(self.dir.join(name).to_string_lossy().into_owned()),
                typ: Some(MountType::BIND),
                read_only: Some(true),
                bind_options: Some(MountBindOptions {
                    propagation: Some(MountBindOptionsPropagationEnum::PRIVATE),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_jobs_files_name_it_and_are_readable_inside_only() {
        let state = tempfile::tempdir().unwrap();
        let job_dir = state.path().join("job-7");
        crate::store::private::own_dir(&job_dir).unwrap();
        let id = JobId::from("job-7");
        let files = write(&job_dir, &id, Some("172.18.0.3".parse().unwrap()), true).unwrap();
        let read = |n: &str| std::fs::read_to_string(job_dir.join("etc").join(n)).unwrap();
        assert!(read("hosts").starts_with("127.0.0.1\tlocalhost\n"));
        assert!(read("hosts").ends_with("172.18.0.3\tjob-7\n"));
        assert_eq!(read("hostname"), "job-7\n");
        assert_eq!(read("resolv.conf"), RESOLV_CONF);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        assert_eq!(mode(&job_dir.join("etc/hosts")), 0o644);
        assert_eq!(mode(&job_dir.join("etc")), 0o700);
        let targets: Vec<_> = files
            .mounts()
            .into_iter()
            .map(|m| (m.target.unwrap(), m.read_only))
            .collect();
        assert_eq!(
            targets,
            [
                ("/etc/hosts".to_string(), Some(true)),
                ("/etc/hostname".to_string(), Some(true)),
                ("/etc/resolv.conf".to_string(), Some(true))
            ]
        );
        // Written again without an address and without resolv.conf.
        let files = write(&job_dir, &id, None, false).unwrap();
        assert!(!read("hosts").contains("job-7"));
        assert_eq!(files.mounts().len(), 2);
    }
}
