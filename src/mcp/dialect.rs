//! Which tools an answer names for "read more", "check it" and "stop it":
//! every tool set's answers come from one core, and each set's hints must
//! name its own tools (`shell_log`, `read_process_output`, …).

use crate::model::{JobId, JobInfo};

/// Which tools an answer points to for "read more" and "stop it".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Canonical,
    SafeShell,
    Shell,
    Process,
    Exec,
}

impl Dialect {
    /// The call that reads a job's output from `since`.
    pub fn logs(self, id: &JobId, since: u64) -> String {
        match self {
            Dialect::Canonical => format!(r#"`logs` {{"id":"{id}","since_seq":{since}}}"#),
            Dialect::Shell => format!(r#"`shell_log` {{"shell_id":"{id}","mode":"body","cursor":{since}}}"#),
            Dialect::Process => {
                format!(r#"`read_process_output` {{"process_id":"{id}","since_seq":{since}}}"#)
            }
            Dialect::Exec => format!(
                r#"`shell` {{"action":"log","run_id":"{id}","since_seq":{}}}"#,
                since.saturating_sub(1)
            ),
            Dialect::SafeShell => "the stdout/stderr log files".into(),
        }
    }

    /// The call that reads a job's latest output (its tail).
    pub fn read(self, id: &JobId) -> String {
        match self {
            Dialect::Canonical => format!(r#"`logs` {{"id":"{id}"}}"#),
            Dialect::Shell => format!(r#"`shell_log` {{"shell_id":"{id}"}}"#),
            Dialect::Process => format!(r#"`read_process_output` {{"process_id":"{id}"}}"#),
            Dialect::Exec => format!(r#"`shell` {{"action":"log","run_id":"{id}"}}"#),
            Dialect::SafeShell => "the stdout/stderr log files".into(),
        }
    }

    /// The call that stops a job.
    pub fn kill(self, info: &JobInfo) -> String {
        let id = &info.id;
        match self {
            Dialect::Canonical => format!(r#"`kill` {{"id":"{id}"}}"#),
            Dialect::Shell => format!(r#"`shell_kill` {{"shell_id":"{id}"}}"#),
            Dialect::Process => format!(r#"`stop_process` {{"process_id":"{id}"}}"#),
            Dialect::Exec => format!(r#"`shell` {{"action":"kill","run_id":"{id}"}}"#),
            Dialect::SafeShell => match info.pid {
                Some(pid) => format!(r#"`safe_shell` {{"command":"kill","args":["{pid}"]}}"#),
                None => "`berth kill` from a terminal".into(),
            },
        }
    }

    /// The call that checks on a job.
    pub fn status(self, id: &JobId) -> String {
        match self {
            Dialect::Canonical => format!(r#"`status` {{"id":"{id}"}}"#),
            Dialect::Shell => r#"`shell_summary` {}"#.into(),
            Dialect::Process => r#"`list_processes` {}"#.into(),
            Dialect::Exec => format!(r#"`shell` {{"action":"poll","run_id":"{id}"}}"#),
            Dialect::SafeShell => "the log files".into(),
        }
    }
}
