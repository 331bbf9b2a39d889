//! `ssh://user@host[:port]` engines, the way the `docker` CLI reaches them:
//! each connection is an `ssh … docker system dial-stdio` on the engine host
//! (the user's own ssh: keys, agent, `~/.ssh/config`, known hosts), here
//! behind a Unix socket of this process's that the engine client connects
//! to like a local engine's.
//!
//! Why not bollard's own ssh transport: it hands ssh `user@host:port` as one
//! host name, so any port but 22 fails, and it makes a new ssh master per
//! connection anyway. The socket is in a directory only this user can enter
//! (it is the engine: whoever connects is root on the engine host), and
//! `BatchMode` keeps ssh from prompting on a terminal nobody watches.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Mutex, OnceLock};

use tokio::net::UnixListener;
use tokio::process::Command;

use crate::error::{Error, Result};

/// Where an `ssh://` endpoint's bridge listens, made on first use per
/// endpoint and kept for the life of the process.
pub fn bridge(endpoint: &str) -> Result<PathBuf> {
    static BRIDGES: OnceLock<Mutex<Vec<(String, PathBuf)>>> = OnceLock::new();
    let bridges = BRIDGES.get_or_init(Default::default);
    let mut known = bridges.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, path)) = known.iter().find(|(e, _)| e == endpoint) {
        return Ok(path.clone());
    }
    let target = Target::parse(endpoint)?;
    let fail = |e: std::io::Error| Error::EngineUnavailable {
        endpoint: endpoint.to_string(),
        message: format!("could not make the ssh bridge's socket: {e}"),
    };
    let dir = std::env::temp_dir().join(format!("berth-ssh-{}-{}", std::process::id(), known.len()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).map_err(fail)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(fail)?;
    let path = dir.join("engine.sock");
    let rt = crate::net::runtime()?;
    let listener = {
        let _in = rt.enter();
        UnixListener::bind(&path).map_err(fail)?
    };
    rt.spawn(serve(listener, target));
    known.push((endpoint.to_string(), path.clone()));
    Ok(path)
}

/// `ssh://[user@]host[:port]` taken apart.
#[derive(Debug, Clone, PartialEq)]
struct Target {
    user: Option<String>,
    host: String,
    port: Option<u16>,
}

impl Target {
    fn parse(endpoint: &str) -> Result<Target> {
        let bad = |why: &str| Error::EngineUnavailable {
            endpoint: endpoint.to_string(),
            message: format!("not an ssh endpoint berth can use: {why} (ssh://user@host[:port])"),
        };
        let rest = endpoint
            .strip_prefix("ssh://")
            .ok_or_else(|| bad("no ssh:// scheme"))?;
        let rest = rest.trim_end_matches('/');
        if rest.contains('/') {
            return Err(bad("a path is not supported"));
        }
        let (user, hostport) = match rest.rsplit_once('@') {
            Some((u, h)) => (Some(u.to_string()), h),
            None => (None, rest),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') || h.ends_with(']') => (
                h,
                Some(p.parse::<u16>().map_err(|_| bad("the port is not a number"))?),
            ),
            _ => (hostport, None),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
        // Never an option to ssh: a host or user starting with `-` is refused.
        let option_like = |s: &str| s.is_empty() || s.starts_with('-');
        if option_like(&host) || user.as_deref().is_some_and(option_like) {
            return Err(bad("an empty or option-like host or user"));
        }
        Ok(Target { user, host, port })
    }

    /// The `ssh` arguments that run `docker system dial-stdio` there.
    fn args(&self) -> Vec<String> {
        let mut a = vec!["-o".into(), "BatchMode=yes".into(), "-T".into()];
        if let Some(p) = self.port {
            a.extend(["-p".into(), p.to_string()]);
        }
        if let Some(u) = &self.user {
            a.extend(["-l".into(), u.clone()]);
        }
        a.extend(["--".into(), self.host.clone()]);
        a.extend(["docker", "system", "dial-stdio"].map(String::from));
        a
    }
}

/// Accept connections and pipe each through its own `ssh`.
async fn serve(listener: UnixListener, target: Target) {
    loop {
        let Ok((mut conn, _)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let args = target.args();
        tokio::spawn(async move {
            let child = Command::new("ssh")
                .args(&args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn();
            let mut child = match child {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "could not run ssh for the engine");
                    return;
                }
            };
            let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                return;
            };
            let mut remote = tokio::io::join(stdout, stdin);
            let _ = tokio::io::copy_bidirectional(&mut conn, &mut remote).await;
            let _ = child.kill().await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_taken_apart_and_never_become_options() {
        let t = Target::parse("ssh://me@box.example:2222").unwrap();
        assert_eq!(
            (t.user.as_deref(), t.host.as_str(), t.port),
            (Some("me"), "box.example", Some(2222))
        );
        assert_eq!(
            t.args(),
            [
                "-o",
                "BatchMode=yes",
                "-T",
                "-p",
                "2222",
                "-l",
                "me",
                "--",
                "box.example",
                "docker",
                "system",
                "dial-stdio"
            ]
        );
        let t = Target::parse("ssh://box").unwrap();
        assert_eq!((t.user, t.port), (None, None));
        let t = Target::parse("ssh://u@[fd00::1]:22").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("fd00::1", Some(22)));
        for bad in [
            "ssh://-oProxyCommand=x",
            "ssh://-l@h",
            "ssh://h:port",
            "ssh://h/path",
            "tcp://h",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }
}
