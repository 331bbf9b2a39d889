//! The one foreground-run driver: `berth run` without `-d`, through a
//! daemon (`POST /v1/run`) or in this process (`--no-daemon`). Both read the
//! same frame stream (`daemon/run.rs`: the job's output, then how it ended or
//! that it moved to the background) and end the same way: the output
//! streams live (or, with `--json`, goes into the answer's head and tail),
//! Ctrl+C stops the job, a closed stdout stops it as a shell pipeline would,
//! and the last lines and the exit code are chosen here, once. Only the
//! budget differs: a daemon promotes a job whose budget ran out (exit 75),
//! an in-process manager, with no background to promote to, kills it
//! (exit 124).

use std::future::Future;

use serde_json::json;

use super::out::{StdoutClosed, out, outln};
use super::outcome::{exit_code, oom_line, warn_fallback};
use super::run_args::RunArgs;
use crate::api::client::{Client, FrameReader};
use crate::api::frames as wire;
use crate::card;
use crate::manager::{Foreground, KillRequest, Manager};
use crate::model::{EndedBy, JobId, JobInfo, JobStatus, StopCause};

/// Output kept in `--json` answers, per stream.
pub const JSON_OUTPUT_CAP: usize = 16 * 1024;

/// Exit code of a foreground `berth run` whose job was moved to the background
/// and is still running (EX_TEMPFAIL: "not done yet, look again later"). Never 0,
/// so a CI step cannot mistake a job that is still running for a success.
pub const STILL_RUNNING_EXIT: i32 = 75;

/// The manager a run talks to.
pub enum Backend<'a> {
    Daemon(&'a Client),
    InProcess(&'a Manager),
}

impl Backend<'_> {
    async fn kill(&self, id: &JobId, req: KillRequest) -> crate::Result<()> {
        match self {
            Backend::Daemon(c) => c.kill(id, &req).await.map(drop),
            Backend::InProcess(m) => m.kill(id, req).await.map(drop),
        }
    }

    async fn foreground(&self, id: &JobId) -> crate::Result<Foreground> {
        match self {
            Backend::Daemon(c) => c.foreground(id).await,
            Backend::InProcess(m) => m.await_foreground(id).await,
        }
    }
}

fn stop(cause: StopCause) -> KillRequest {
    KillRequest {
        ended_by: Some(EndedBy::User),
        reason: Some(cause.to_string()),
        ..Default::default()
    }
}

/// Drive foreground job `info` from its `frames` (after the job frame) to
/// its end or its move to the background; `interrupted` completes when the
/// user asks to stop it. The exit code, or `StdoutClosed`.
pub async fn drive(
    backend: Backend<'_>,
    mut frames: FrameReader,
    info: &JobInfo,
    args: &RunArgs,
    interrupted: impl Future<Output = ()>,
) -> anyhow::Result<i32> {
    warn_fallback(info);
    let id = info.id.clone();
    tokio::pin!(interrupted);
    // Set once the job was told to stop: the stream still runs to its end frame.
    let mut stopping = false;
    let mut stdout_closed = false;
    // `--json`: the output goes into the answer, not to the terminal.
    let mut kept = args
        .json
        .then(|| [HeadTail::new(JSON_OUTPUT_CAP), HeadTail::new(JSON_OUTPUT_CAP)]);
    let end = loop {
        let frame = tokio::select! {
            f = frames.next() => f,
            _ = &mut interrupted, if !stopping => {
                stopping = true;
                backend.kill(&id, stop(StopCause::Interrupted)).await?;
                continue;
            }
        };
        match frame {
            Some((wire::STDOUT, bytes)) if !stdout_closed => match &mut kept {
                Some([out, _]) => out.push_text(&bytes),
                None => {
                    if write_all(&mut std::io::stdout().lock(), &job_bytes(&bytes)).is_err() {
                        // Like a shell pipeline (`berth run -- yes | head -1`): the
                        // job is stopped rather than left running unseen.
                        stdout_closed = true;
                        stopping = true;
                        backend.kill(&id, stop(StopCause::StdoutClosed)).await?;
                    }
                }
            },
            Some((wire::STDERR, bytes)) if !stdout_closed => match &mut kept {
                Some([_, err]) => err.push_text(&bytes),
                None => {
                    let _ = write_all(&mut std::io::stderr().lock(), &job_bytes(&bytes));
                }
            },
            Some((wire::END, json)) => break serde_json::from_slice::<wire::RunEnd>(&json)?,
            // Output after stdout closed, or a kind from a newer manager.
            Some(_) => {}
            // The stream broke off (the manager went away mid-run): ask once more.
            None => {
                break wire::RunEnd {
                    outcome: backend.foreground(&id).await?,
                    snippet: String::new(),
                };
            }
        }
    };
    if stdout_closed {
        return Err(StdoutClosed.into());
    }
    report(end, kept, args)
}

/// How the run ended, said: the exit code and last line of a finished job
/// (or, with `--json`, its answer), or the card of one moved to the
/// background and where to look for it.
fn report(end: wire::RunEnd, kept: Option<[HeadTail; 2]>, args: &RunArgs) -> anyhow::Result<i32> {
    match end.outcome {
        Foreground::Finished { info } => {
            let code = exit_code(&info);
            match kept {
                Some([out, err]) => print_json(&info, out, err, code)?,
                None => {
                    if let Some(line) = last_line(&info) {
                        eprintln!("{line}");
                    }
                    // Its files are not in the checkout yet: said last.
                    if let Some(s) = info.writes.as_ref().and_then(|w| w.sentence()) {
                        eprintln!("berth: {}: {s}", info.id);
                    }
                }
            }
            Ok(code)
        }
        Foreground::Promoted { info } => {
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&info)?);
            } else {
                out!("{}", card::render(&info, &end.snippet, super::jobs::color()));
            }
            let id = &info.id;
            eprintln!(
                "berth: {id} {}; it keeps running in the background (exit {STILL_RUNNING_EXIT}). \
                 Wait for it with `berth wait {id}`, follow it with `berth logs {id} --follow`, \
                 stop it with `berth kill {id}`; `--on-timeout kill` kills at the budget instead.",
                info.promotion_reason
                    .clone()
                    .unwrap_or_else(|| "moved to background".into()),
            );
            Ok(STILL_RUNNING_EXIT)
        }
    }
}

/// What a finished run says last on stderr, if anything: its budget ran
/// out, it never started, or the kernel killed it for memory.
fn last_line(info: &JobInfo) -> Option<String> {
    match &info.status {
        JobStatus::TimedOut => Some(format!(
            "berth: {} timed out after {}s and was killed (exit 124)",
            info.id,
            info.spec.timeout.unwrap_or_default()
        )),
        JobStatus::StartFailed { error } => Some(format!(
            "berth: {} failed to start: {}",
            info.id,
            crate::inert::visible(error)
        )),
        _ => oom_line(info),
    }
}

/// Write a frame of output in one call (it holds whole lines).
fn write_all(w: &mut impl std::io::Write, bytes: &[u8]) -> std::io::Result<()> {
    w.write_all(bytes)?;
    w.flush()
}

/// The `--json` answer of a finished run, as the safety seed's ExecResult:
/// a timed-out run has no exit code of its own (`exit_code: null`,
/// `timed_out: true`); berth itself exits 124.
fn print_json(info: &JobInfo, out: HeadTail, err: HeadTail, code: i32) -> anyhow::Result<()> {
    let ((stdout, cut_out), (stderr, cut_err)) = (out.finish(), err.finish());
    let timed_out = matches!(info.status, JobStatus::TimedOut);
    let v = json!({
        "job_id": info.id,
        "status": info.status.name(),
        "exit_code": (!timed_out).then_some(code),
        "timed_out": timed_out,
        "ended_by": info.ended_by,
        "reason": info.reason,
        "stdout": stdout,
        "stderr": stderr,
        "truncated": cut_out + cut_err > 0,
        "truncated_bytes": cut_out + cut_err,
        "log_files": info.logs,
        "runner": info.runner,
        "runner_note": info.runner_note,
        "image": info.image,
        "project_note": info.project_note,
        "writes": info.writes,
    });
    outln!("{}", serde_json::to_string_pretty(&v)?);
    Ok(())
}

/// A frame's lines as the job's bytes (`model/exact.rs`: the lines keep
/// bytes that are not UTF-8 as escapes).
fn job_bytes(payload: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    match std::str::from_utf8(payload) {
        Ok(text) => crate::model::exact::bytes(text),
        Err(_) => std::borrow::Cow::Borrowed(payload),
    }
}

/// Lines joined with newlines, keeping only the first and the last `cap`
/// bytes of the text.
struct HeadTail {
    cap: usize,
    head: String,
    tail: std::collections::VecDeque<String>,
    tail_bytes: usize,
    total: usize,
}

impl HeadTail {
    /// Frames hold whole lines, each ended by `\n`.
    fn push_text(&mut self, bytes: &[u8]) {
        for line in String::from_utf8_lossy(bytes).split_terminator('\n') {
            self.push_line(line);
        }
    }

    fn new(cap: usize) -> Self {
        HeadTail {
            cap,
            head: String::new(),
            tail: Default::default(),
            tail_bytes: 0,
            total: 0,
        }
    }

    fn push_line(&mut self, line: &str) {
        let piece = if self.total == 0 {
            line.to_string()
        } else {
            format!("\n{line}")
        };
        self.total += piece.len();
        if self.head.len() < self.cap {
            self.head.push_str(&piece);
        }
        self.tail_bytes += piece.len();
        self.tail.push_back(piece);
        // Keep the fewest pieces that still hold the last `cap` bytes.
        while self
            .tail
            .front()
            .is_some_and(|f| self.tail_bytes - f.len() >= self.cap)
        {
            self.tail_bytes -= self.tail.pop_front().map_or(0, |p| p.len());
        }
    }

    fn finish(self) -> (String, usize) {
        if self.total <= self.cap {
            return (self.head, 0);
        }
        // The last pieces and where they start in the whole text.
        let tail: String = self.tail.into_iter().collect();
        let tail_at = self.total - tail.len();
        let head = self.head;
        let half = self.cap / 2;
        let mut head_end = half;
        while !head.is_char_boundary(head_end) {
            head_end -= 1;
        }
        let mut tail_start = self.total - half - tail_at;
        while !tail.is_char_boundary(tail_start) {
            tail_start += 1;
        }
        let cut = tail_at + tail_start - head_end;
        (
            format!(
                "{}\n… [{cut} bytes cut; read the rest by seq or from the log files] …\n{}",
                &head[..head_end],
                &tail[tail_start..]
            ),
            cut,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::card::cap_head_tail;

    /// Read line by line, the answer is what capping the whole text gives.
    #[test]
    fn head_and_tail_read_by_line_match_the_whole_text_capped() {
        for (n, width) in [(3, 5), (500, 9), (5000, 1), (2000, 37), (40, 2000)] {
            let lines: Vec<String> = (0..n).map(|i| format!("{i:0>width$}é")).collect();
            let mut ht = HeadTail::new(1024);
            for l in &lines {
                ht.push_line(l);
            }
            assert_eq!(
                ht.finish(),
                cap_head_tail(&lines.join("\n"), 1024),
                "{n} lines of {width}"
            );
        }
    }
}
