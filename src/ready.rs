//! Readiness: "wait until this job serves", without sleeps.
//!
//! [`wait`] returns as soon as **all** conditions hold, or early when the job
//! ends or the timeout passes. `log` is event-driven (it rescans from the first
//! line, so lines printed before the wait began count); `port` and `http` are
//! polled every [`POLL_INTERVAL`].
//!
//! Why a connect to a published Docker port is not proof: whoever publishes
//! it (berth's forwarder, or the engine's userland proxy) accepts the
//! connection on the host side even while nothing listens inside the
//! container. So a container `port` condition connects to the container's
//! own address; `http` goes through the published host port (the path a
//! client takes) but needs a real HTTP response, which the forwarder alone
//! cannot give.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::error::{Error, Result};
pub use crate::model::{HttpCheck, ReadyCondition};
use crate::model::{JobStatus, PortMapping};
use crate::output::{JobOutput, LogQuery};
use probe::{http_ok, port_open, relayed_port_open};

mod probe;

/// How often `port` and `http` conditions are retried.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);

impl ReadyCondition {
    pub fn validate(&self) -> Result<()> {
        match self {
            ReadyCondition::Port(0) => Err(Error::InvalidPort {
                input: "0".into(),
                message: "port must be between 1 and 65535".into(),
            }),
            ReadyCondition::Log(re) => regex::Regex::new(re)
                .map(|_| ())
                .map_err(|e| Error::InvalidRegex {
                    pattern: re.clone(),
                    message: e.to_string(),
                }),
            ReadyCondition::Http(h) if !h.path.starts_with('/') => Err(Error::InvalidValue {
                what: "http path",
                input: h.path.clone(),
                message: "must start with `/`".into(),
            }),
            _ => Ok(()),
        }
    }

    fn describe(&self) -> String {
        match self {
            ReadyCondition::Port(p) => format!("port {p}"),
            ReadyCondition::Log(re) => format!("log /{re}/"),
            ReadyCondition::Http(h) => format!("http {}", h.path),
        }
    }
}

/// How a wait ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum WaitOutcome {
    Ready {
        elapsed_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        matched_line: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host_port: Option<u16>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
    },
    /// The job ended before it became ready.
    Exited {
        elapsed_ms: u64,
        status: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    TimedOut {
        elapsed_ms: u64,
        /// Conditions still not met.
        pending: Vec<String>,
    },
}

impl WaitOutcome {
    pub fn is_ready(&self) -> bool {
        matches!(self, WaitOutcome::Ready { .. })
    }
}

/// What [`wait`] needs to know about a job.
pub struct Target {
    pub output: Arc<JobOutput>,
    pub status: watch::Receiver<JobStatus>,
    pub ports: Vec<PortMapping>,
    /// The container's own address (Docker jobs), for `port` conditions.
    pub internal_ip: Option<IpAddr>,
    /// The ports are relayed to a server this machine cannot reach directly
    /// (a remote engine's job): a relay accepts even when nothing listens
    /// inside, so a `port` condition also waits to see the connection stay.
    pub relayed: bool,
    /// A host job: no mapping, its server is probed where it is seen bound
    /// (`net::bound`), e.g. `[::1]` or a LAN address, not only 127.0.0.1.
    pub on_host: bool,
}

impl Target {
    /// Address to probe for "something listens on `port`".
    fn listen_addr(&self, port: u16) -> SocketAddr {
        if let Some(ip) = self.internal_ip {
            return SocketAddr::new(ip, port);
        }
        let host_port = self
            .ports
            .iter()
            .find(|m| m.port == port)
            .map(|m| m.host_port)
            .unwrap_or(port);
        self.host_addr(host_port)
    }

    /// Where the server behind host port `port` is reached.
    fn host_addr(&self, port: u16) -> SocketAddr {
        match self.on_host {
            true => crate::net::bound::probe_addr(port),
            false => SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
        }
    }

    /// The job's own port an HTTP check is aimed at.
    fn http_port(&self, check: &HttpCheck) -> Option<u16> {
        check.port.or_else(|| self.ports.first().map(|m| m.port))
    }

    /// Address to send HTTP to: the mapped host port (or the container address when unpublished).
    fn http_addr(&self, check: &HttpCheck) -> Result<SocketAddr> {
        let mapping = match check.port {
            Some(p) => self.ports.iter().find(|m| m.port == p),
            None => self.ports.first(),
        };
        match (mapping, check.port) {
            (Some(m), _) => Ok(self.host_addr(m.host_port)),
            (None, Some(p)) => Ok(self.listen_addr(p)),
            (None, None) => Err(Error::InvalidSpec(
                "an http readiness check needs a port: publish one (-p 8080) or give the check a port".into(),
            )),
        }
    }
}

struct Pending {
    cond: ReadyCondition,
    done: bool,
}

/// The log conditions' scan of a job's output: how far it was read, which
/// matched (in their order among the conditions), and the last line that
/// matched one.
struct LogScan {
    res: Vec<regex::Regex>,
    cursor: u64,
    done: Vec<bool>,
    matched_line: Option<String>,
}

impl LogScan {
    fn new(conditions: &[ReadyCondition]) -> Self {
        let res: Vec<regex::Regex> = conditions
            .iter()
            .filter_map(|c| match c {
                ReadyCondition::Log(re) => Some(regex::Regex::new(re).expect("validated")),
                _ => None,
            })
            .collect();
        let done = vec![false; res.len()];
        LogScan {
            res,
            cursor: 1,
            done,
            matched_line: None,
        }
    }

    /// Scan everything new since the last look (nothing once all matched).
    fn scan(&mut self, output: &JobOutput) -> Result<()> {
        if self.done.iter().all(|d| *d) {
            return Ok(());
        }
        loop {
            let page = output.read(&LogQuery {
                since: Some(self.cursor),
                limit: Some(4096),
                ..Default::default()
            })?;
            for line in &page.lines {
                for (i, re) in self.res.iter().enumerate() {
                    if !self.done[i] && re.is_match(&line.text) {
                        self.done[i] = true;
                        self.matched_line = Some(line.text.clone());
                    }
                }
            }
            self.cursor = page.next_seq;
            if !page.has_more || self.done.iter().all(|d| *d) {
                return Ok(());
            }
        }
    }
}

/// What a ready answer says was found: the host port, and the URL that
/// answered an HTTP check.
#[derive(Default)]
struct Found {
    host_port: Option<u16>,
    url: Option<String>,
}

/// Wait until every condition holds, the job ends, or `timeout` passes.
pub async fn wait(
    mut target: Target,
    conditions: &[ReadyCondition],
    timeout: Duration,
) -> Result<WaitOutcome> {
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + timeout;
    for c in conditions {
        c.validate()?;
        if let ReadyCondition::Http(h) = c {
            target.http_addr(h)?;
        }
    }
    let mut logs = LogScan::new(conditions);
    let mut pending: Vec<Pending> = conditions
        .iter()
        .map(|c| Pending {
            cond: c.clone(),
            done: false,
        })
        .collect();
    let mut progress = target.output.subscribe();
    let mut found = Found::default();

    loop {
        // Log conditions: scan everything new since the last look.
        logs.scan(&target.output)?;
        let mut log_i = 0;
        for p in pending.iter_mut() {
            // Log conditions are numbered in order, done or not.
            let log_index = matches!(p.cond, ReadyCondition::Log(_)).then(|| {
                log_i += 1;
                log_i - 1
            });
            if p.done {
                continue;
            }
            p.done = match &p.cond {
                ReadyCondition::Log(_) => logs.done[log_index.expect("log condition")],
                cond => holds(&target, cond, &mut found).await?,
            };
        }
        if pending.iter().all(|p| p.done) {
            return Ok(WaitOutcome::Ready {
                elapsed_ms: started.elapsed().as_millis() as u64,
                matched_line: logs.matched_line,
                host_port: found.host_port,
                url: found.url,
            });
        }
        let status = target.status.borrow().clone();
        if status.is_terminal() && target.output.progress().closed {
            return Ok(WaitOutcome::Exited {
                elapsed_ms: started.elapsed().as_millis() as u64,
                status: status.name().into(),
                exit_code: status.exit_code(),
                reason: status.reason(),
            });
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(WaitOutcome::TimedOut {
                elapsed_ms: started.elapsed().as_millis() as u64,
                pending: pending
                    .iter()
                    .filter(|p| !p.done)
                    .map(|p| p.cond.describe())
                    .collect(),
            });
        }
        let polling = pending
            .iter()
            .any(|p| !p.done && !matches!(p.cond, ReadyCondition::Log(_)));
        let nap = if polling { POLL_INTERVAL } else { timeout };
        tokio::select! {
            _ = progress.changed() => {}
            _ = target.status.changed() => {}
            _ = tokio::time::sleep(nap) => {}
            _ = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// Whether a port or HTTP condition holds now (probed once); what it found
/// goes in `found`. Log conditions are the scan's.
async fn holds(target: &Target, cond: &ReadyCondition, found: &mut Found) -> Result<bool> {
    Ok(match cond {
        ReadyCondition::Log(_) => false,
        ReadyCondition::Port(port) => {
            let addr = target.listen_addr(*port);
            let ok = match target.relayed {
                true => relayed_port_open(addr).await,
                false => port_open(addr).await,
            };
            if ok {
                found.host_port = found
                    .host_port
                    .or_else(|| target.ports.iter().find(|m| m.port == *port).map(|m| m.host_port));
            }
            ok
        }
        ReadyCondition::Http(check) => {
            let addr = target.http_addr(check)?;
            // A container's server is probed at its own address first: the
            // engine's proxy would hold a request while nothing listens inside.
            let inside = match (target.internal_ip, target.http_port(check)) {
                (Some(_), Some(p)) => port_open(target.listen_addr(p)).await,
                _ => true,
            };
            let ok = inside && http_ok(addr, check).await;
            if ok {
                found.host_port = Some(addr.port());
                found.url = Some(format!("http://{addr}{}", check.path));
            }
            ok
        }
    })
}

/// Wait until something accepts TCP connections at `host:port`.
pub async fn wait_for_port(host: &str, port: u16, timeout: Duration) -> Result<WaitOutcome> {
    let started = Instant::now();
    let deadline = Instant::now() + timeout;
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| Error::InvalidValue {
            what: "host",
            input: host.into(),
            message: e.to_string(),
        })?
        .collect();
    loop {
        for addr in &addrs {
            if port_open(*addr).await {
                return Ok(WaitOutcome::Ready {
                    elapsed_ms: started.elapsed().as_millis() as u64,
                    matched_line: None,
                    host_port: Some(port),
                    url: None,
                });
            }
        }
        if Instant::now() >= deadline {
            return Ok(WaitOutcome::TimedOut {
                elapsed_ms: started.elapsed().as_millis() as u64,
                pending: vec![format!("port {host}:{port}")],
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wait_for_port_sees_a_listener_and_times_out_without_one() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let out = wait_for_port("127.0.0.1", port, Duration::from_secs(2))
            .await
            .unwrap();
        assert!(out.is_ready(), "{out:?}");
        drop(listener);
        let out = wait_for_port("127.0.0.1", port, Duration::from_millis(100))
            .await
            .unwrap();
        assert!(matches!(out, WaitOutcome::TimedOut { .. }), "{out:?}");
    }

    #[test]
    fn conditions_serialize_compactly() {
        let c = vec![
            ReadyCondition::port(3000),
            ReadyCondition::log("ready"),
            ReadyCondition::http("/"),
        ];
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(
            json,
            serde_json::json!([{"port":3000},{"log":"ready"},{"http":{"path":"/"}}])
        );
        assert!(ReadyCondition::log("(").validate().is_err());
        assert!(ReadyCondition::http("x").validate().is_err());
    }
}
