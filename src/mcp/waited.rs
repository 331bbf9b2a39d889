//! A wait's outcome in words for a model: ready (after how long, which
//! check answered, the line that matched), ended first (how), or not in time
//! (what is still pending). Shared by the answers for a start and for `wait`.

use super::format;
use crate::model::JobInfo;
use crate::ready::WaitOutcome;

/// A wait outcome in words, and whether it is a success.
pub fn wait_words(info: &JobInfo, w: &WaitOutcome) -> (String, bool) {
    let id = &info.id;
    match w {
        WaitOutcome::Ready {
            elapsed_ms,
            matched_line,
            url,
            ..
        } => {
            let mut s = format!(
                "{id} is ready after {}",
                format::elapsed(*elapsed_ms as f64 / 1000.0)
            );
            if let Some(u) = url {
                // The port's URL is on its own line: the path says which check.
                let path = u
                    .strip_prefix("http://")
                    .and_then(|rest| rest.find('/').map(|at| &rest[at..]))
                    .unwrap_or(u);
                s += &format!(" (GET {path} answered)");
            }
            if let Some(l) = matched_line {
                s += &format!("; matched line: {}", format::short(l, 200));
            }
            (s + ".\n", true)
        }
        WaitOutcome::Exited {
            status,
            exit_code,
            reason,
            ..
        } => (
            format!(
                "{id} did not become ready: it ended first: {}.\n",
                format::end_words(status, info.ended_by, *exit_code, reason.as_deref())
            ),
            false,
        ),
        WaitOutcome::TimedOut { elapsed_ms, pending } => (
            format!(
                "{id} did not become ready within {}; still waiting for: {}. It is {}.\n",
                format::elapsed(*elapsed_ms as f64 / 1000.0),
                pending.join(", "),
                info.status.name()
            ),
            false,
        ),
    }
}
