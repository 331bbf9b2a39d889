//! Scoped-engine refusals in the security log: a request a job's engine
//! socket refused (a privileged child, a bind of `/`, another container)
//! is written like a refused command (same file, same line shape), with
//! `kind` `engine`, the request (`POST /v1.41/containers/create`) as
//! `endpoint`, the field refused (`HostConfig.Privileged`) as `field`, and
//! the job's id as the client (the job itself asked, not whoever started it).

use std::path::Path;

use super::Safety;
use super::log::SecurityRecord;

impl Safety {
    /// Log that job `job` (running `command` in `cwd`) was refused
    /// `endpoint` because of `field`: `reason`.
    pub fn log_engine(
        &self,
        job: &str,
        command: &str,
        cwd: &Path,
        endpoint: &str,
        field: &str,
        reason: &str,
    ) {
        let command = super::shorten(command.to_string());
        self.log.append(&SecurityRecord {
            kind: "engine",
            reason: format!("scoped engine refused {endpoint}: {reason}"),
            pattern: "scoped engine".into(),
            matched: Some(field.to_string()),
            endpoint: Some(endpoint.to_string()),
            field: Some(field.to_string()),
            ..self.entry(&command, cwd, job)
        });
    }
}
