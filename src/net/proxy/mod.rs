//! berth's egress proxy (`egress = "proxy"`): a job's only way out of its
//! internal network. One proxy per job, on its network's gateway address
//! (which the job reaches; nothing beyond it), owned by the job and closed
//! when it ends. It serves `CONNECT host:port` (HTTPS and other TLS) and
//! absolute `http://` requests, to the hosts of the job's allowlist
//! (`allow.rs`), never to this machine or its containers (`dest.rs`).
//!
//! Every denial is reported through the job's [`DenialFn`] (the manager
//! writes it to the security log and emits an event the agent sees) and
//! answered `403` with one line saying what was denied and why, so the
//! job's own output (pip's, curl's) says it too.
//!
//! Bounds: a request head of at most [`head::MAX_HEAD`] bytes read within
//! [`HEAD_TIMEOUT`]; at most [`MAX_CONNECTIONS`] connections per job (more
//! are answered `503`); a name resolved within [`RESOLVE_TIMEOUT`]; a tunnel
//! closed after [`IDLE`] without a byte either way. Only the job's own
//! network may use the proxy: a connection from any other address (this
//! machine's own processes come from the gateway address itself) is closed
//! unanswered.

pub mod dest;
pub mod head;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Allowlist;
use crate::error::{Error, Result};
use head::{Refusal, Target};

/// Most connections one job's proxy serves at once.
pub const MAX_CONNECTIONS: usize = 64;
/// Longest a client may take to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// A tunnel or request with no byte either way for this long is closed.
pub const IDLE: Duration = Duration::from_secs(120);
/// Longest a name may take to resolve.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a connect to the server may take (per address tried).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest writing a refusal may take.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// A request the proxy refused by policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// `CONNECT`, `GET` …
    pub method: String,
    pub host: String,
    pub port: u16,
    pub reason: String,
}

impl Denial {
    /// `CONNECT evil.example:443`.
    pub fn request(&self) -> String {
        format!("{} {}:{}", self.method, self.host, self.port)
    }
}

/// Told of every denial (the manager: security log and an event).
pub type DenialFn = Arc<dyn Fn(Denial) + Send + Sync>;

/// What one job's proxy allows and whom it tells.
#[derive(Clone)]
pub struct Policy {
    pub allow: Allowlist,
    /// Addresses never connected to besides those of `dest.rs` (the
    /// engine's TCP endpoint, when it has one).
    pub deny: Vec<SocketAddr>,
    pub on_denial: DenialFn,
}

/// A job's running proxy.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    token: CancellationToken,
    tracker: TaskTracker,
}

impl Proxy {
    /// Listen on `at` (the job network's gateway; port 0 = any) for clients
    /// in the subnet `clients` (address, prefix length), on berth's network
    /// runtime.
    pub fn start(at: SocketAddr, clients: (IpAddr, u8), policy: Policy, job: &str) -> Result<Proxy> {
        let rt = super::runtime()?;
        let _in = rt.enter();
        let fail = |source| Error::Listen {
            what: format!("the egress proxy of {job}"),
            addr: at,
            source,
        };
        let listener = std::net::TcpListener::bind(at).map_err(fail)?;
        let addr = listener.local_addr().map_err(fail)?;
        listener.set_nonblocking(true).map_err(fail)?;
        let listener = TcpListener::from_std(listener).map_err(fail)?;
        let token = CancellationToken::new();
        let tracker = TaskTracker::new();
        tracker.spawn_on(
            accept_loop(
                listener,
                clients,
                Arc::new(policy),
                token.clone(),
                tracker.clone(),
            ),
            rt,
        );
        tracker.close();
        Ok(Proxy { addr, token, tracker })
    }

    /// Where the job finds it.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR:PORT`, what `HTTP_PROXY` says.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stop listening and close every connection (the job ended).
    pub fn close(&self) {
        self.token.cancel();
    }

    /// Resolves once every connection is closed.
    pub async fn closed(&self) {
        self.tracker.wait().await;
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

async fn accept_loop(
    listener: TcpListener,
    clients: (IpAddr, u8),
    policy: Arc<Policy>,
    token: CancellationToken,
    tracker: TaskTracker,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            _ = token.cancelled() => return,
            a = listener.accept() => a,
        };
        let (client, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!(error = %e, "egress proxy accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let (net, prefix) = clients;
        // This machine's own processes connect from the gateway address
        // itself: they are not the job.
        let own = listener.local_addr().is_ok_and(|a| a.ip() == peer.ip());
        if own || dest::network(peer.ip(), prefix) != net || peer.is_ipv4() != net.is_ipv4() {
            tracing::debug!(%peer, "egress proxy: a connection from outside the job's network, closed");
            continue;
        }
        let token = token.clone();
        let policy = policy.clone();
        match slots.clone().try_acquire_owned() {
            Ok(permit) => {
                tracker.spawn(async move {
                    let _permit = permit;
                    tokio::select! {
                        _ = token.cancelled() => {}
                        _ = serve(client, &policy) => {}
                    }
                });
            }
            Err(_) => {
                tracker.spawn(answer(
                    client,
                    Refusal(
                        503,
                        format!("more than {MAX_CONNECTIONS} connections through the egress proxy at once"),
                    ),
                ));
            }
        }
    }
}

/// One client connection: its request, checked, then relayed.
async fn serve(mut client: TcpStream, policy: &Policy) {
    let head = match tokio::time::timeout(HEAD_TIMEOUT, head::read(&mut client)).await {
        Ok(Ok(h)) => h,
        Ok(Err(refusal)) => return answer(client, refusal).await,
        Err(_) => {
            let words = format!("no whole request head within {} s", HEAD_TIMEOUT.as_secs());
            return answer(client, Refusal(408, words)).await;
        }
    };
    let (host, port) = (head.target.host().to_string(), head.target.port());
    let deny = |reason: String| {
        let d = Denial {
            method: head.method.clone(),
            host: host.clone(),
            port,
            reason,
        };
        (policy.on_denial)(d.clone());
        Refusal(
            403,
            format!(
                "egress to {host}:{port} denied: {}; the hosts a job may reach are egress_allow in berth.toml",
                d.reason
            ),
        )
    };
    if !policy.allow.allows(&host, port) {
        return answer(client, deny("not in egress_allow".into())).await;
    }
    let bare = host.trim_start_matches('[').trim_end_matches(']').to_string();
    let resolved =
        tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((bare.as_str(), port))).await;
    let addrs: Vec<SocketAddr> = match resolved {
        Ok(Ok(a)) => a.collect(),
        Ok(Err(e)) => return answer(client, Refusal(502, format!("could not resolve {host}: {e}"))).await,
        Err(_) => return answer(client, Refusal(504, format!("{host} did not resolve in time"))).await,
    };
    let local = tokio::task::spawn_blocking(dest::Local::now)
        .await
        .unwrap_or_default();
    let mut refused = None;
    let usable: Vec<SocketAddr> = addrs
        .into_iter()
        .filter(|a| match local.refuses(a.ip()) {
            Some(why) => {
                refused.get_or_insert(format!("it resolves to {} ({why})", a.ip()));
                false
            }
            None if policy.deny.contains(a) => {
                refused.get_or_insert(format!("it resolves to {a} (the engine's endpoint)"));
                false
            }
            None => true,
        })
        .collect();
    if usable.is_empty() {
        let refusal = match refused {
            Some(why) => deny(why),
            None => Refusal(502, format!("{host} has no address")),
        };
        return answer(client, refusal).await;
    }
    let mut server = match connect_any(&usable).await {
        Ok(s) => s,
        Err(e) => {
            return answer(
                client,
                Refusal(502, format!("could not connect to {host}:{port}: {e}")),
            )
            .await;
        }
    };
    let opened = match &head.target {
        Target::Connect { .. } => client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .is_ok(),
        Target::Http { head: out, .. } => server.write_all(out).await.is_ok(),
    };
    if !opened || (!head.rest.is_empty() && server.write_all(&head.rest).await.is_err()) {
        return;
    }
    if let Err(e) = super::relay::relay_until_idle(&client, &server, IDLE).await {
        tracing::debug!(%host, port, error = %e, "egress proxy relay ended");
    }
}

async fn connect_any(addrs: &[SocketAddr]) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::from(std::io::ErrorKind::NotFound);
    for a in addrs {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(a)).await {
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(e)) => last = e,
            Err(_) => last = std::io::ErrorKind::TimedOut.into(),
        }
    }
    Err(last)
}

/// Answer `refusal` and close.
async fn answer(mut client: TcpStream, Refusal(status, words): Refusal) {
    let reason = match status {
        403 => "Forbidden",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Bad Request",
    };
    let body = format!("berth: {words}\n");
    let text = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(ANSWER_TIMEOUT, async {
        let _ = client.write_all(text.as_bytes()).await;
        let _ = client.shutdown().await;
    })
    .await;
}

#[cfg(test)]
mod tests;
