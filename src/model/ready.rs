//! What "ready" means for a job ([`ReadyCondition`]): a port that accepts,
//! a log line, an HTTP answer. Checking them is `ready.rs`.

use serde::{Deserialize, Serialize};

/// An HTTP readiness check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpCheck {
    /// Path to GET, e.g. `/` or `/health`.
    pub path: String,
    /// Expected status; by default any 2xx or 3xx.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Which of the job's ports to use; by default its first published port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

/// One condition a job must meet to count as ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadyCondition {
    /// The server accepts TCP connections on this port (the job's own port number).
    Port(u16),
    /// A line of output matches this regex.
    Log(String),
    /// An HTTP response from the job's mapped port.
    Http(HttpCheck),
}

impl ReadyCondition {
    pub fn port(port: u16) -> Self {
        ReadyCondition::Port(port)
    }
    pub fn log(regex: impl Into<String>) -> Self {
        ReadyCondition::Log(regex.into())
    }
    pub fn http(path: impl Into<String>) -> Self {
        ReadyCondition::Http(HttpCheck {
            path: path.into(),
            status: None,
            port: None,
        })
    }
}
