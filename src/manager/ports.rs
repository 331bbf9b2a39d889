//! `wait_for_port` on a `host:port` that may be one of our own jobs.
//!
//! Why: a connect to a container's published port is not proof that its
//! server listens. berth's forwarder (or the engine's proxy) accepts on the
//! host side at once, while nothing may be bound inside yet. So when `host` is this machine and `port`
//! is the published port of an active job, the wait becomes that job's own
//! `port` readiness condition (which probes the container's address, and
//! ends early when the job exits); any other address gets a plain connect
//! check.

use std::net::IpAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Manager;
use crate::error::{Error, Result};
use crate::model::JobId;
use crate::ready::{self, ReadyCondition, WaitOutcome};

/// How a `wait_for_port` went, and which job owns the port, if one does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortWait {
    #[serde(flatten)]
    pub outcome: WaitOutcome,
    /// The job whose published port this is (its server was checked inside).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobId>,
    /// That job's own port number (the container port).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_port: Option<u16>,
}

impl Manager {
    /// The active job that publishes host port `port`, and its own port.
    pub fn job_for_host_port(&self, port: u16) -> Option<(JobId, u16)> {
        let reg = self.inner.registry.lock().unwrap();
        reg.jobs
            .values()
            .filter(|e| e.info.status.is_active())
            .find_map(|e| {
                e.info
                    .ports
                    .iter()
                    .find(|m| m.host_port == port)
                    .map(|m| (e.info.id.clone(), m.port))
            })
    }

    /// Wait until `host:port` serves. A berth job's published port on this
    /// machine is checked at the job's server itself.
    pub async fn wait_for_port(&self, host: &str, port: u16, timeout: Duration) -> Result<PortWait> {
        if is_this_machine(host).await?
            && let Some((job, job_port)) = self.job_for_host_port(port)
        {
            let outcome = self
                .wait(&job, &[ReadyCondition::Port(job_port)], timeout)
                .await?;
            return Ok(PortWait {
                outcome,
                job: Some(job),
                job_port: Some(job_port),
            });
        }
        Ok(PortWait {
            outcome: ready::wait_for_port(host, port, timeout).await?,
            job: None,
            job_port: None,
        })
    }
}

/// Whether `host` names this machine (loopback or the unspecified address),
/// where published ports are bound.
async fn is_this_machine(host: &str) -> Result<bool> {
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(true);
    }
    if let Ok(ip) = host.trim_matches(|c| c == '[' || c == ']').parse::<IpAddr>() {
        return Ok(ip.is_loopback() || ip.is_unspecified());
    }
    let mut addrs = tokio::net::lookup_host((host, 0))
        .await
        .map_err(|e| Error::InvalidValue {
            what: "host",
            input: host.into(),
            message: e.to_string(),
        })?;
    Ok(addrs.any(|a| a.ip().is_loopback()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn loopback_names_are_this_machine() {
        for h in ["127.0.0.1", "localhost", "::1", "[::1]", "0.0.0.0"] {
            assert!(is_this_machine(h).await.unwrap(), "{h}");
        }
        assert!(!is_this_machine("192.0.2.1").await.unwrap());
    }

    #[test]
    fn a_port_wait_serializes_flat_with_its_job() {
        let w = PortWait {
            outcome: WaitOutcome::Ready {
                elapsed_ms: 5,
                matched_line: None,
                host_port: Some(4000),
                url: None,
            },
            job: Some(JobId::from("job-2")),
            job_port: Some(8080),
        };
        let v = serde_json::to_value(&w).unwrap();
        assert_eq!(v["outcome"], "ready");
        assert_eq!(v["job"], "job-2");
        let back: PortWait = serde_json::from_value(v).unwrap();
        assert_eq!(back, w);
    }
}
