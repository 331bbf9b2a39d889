//! How the core answers for a job it started: finished in the foreground
//! (exit and capped output), promoted to the background by its budget (card
//! and at most 120 lines, said once), or started in the background (id,
//! runner, URLs, log files, readiness: a few lines, the command not echoed).

use super::core::{Answer, Core};
use super::format::{self, Dialect};
use super::waited::wait_words;
use crate::error::Result;
use crate::model::{JobInfo, JobStatus};
use crate::ready::WaitOutcome;

/// Most bytes of output in a promotion answer: with the card and the
/// hints it stays under [`format::MAX_BYTES`].
pub const PROMOTED_OUTPUT_BYTES: usize = 12 * 1024;
impl Core {
    pub async fn finished(&self, info: &JobInfo, d: Dialect) -> Result<Answer> {
        let mut text = format!(
            "{} {} after {} · `{}`\n",
            info.id,
            info.end_words(),
            format::duration(info),
            format::short(&info.command, 120)
        );
        text += &format::image_line(info);
        if let Some(s) = info.writes.as_ref().and_then(|w| w.sentence_for(true)) {
            text += &format!("{s}\n");
        }
        text += &format!("Output ({} lines):\n", info.last_seq);
        text += &format::output_block(&self.manager, &info.id, d).await?;
        Ok(Answer {
            is_error: info.status.is_failure(),
            text,
        })
    }

    /// A foreground job that outran its budget: one line saying so, its
    /// card (without "Last log": the output follows) and its output so far,
    /// at most the shell seed's 120 lines within [`PROMOTED_OUTPUT_BYTES`].
    pub async fn promoted(&self, info: &JobInfo, d: Dialect) -> Result<Answer> {
        let reason = info
            .promotion_reason
            .clone()
            .unwrap_or_else(|| "moved to background".into());
        let mut text = format!(
            "{} is still running and goes on in the background: {reason}.\n",
            info.id
        );
        if let Some(note) = self.cap_note() {
            text += &note;
        }
        text += &format::card_head(info);
        text += &format::port_lines(info);
        text += &format!("Output so far ({} lines):\n", info.last_seq);
        text += &format::output_within(&self.manager, &info.id, d, PROMOTED_OUTPUT_BYTES).await?;
        text += &format!(
            "Next: read on with {}, check it with {}, stop it with {}.\n",
            d.logs(&info.id, info.last_seq + 1),
            d.status(&info.id),
            d.kill(info)
        );
        Ok(Answer::ok(text))
    }

    /// A background job just started (or resumed): what the agent needs to
    /// use it, in a few lines (the command is the agent's own: not echoed).
    pub async fn background(
        &self,
        info: &JobInfo,
        waited: Option<&WaitOutcome>,
        d: Dialect,
    ) -> Result<Answer> {
        let runner = info.runner.map(|r| r.to_string()).unwrap_or_else(|| "-".into());
        let mut is_error = false;
        let mut text = match (&info.status, waited) {
            (JobStatus::Queued, w) => {
                let mut t = format!(
                    "{} is queued: the background cap ({}) is full; it starts when a slot frees.\n",
                    info.id,
                    self.manager.config().max_jobs
                );
                if let Some(w) = w {
                    let (line, ok) = wait_words(info, w);
                    is_error = !ok;
                    t += &line;
                }
                t
            }
            (s, Some(w @ WaitOutcome::Ready { .. })) if s.is_active() => {
                let (line, _) = wait_words(info, w);
                line.replacen(
                    &format!("{} is", info.id),
                    &format!("{} ({runner}) is", info.id),
                    1,
                )
            }
            (s, None) if s.is_active() => {
                format!("{} started in the background ({runner}).\n", info.id)
            }
            (s, Some(w)) if s.is_active() => {
                let (line, _) = wait_words(info, w);
                is_error = true;
                format!("{} started in the background ({runner}).\n{line}", info.id)
            }
            (_, w) => {
                let mut t = format!(
                    "{} already ended: {} · `{}`\n",
                    info.id,
                    info.end_words(),
                    format::short(&info.command, 120)
                );
                if let Some(w) = w {
                    let (line, ok) = wait_words(info, w);
                    is_error = !ok;
                    t += &line;
                }
                t
            }
        };
        text += &format::port_lines(info);
        text += &format::image_line(info);
        text += &format::writes_line(info);
        text += &format::log_paths(info);
        text += &format!("Next: {} · {}\n", d.read(&info.id), d.kill(info));
        if is_error || !info.status.is_active() {
            text += &format::card(info, &self.manager.read_snippet(&info.id).await?);
        }
        Ok(Answer { text, is_error })
    }
}
