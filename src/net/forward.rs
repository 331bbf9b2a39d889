//! berth's port forwarder: for every published port of a job, a socket on
//! 127.0.0.1 that relays each connection (each UDP peer) to the job.
//!
//! Why berth and not the engine: a port the engine publishes is also
//! accepted from every other interface at the container's address (engine
//! 20.10's NAT rules match on the container, not on the 127.0.0.1 binding),
//! and it is published only for a container that owns its network. With
//! berth forwarding, a job's network needs no way in at all (it is made
//! `internal`: the engine drops traffic between it and any other
//! interface), and a job with ports joins a pause container like any other.
//!
//! [`Upstream`] is the seam: how a connection reaches the job's port. A
//! local engine's container is reached at its address on its own network
//! ([`Upstream::Address`]); a remote engine's job is reached where that
//! engine published its port on its host ([`Upstream::Published`]), behind
//! the same listeners.
//!
//! Lifecycle: [`bind`] takes the host ports before the container is made
//! (an asked host port when free, else one the kernel picks, with a note),
//! so the ports are reported exactly as the engine's were; [`BoundPorts::serve`]
//! starts relaying once the job's address is known; [`Forwarder::close`]
//! (or dropping it) closes the listeners and every open connection. The
//! forwarder belongs to the job's runner control and closes when the job
//! ends, however it ends.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::{Error, Result};
use crate::model::{PortMapping, Proto};

/// Most connections one forwarded port relays at once; later ones wait in
/// the listen backlog until one ends.
pub const MAX_CONNECTIONS: usize = 1024;
/// Longest a connect to the job may take before the client is dropped.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How a connection reaches a job's port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstream {
    /// The job's address on its network, reachable from this machine (a
    /// container of the local engine).
    Address(IpAddr),
    /// A remote engine's host at `ip`, where the engine published each
    /// (job port, host port) pair.
    Published { ip: IpAddr, ports: Vec<(u16, u16)> },
}

impl Upstream {
    /// Where the job's `port` is.
    pub fn addr(&self, port: u16) -> SocketAddr {
        match self {
            Upstream::Address(ip) => SocketAddr::new(*ip, port),
            Upstream::Published { ip, ports } => {
                let host = ports.iter().find(|(p, _)| *p == port).map_or(port, |(_, h)| *h);
                SocketAddr::new(*ip, host)
            }
        }
    }
}

async fn connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
        Ok(r) => r,
        Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
    }
}

/// One port a job publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Want {
    pub port: u16,
    pub proto: Proto,
    /// The host port asked for; `None` (or taken) = one the kernel picks.
    pub host_port: Option<u16>,
    /// Already known reason the asked host port is not used.
    pub note: Option<String>,
    /// The caller asked for `host_port` itself: when it is taken the bind
    /// fails (`port_in_use`) rather than taking another, so a client that
    /// relies on that port is not silently sent elsewhere. A port listened
    /// on again after a crash (adopt) is not strict.
    pub strict: bool,
}

enum Socket {
    Tcp(std::net::TcpListener),
    Udp(std::net::UdpSocket),
}

/// A job's host ports, bound and not yet relaying.
pub struct BoundPorts {
    job: String,
    sockets: Vec<(u16, Socket)>,
    mappings: Vec<PortMapping>,
}

/// Bind 127.0.0.1 for each of `wants` (job `job`, for messages). An asked
/// host port that is taken fails the bind when the caller asked for it
/// ([`Want::strict`]), else is replaced by one the kernel picks, with a
/// note; any other failure is the error.
pub fn bind(job: &str, wants: &[Want]) -> Result<BoundPorts> {
    let mut sockets = Vec::new();
    let mut mappings = Vec::new();
    for w in wants {
        let at = |p: u16| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p);
        let open = |p: u16| -> std::io::Result<Socket> {
            match w.proto {
                Proto::Tcp => std::net::TcpListener::bind(at(p)).map(Socket::Tcp),
                Proto::Udp => std::net::UdpSocket::bind(at(p)).map(Socket::Udp),
            }
        };
        let mut note = w.note.clone();
        let socket = match w.host_port.map(open) {
            Some(Ok(s)) => Ok(s),
            Some(Err(e)) if e.kind() == std::io::ErrorKind::AddrInUse && w.strict => {
                return Err(Error::PortInUse {
                    port: w.host_port.unwrap_or_default(),
                    job_port: w.port,
                });
            }
            Some(Err(e)) if e.kind() == std::io::ErrorKind::AddrInUse => {
                note = Some(format!(
                    "host port {} was taken; berth picked another",
                    w.host_port.unwrap_or_default()
                ));
                open(0)
            }
            Some(Err(e)) => Err(e),
            None => open(0),
        };
        let fail = |source| Error::Listen {
            what: format!("port {}/{} of {job}", w.port, w.proto),
            addr: at(w.host_port.unwrap_or(0)),
            source,
        };
        let socket = socket.map_err(fail)?;
        let local = match &socket {
            Socket::Tcp(l) => l.local_addr(),
            Socket::Udp(u) => u.local_addr(),
        }
        .map_err(fail)?;
        mappings.push(PortMapping {
            port: w.port,
            proto: w.proto,
            host_ip: "127.0.0.1".into(),
            host_port: local.port(),
            note,
            listen: None,
        });
        sockets.push((w.port, socket));
    }
    Ok(BoundPorts {
        job: job.to_string(),
        sockets,
        mappings,
    })
}

impl BoundPorts {
    /// The ports as they will be reported (`127.0.0.1:HOST→PORT`).
    pub fn mappings(&self) -> &[PortMapping] {
        &self.mappings
    }

    /// True when nothing is forwarded.
    pub fn is_empty(&self) -> bool {
        self.sockets.is_empty()
    }

    /// Start relaying to `upstream` (on berth's network runtime).
    pub fn serve(self, upstream: Upstream) -> Result<Forwarder> {
        let rt = super::runtime()?;
        let _in = rt.enter();
        let token = CancellationToken::new();
        let tracker = TaskTracker::new();
        for (port, socket) in self.sockets {
            let local = self
                .mappings
                .iter()
                .find(|m| m.port == port)
                .map_or(0, |m| m.host_port);
            let fail = |source| Error::Listen {
                what: format!("port {port} of {}", self.job),
                addr: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), local),
                source,
            };
            match socket {
                Socket::Tcp(l) => {
                    l.set_nonblocking(true).map_err(fail)?;
                    let l = TcpListener::from_std(l).map_err(fail)?;
                    let target = upstream.addr(port);
                    tracker.spawn_on(accept_loop(l, target, port, token.clone(), tracker.clone()), rt);
                }
                Socket::Udp(u) => {
                    u.set_nonblocking(true).map_err(fail)?;
                    let u = tokio::net::UdpSocket::from_std(u).map_err(fail)?;
                    tracker.spawn_on(super::udp::serve(u, upstream.addr(port), token.clone()), rt);
                }
            }
        }
        tracker.close();
        Ok(Forwarder {
            token,
            tracker,
            mappings: self.mappings,
        })
    }
}

/// A job's running forwarder: its listeners and open connections.
#[derive(Debug)]
pub struct Forwarder {
    token: CancellationToken,
    tracker: TaskTracker,
    mappings: Vec<PortMapping>,
}

impl Forwarder {
    /// The forwarded ports.
    pub fn mappings(&self) -> &[PortMapping] {
        &self.mappings
    }

    /// Close the listeners and every connection (the job ended). The
    /// sockets are closed once their tasks saw it: see [`Self::closed`].
    pub fn close(&self) {
        self.token.cancel();
    }

    /// Resolves once every listener and connection is closed.
    pub async fn closed(&self) {
        self.tracker.wait().await;
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

/// Accept on one port and relay each connection until the job ends.
async fn accept_loop(
    listener: TcpListener,
    target: SocketAddr,
    port: u16,
    token: CancellationToken,
    tracker: TaskTracker,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let permit = tokio::select! {
            _ = token.cancelled() => return,
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let client = tokio::select! {
            _ = token.cancelled() => return,
            c = listener.accept() => c,
        };
        let client = match client {
            Ok((c, _)) => c,
            Err(e) => {
                // Out of descriptors and the like: pass, the next accept may work.
                tracing::debug!(port, error = %e, "forwarder accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let token = token.clone();
        tracker.spawn(async move {
            let _permit = permit;
            tokio::select! {
                _ = token.cancelled() => {}
                _ = relay_one(client, target, port) => {}
            }
        });
    }
}

async fn relay_one(client: TcpStream, target: SocketAddr, port: u16) {
    let _ = client.set_nodelay(true);
    let server = match connect(target).await {
        Ok(s) => s,
        Err(e) => {
            // Nothing listens inside (yet): the client sees a reset, as
            // it would connecting to the server itself.
            tracing::debug!(port, error = %e, "forwarder could not reach the job");
            let _ = client.set_zero_linger();
            return;
        }
    };
    let _ = server.set_nodelay(true);
    if let Err(e) = super::relay::relay(&client, &server).await {
        tracing::debug!(port, error = %e, "forwarded connection ended with an error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn want(port: u16, host_port: Option<u16>) -> Want {
        Want {
            port,
            proto: Proto::Tcp,
            host_port,
            note: None,
            strict: false,
        }
    }

    #[test]
    fn an_asked_port_that_is_taken_is_refused_when_the_caller_chose_it() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let strict = Want {
            strict: true,
            ..want(80, Some(port))
        };
        let err = bind("job-3", &[strict]).err().expect("refused");
        assert!(
            matches!(err, Error::PortInUse { port: p, job_port: 80 } if p == port),
            "{err}"
        );
    }

    #[tokio::test]
    async fn relays_to_the_upstream_and_closes_with_the_job() {
        // The "job": a server on loopback, reached at its address.
        let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = server.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let (mut c, _) = server.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut b = [0u8; 5];
                    c.read_exact(&mut b).await.unwrap();
                    c.write_all(&b).await.unwrap();
                    let mut rest = Vec::new();
                    let _ = c.read_to_end(&mut rest).await;
                });
            }
        });
        let bound = bind("job-1", &[want(port, None)]).unwrap();
        let host = bound.mappings()[0].host_port;
        assert_ne!(host, 0);
        let fwd = bound
            .serve(Upstream::Address(IpAddr::V4(Ipv4Addr::LOCALHOST)))
            .unwrap();
        let mut c = TcpStream::connect(("127.0.0.1", host)).await.unwrap();
        c.write_all(b"hello").await.unwrap();
        let mut b = [0u8; 5];
        c.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"hello");
        // The job ends: the open connection and the listener close.
        fwd.close();
        tokio::time::timeout(Duration::from_secs(5), fwd.closed())
            .await
            .unwrap();
        let mut rest = Vec::new();
        assert!(matches!(c.read_to_end(&mut rest).await, Ok(0) | Err(_)));
        assert!(TcpStream::connect(("127.0.0.1", host)).await.is_err());
    }

    #[tokio::test]
    async fn an_asked_port_is_used_when_free_and_replaced_with_a_note_when_taken() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let taken_port = taken.local_addr().unwrap().port();
        let free_port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let bound = bind("job-2", &[want(80, Some(free_port)), want(81, Some(taken_port))]).unwrap();
        let m = bound.mappings();
        assert_eq!((m[0].host_port, m[0].note.clone()), (free_port, None));
        assert_ne!(m[1].host_port, taken_port);
        assert_eq!(
            m[1].note.as_deref(),
            Some(format!("host port {taken_port} was taken; berth picked another").as_str())
        );
    }

    #[tokio::test]
    async fn nothing_listening_inside_resets_the_client() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let bound = bind("job-3", &[want(port, None)]).unwrap();
        let host = bound.mappings()[0].host_port;
        let _fwd = bound
            .serve(Upstream::Address(IpAddr::V4(Ipv4Addr::LOCALHOST)))
            .unwrap();
        // The reset may come before the connect has returned (a loaded
        // machine): the client then sees it as the connect's own error.
        let mut c = match TcpStream::connect(("127.0.0.1", host)).await {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return,
            Err(e) => panic!("connect: {e}"),
        };
        let _ = c.write_all(b"GET / HTTP/1.0\r\n\r\n").await;
        let mut buf = Vec::new();
        let read = c.read_to_end(&mut buf).await;
        assert!(
            read.is_err() || buf.is_empty(),
            "no answer without a server: {read:?} {buf:?}"
        );
    }
}
