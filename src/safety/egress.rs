//! Egress denials in the security log: a job's request its egress proxy
//! refused is written like a refused command (same file, same line shape),
//! with `kind` `egress`, the request in `matched`, and the job's id as the
//! client (the job itself asked, not whoever started it).

use std::path::Path;

use super::Safety;
use super::log::SecurityRecord;

impl Safety {
    /// Log that job `job` (running `command` in `cwd`) was denied `request`
    /// (`CONNECT evil.example:443`) to `target` (`evil.example:443`) because of `reason`.
    pub fn log_egress(
        &self,
        job: &str,
        command: &str,
        cwd: &Path,
        request: &str,
        target: &str,
        reason: &str,
    ) {
        let command = super::shorten(command.to_string());
        self.log.append(&SecurityRecord {
            kind: "egress",
            reason: format!("egress to {target} denied: {reason}"),
            pattern: "egress_allow".into(),
            matched: Some(request.to_string()),
            ..self.entry(&command, cwd, job)
        });
    }
}
