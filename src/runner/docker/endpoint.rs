//! Which engine berth talks to, and how, read the way the `docker` CLI reads
//! it: `DOCKER_HOST` (with `DOCKER_TLS_VERIFY` and `DOCKER_CERT_PATH` for a
//! TLS `tcp://` host), else the Docker context (`DOCKER_CONTEXT`, else
//! `currentContext` in `~/.docker/config.json`; its endpoint in
//! `~/.docker/contexts/meta/<sha256 of the name>/meta.json`, its TLS files
//! in `~/.docker/contexts/tls/<same>/docker/`), else the local socket.
//! `ssh://user@host[:port]` goes through the system `ssh` (the engine host
//! runs `docker system dial-stdio`; `ssh.rs`).
//!
//! Where the engine is decides how a job reaches the caller's files and
//! ports: a local engine (a unix socket, or TCP to a loopback address) sees
//! this machine's paths and container addresses; a remote one sees
//! neither, so the workspace is uploaded and ports are published on the
//! engine host (see `remote.rs`). Every process of an instance (manager,
//! watchdog, blocking removals) resolves the same endpoint from the same
//! environment, so the watchdog reaches the engine its manager used.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use bollard::{API_DEFAULT_VERSION, Docker};
use sha2::{Digest, Sha256};

/// The local engine's socket when nothing else is named.
pub const DEFAULT_SOCKET: &str = "unix:///var/run/docker.sock";
/// Seconds one engine request may take (bollard's default).
const REQUEST_TIMEOUT: u64 = 120;
/// Largest Docker config or context file read.
const MAX_FILE: u64 = 1 << 20;

/// The engine to use and how to reach it.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// `unix:///…`, `tcp://host:port`, `https://…` or `ssh://user@host[:port]`.
    pub host: String,
    /// Client certificate files for a TLS `tcp://` host.
    pub tls: Option<Tls>,
    /// Where the endpoint came from, for `berth config` and errors.
    pub source: String,
}

/// A TLS client's files (`ca.pem`, `cert.pem`, `key.pem`).
#[derive(Debug, Clone, PartialEq)]
pub struct Tls {
    pub dir: PathBuf,
}

/// Whether the engine sees this machine's files and addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    Local,
    /// Reached over the network; `host` is the engine host's name or address.
    Remote {
        host: String,
    },
}

impl Endpoint {
    /// The endpoint of this process's environment (resolved once).
    pub fn current() -> &'static Endpoint {
        static CURRENT: OnceLock<Endpoint> = OnceLock::new();
        CURRENT.get_or_init(|| resolve(|k| std::env::var(k).ok(), home().as_deref()))
    }

    /// A plain endpoint (tests, the scoped engine's own socket).
    pub fn plain(host: &str) -> Endpoint {
        Endpoint {
            host: host.to_string(),
            tls: None,
            source: "given".into(),
        }
    }

    /// Local or remote, by the endpoint's address.
    pub fn place(&self) -> Place {
        let Some((scheme, rest)) = self.host.split_once("://") else {
            return Place::Local;
        };
        let authority = rest.split('/').next().unwrap_or("");
        let host = authority.rsplit('@').next().unwrap_or("");
        let name = match host.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(""),
            None => host.rsplit_once(':').map_or(host, |(h, _)| h),
        };
        match scheme {
            "unix" | "npipe" => Place::Local,
            "ssh" => Place::Remote { host: name.into() },
            _ if name == "localhost" || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()) => {
                Place::Local
            }
            _ => Place::Remote { host: name.into() },
        }
    }

    /// One line for `berth config`, the card and `berth up`.
    pub fn describe(&self) -> String {
        let tls = if self.tls.is_some() { ", TLS" } else { "" };
        match self.place() {
            Place::Local => format!("local engine at {}{tls} ({})", self.host, self.source),
            Place::Remote { host } => {
                format!("remote engine on {host} at {}{tls} ({})", self.host, self.source)
            }
        }
    }

    /// A client for this endpoint (not yet contacted).
    pub fn client(&self) -> Result<Docker, String> {
        let h = self.host.as_str();
        let made = if h.starts_with("unix://") {
            Docker::connect_with_unix(h, REQUEST_TIMEOUT, API_DEFAULT_VERSION)
        } else if h.starts_with("ssh://") {
            let sock = super::ssh::bridge(h).map_err(|e| e.to_string())?;
            Docker::connect_with_unix(
                &format!("unix://{}", sock.display()),
                REQUEST_TIMEOUT,
                API_DEFAULT_VERSION,
            )
        } else if let Some(tls) = &self.tls {
            tls_client(h, tls)?
        } else if h.starts_with("tcp://") || h.starts_with("http://") {
            Docker::connect_with_http(h, REQUEST_TIMEOUT, API_DEFAULT_VERSION)
        } else {
            return Err(format!(
                "`{h}` is not an engine address berth knows: use unix://, tcp://, https:// or ssh://"
            ));
        };
        made.map_err(|e| e.to_string())
    }

    /// The engine host's address as this machine reaches it (for ports the
    /// engine publishes there); `None` when the name does not resolve.
    pub fn host_addr(&self) -> Option<IpAddr> {
        match self.place() {
            Place::Local => Some(IpAddr::from([127, 0, 0, 1])),
            Place::Remote { host } => {
                if let Ok(ip) = host.parse::<IpAddr>() {
                    return Some(ip);
                }
                (host.as_str(), 0)
                    .to_socket_addrs()
                    .ok()?
                    .map(|a: SocketAddr| a.ip())
                    .find(IpAddr::is_ipv4)
            }
        }
    }
}

/// A client for a TLS `tcp://` (or `https://`) engine, with the client
/// certificate and CA in `tls.dir`.
#[cfg(feature = "remote-tls")]
fn tls_client(host: &str, tls: &Tls) -> Result<Result<Docker, bollard::errors::Error>, String> {
    let addr = host.replacen("https://", "tcp://", 1);
    Ok(Docker::connect_with_ssl(
        &addr,
        &tls.dir.join("key.pem"),
        &tls.dir.join("cert.pem"),
        &tls.dir.join("ca.pem"),
        REQUEST_TIMEOUT,
        API_DEFAULT_VERSION,
    ))
}

/// Without `remote-tls` there is no TLS client: said, not tried in the clear.
#[cfg(not(feature = "remote-tls"))]
fn tls_client(host: &str, _tls: &Tls) -> Result<Result<Docker, bollard::errors::Error>, String> {
    Err(format!(
        "`{host}` asks for TLS, and this berth was built without the `remote-tls` feature (it is a default feature: build with it)"
    ))
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from)
}

/// The endpoint `env` and the Docker config under `home` name.
pub fn resolve(env: impl Fn(&str) -> Option<String>, home: Option<&Path>) -> Endpoint {
    let set = |k: &str| env(k).filter(|v| !v.is_empty());
    if let Some(host) = set("DOCKER_HOST") {
        let tls = (host.starts_with("https://") || set("DOCKER_TLS_VERIFY").is_some()).then(|| Tls {
            dir: set("DOCKER_CERT_PATH")
                .map(PathBuf::from)
                .or_else(|| home.map(|h| h.join(".docker")))
                .unwrap_or_default(),
        });
        return Endpoint {
            host,
            tls,
            source: "DOCKER_HOST".into(),
        };
    }
    let docker_dir = set("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| home.map(|h| h.join(".docker")));
    let context = set("DOCKER_CONTEXT").or_else(|| {
        let config = read_json(&docker_dir.as_ref()?.join("config.json"))?;
        config.get("currentContext")?.as_str().map(str::to_string)
    });
    if let (Some(name), Some(dir)) = (context.filter(|n| n != "default"), docker_dir)
        && let Some(e) = from_context(&dir, &name)
    {
        return e;
    }
    Endpoint {
        host: DEFAULT_SOCKET.into(),
        tls: None,
        source: "the default socket".into(),
    }
}

/// Context `name`'s Docker endpoint, from its meta file and TLS files.
fn from_context(docker_dir: &Path, name: &str) -> Option<Endpoint> {
    let id = hex(&Sha256::digest(name.as_bytes()));
    let meta = read_json(&docker_dir.join("contexts/meta").join(&id).join("meta.json"))?;
    let docker = meta.get("Endpoints")?.get("docker")?;
    let host = docker.get("Host")?.as_str()?.to_string();
    let tls_dir = docker_dir.join("contexts/tls").join(&id).join("docker");
    let tls = tls_dir.join("ca.pem").is_file().then_some(Tls { dir: tls_dir });
    Some(Endpoint {
        host,
        tls,
        source: format!("Docker context `{name}`"),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A JSON file of at most [`MAX_FILE`] bytes; `None` when absent or unreadable.
fn read_json(path: &Path) -> Option<serde_json::Value> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_FILE)
        .read_to_string(&mut text)
        .ok()?;
    serde_json::from_str(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn docker_host_and_its_tls_variables() {
        let e = resolve(env(&[]), None);
        assert_eq!((e.host.as_str(), e.tls.is_none()), (DEFAULT_SOCKET, true));
        assert_eq!(e.place(), Place::Local);
        let e = resolve(env(&[("DOCKER_HOST", "tcp://10.1.2.3:2375")]), None);
        assert_eq!(
            e.place(),
            Place::Remote {
                host: "10.1.2.3".into()
            }
        );
        assert!(e.tls.is_none());
        let vars = [
            ("DOCKER_HOST", "tcp://build.example:2376"),
            ("DOCKER_TLS_VERIFY", "1"),
            ("DOCKER_CERT_PATH", "/certs"),
        ];
        let e = resolve(env(&vars), Some(Path::new("/home/u")));
        assert_eq!(e.tls, Some(Tls { dir: "/certs".into() }));
        let e = resolve(env(&vars[..2]), Some(Path::new("/home/u")));
        assert_eq!(
            e.tls,
            Some(Tls {
                dir: "/home/u/.docker".into()
            })
        );
        for (host, place) in [
            ("unix:///run/user/1000/docker.sock", Place::Local),
            ("tcp://127.0.0.1:2375", Place::Local),
            ("tcp://localhost:2375", Place::Local),
            ("tcp://[::1]:2375", Place::Local),
            ("ssh://me@box:2222", Place::Remote { host: "box".into() }),
            ("ssh://box", Place::Remote { host: "box".into() }),
            (
                "tcp://[fd00::5]:2376",
                Place::Remote {
                    host: "fd00::5".into(),
                },
            ),
        ] {
            assert_eq!(Endpoint::plain(host).place(), place, "{host}");
        }
        assert!(
            Endpoint::plain("ftp://x")
                .client()
                .unwrap_err()
                .contains("ftp://x")
        );
    }

    #[test]
    fn the_current_context_is_read_as_the_docker_cli_reads_it() {
        let home = tempfile::tempdir().unwrap();
        let docker = home.path().join(".docker");
        let id = hex(&Sha256::digest(b"farm"));
        let meta = docker.join("contexts/meta").join(&id);
        std::fs::create_dir_all(&meta).unwrap();
        std::fs::write(
            meta.join("meta.json"),
            r#"{"Name":"farm","Endpoints":{"docker":{"Host":"tcp://10.9.8.7:2376","SkipTLSVerify":false}}}"#,
        )
        .unwrap();
        let tls = docker.join("contexts/tls").join(&id).join("docker");
        std::fs::create_dir_all(&tls).unwrap();
        std::fs::write(tls.join("ca.pem"), "x").unwrap();
        std::fs::write(docker.join("config.json"), r#"{"currentContext":"farm"}"#).unwrap();
        let e = resolve(env(&[]), Some(home.path()));
        assert_eq!(e.host, "tcp://10.9.8.7:2376");
        assert_eq!(e.tls, Some(Tls { dir: tls.clone() }));
        assert!(e.source.contains("farm") && e.describe().contains("remote engine on 10.9.8.7"));
        // DOCKER_CONTEXT wins over the config file; DOCKER_HOST over both.
        let e = resolve(env(&[("DOCKER_CONTEXT", "default")]), Some(home.path()));
        assert_eq!(e.host, DEFAULT_SOCKET);
        let e = resolve(env(&[("DOCKER_HOST", "unix:///x.sock")]), Some(home.path()));
        assert_eq!(e.host, "unix:///x.sock");
        // A context that is not there: the default socket, not an error.
        let e = resolve(env(&[("DOCKER_CONTEXT", "gone")]), Some(home.path()));
        assert_eq!(e.host, DEFAULT_SOCKET);
    }
}
