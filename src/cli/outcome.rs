//! How a finished job comes back to the shell: the CLI's exit code, and the
//! one-line notes printed beside it (out of memory, ran on the host instead
//! of a container, project settings the running manager did not apply).
//! Used by the one foreground driver (`foreground.rs`) and `run -d`.

use crate::model::{JobInfo, JobStatus, StopCause};

/// One line for a job the kernel killed at its memory limit: which limit,
/// and how to raise it.
pub(super) fn oom_line(info: &JobInfo) -> Option<String> {
    match &info.status {
        JobStatus::Killed {
            reason: StopCause::Oom,
            ..
        } => {
            let limit = info
                .limits
                .memory
                .map(|m| format!(" ({} MiB)", m >> 20))
                .unwrap_or_default();
            Some(format!(
                "berth: {} hit its memory limit{limit} and was killed (exit 137); raise it with --memory 4g, or memory = \"4g\" in berth.toml",
                info.id
            ))
        }
        _ => None,
    }
}

/// Say on stderr that `auto` ran the job on the host because no engine answered.
pub(super) fn warn_fallback(info: &JobInfo) {
    if let Some(note) = &info.runner_note {
        eprintln!("berth: warning: {}: {note}", info.id);
    }
    if let Some(note) = &info.project_note {
        eprintln!("berth: note: {}: {note}", info.id);
    }
}

/// The CLI's exit code for a finished job.
pub(super) fn exit_code(info: &JobInfo) -> i32 {
    match &info.status {
        JobStatus::Killed {
            reason: StopCause::KeepAliveExpired { .. },
            ..
        } => 0,
        JobStatus::Killed {
            reason: StopCause::Interrupted,
            ..
        } => 130,
        s => s.exit_code().unwrap_or(1),
    }
}

/// How a wait saw a job end, in words: `failed (code 3): reason`.
pub(super) fn ended_words(status: &str, exit_code: Option<i32>, reason: Option<&str>) -> String {
    let code = exit_code.map(|c| format!(" (code {c})")).unwrap_or_default();
    let why = reason.map(|r| format!(": {r}")).unwrap_or_default();
    format!("{status}{code}{why}")
}
