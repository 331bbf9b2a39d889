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

/// Readiness as every face asks for it (`--ready-port`/`--port`,
/// `--ready-log`/`--log`, `--ready-http`/`--http`, `--status`; the MCP
/// tools' `ready {port, log, http, status}`), turned into conditions in this
/// one place so that the faces cannot drift: a `status` alone means an HTTP
/// check of `/`, and an HTTP check is aimed at the asked port when one is
/// given (else at the job's first published port).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadyAsk {
    pub port: Option<u16>,
    pub log: Option<String>,
    pub http: Option<String>,
    pub status: Option<u16>,
}

impl ReadyAsk {
    pub fn conditions(&self) -> Vec<ReadyCondition> {
        let mut c = Vec::new();
        if let Some(p) = self.port {
            c.push(ReadyCondition::Port(p));
        }
        if let Some(re) = &self.log {
            c.push(ReadyCondition::Log(re.clone()));
        }
        if self.http.is_some() || self.status.is_some() {
            c.push(ReadyCondition::Http(HttpCheck {
                path: self.http.clone().unwrap_or_else(|| "/".into()),
                status: self.status,
                port: self.port,
            }));
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_face_gets_the_same_conditions() {
        let ask = ReadyAsk {
            port: Some(8080),
            http: Some("/health".into()),
            ..Default::default()
        };
        assert_eq!(
            ask.conditions(),
            [
                ReadyCondition::Port(8080),
                ReadyCondition::Http(HttpCheck {
                    path: "/health".into(),
                    status: None,
                    port: Some(8080)
                })
            ]
        );
        let status_only = ReadyAsk {
            status: Some(204),
            ..Default::default()
        };
        assert_eq!(
            status_only.conditions(),
            [ReadyCondition::Http(HttpCheck {
                path: "/".into(),
                status: Some(204),
                port: None
            })]
        );
        assert!(ReadyAsk::default().conditions().is_empty());
    }
}
