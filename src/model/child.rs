//! A container job's engine access ([`EngineAccess`]) and the containers it
//! starts through its scoped engine ([`ChildInfo`]): plain data for the
//! record, the card, `ps` and the API. The scoped engine itself (the socket,
//! the filtering proxy) lives in `runner/docker/scoped/`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a child is in its life, as berth last saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildState {
    Created,
    Running,
    Exited,
    /// Removed (by the job, or by berth when the job ended).
    Removed,
}

impl ChildState {
    pub fn as_str(self) -> &'static str {
        match self {
            ChildState::Created => "created",
            ChildState::Running => "running",
            ChildState::Exited => "exited",
            ChildState::Removed => "removed",
        }
    }
}

impl fmt::Display for ChildState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The output of one child (`GET /v1/jobs/{id}/children/{name}/logs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildLogs {
    pub job: super::JobId,
    pub child: String,
    pub lines: Vec<String>,
}

/// A port of a child, as the job reaches it: berth's listener on the job
/// network's gateway (`host_ip:host_port`), relaying to the child's `port`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildPort {
    pub port: u16,
    pub host_ip: String,
    pub host_port: u16,
}

/// One container a job started through its scoped engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildInfo {
    /// The name the job gave it, else `<image>-<n>`; `berth logs JOB --child NAME`.
    pub name: String,
    /// The engine's id, shortened (12 hex digits).
    pub id: String,
    pub image: String,
    pub state: ChildState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ChildPort>,
}

impl ChildInfo {
    /// `sandbox-1 running berth/sandbox:latest 172.30.0.1:41234→80`.
    pub fn summary(&self) -> String {
        let mut s = format!("{} {}", self.name, self.state);
        if let (ChildState::Exited, Some(code)) = (self.state, self.exit_code) {
            s += &format!(" ({code})");
        }
        s += &format!(" {}", self.image);
        for p in &self.ports {
            s += &format!(" {}:{}→{}", p.host_ip, p.host_port, p.port);
        }
        s
    }
}
