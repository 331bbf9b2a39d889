//! `berth run`: build a [`JobSpec`] from flags and run it in the foreground.
//!
//! Without a daemon there is no background to promote to, so this runs its
//! own in-process manager: output is streamed live, `--timeout` kills the
//! process group (exit 124, partial output kept), `--keep-alive` runs, feeds
//! the input, waits, kills and exits 0, and Ctrl+C (or SIGTERM, SIGHUP)
//! stops the job (exit 130).

use std::io::Write;
use std::sync::Arc;

use futures_util::StreamExt;
use serde_json::json;

use super::Global;
use super::out::{StdoutClosed, outln};
pub use super::run_args::RunArgs;
use super::verdict::{exit_code, oom_line, warn_fallback};
use crate::api::client::Client;
use crate::error::Error;
use crate::manager::{DefaultBudget, KillRequest, Manager};
use crate::model::{EndedBy, JobInfo, JobStatus, OnTimeout, StopCause};
use crate::output::{FollowPage, JobOutput, LogQuery, Stream};

/// Output kept in `--json` answers, per stream.
pub const JSON_OUTPUT_CAP: usize = 16 * 1024;

pub async fn run(global: &Global, args: RunArgs) -> anyhow::Result<i32> {
    let config = global.config()?;
    let mut spec = args.spec(&config)?;
    if !args.no_daemon {
        // No health check first: the create request itself tells whether a
        // daemon answers (one round trip fewer on every run).
        let client = Client::new(&config);
        match super::remote::run(&client, &args, spec.clone()).await? {
            Some(code) => return Ok(code),
            None if args.detach => {
                // No manager will see this spec: bad input is still named
                // as such rather than as a missing daemon.
                spec.validate()?;
                return Err(Error::NoDaemon {
                    instance: config.instance.clone(),
                    socket: client.socket().to_path_buf(),
                }
                .into());
            }
            None => {}
        }
    }
    // One manager per instance: an in-process one takes the instance's
    // claim like a daemon, so two never share the store (their event seqs
    // would collide) or each have a cap of their own.
    let _claim = match crate::claim::Claim::take(&config) {
        Ok(claim) => claim,
        Err(Error::DaemonRunning { pid, .. }) if args.no_daemon => {
            // A daemon serves the instance: the run goes through it.
            eprintln!(
                "berth: a daemon serves instance `{}` (pid {pid}): this run goes through it (one cap, one record); --no-daemon runs in-process only when none does",
                config.instance
            );
            let client = Client::new(&config);
            if let Some(code) = super::remote::run(&client, &args, spec.clone()).await? {
                return Ok(code);
            }
            return Err(Error::InstanceBusy {
                instance: config.instance.clone(),
                pid,
            }
            .into());
        }
        Err(Error::DaemonRunning { pid, .. }) => {
            return Err(Error::InstanceBusy {
                instance: config.instance.clone(),
                pid,
            }
            .into());
        }
        Err(e) => return Err(e.into()),
    };
    // No manager to promote to: a budget that runs out kills, and there is
    // none unless `--timeout` gives one.
    spec.background = false;
    spec.on_timeout = OnTimeout::Kill;
    let manager = Manager::new(config)?;
    let pulls = (!args.json).then(|| super::progress::follow_local(&manager));
    // Before the start: a ^C, SIGTERM or SIGHUP from here on stops the job.
    let interrupted = crate::teardown::signals();
    tokio::pin!(interrupted);
    let handle = manager.start_with(spec, "cli", DefaultBudget::Unlimited).await;
    if let Some((task, printer)) = pulls {
        if handle.is_ok() {
            // It ends at the job's `started` event, after the last progress line.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), task).await;
        } else {
            task.abort();
            let _ = task.await;
        }
        // A failed pull or build leaves its line open: the error goes below it.
        printer.close();
    }
    let handle = handle?;
    warn_fallback(&handle.info()?);
    let output = manager.output(&handle.id)?;
    // The follower ends early when stdout is closed (`berth run -- yes | head -1`);
    // like a shell pipeline, the job is then stopped instead of running on unseen.
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
    let follower = (!args.json).then(|| {
        let output = output.clone();
        tokio::spawn(async move {
            if follow(output).await.is_err() {
                let _ = closed_tx.send(());
            }
        })
    });
    let stop = |cause: StopCause| KillRequest {
        ended_by: Some(EndedBy::User),
        reason: Some(cause.to_string()),
        ..Default::default()
    };
    let info = tokio::select! {
        info = handle.wait_end() => info?,
        // SIGTERM (a CI step's timeout) and SIGHUP (a closed terminal) too:
        // this process is the job's manager, and must not die leaving it.
        _ = &mut interrupted => {
            manager.kill(&handle.id, stop(StopCause::Interrupted)).await?;
            handle.wait_end().await?
        }
        Ok(()) = closed_rx => {
            manager.kill(&handle.id, stop(StopCause::StdoutClosed)).await?;
            handle.wait_end().await?;
            manager.shutdown().await;
            return Err(StdoutClosed.into());
        }
    };
    if let Some(f) = follower {
        let _ = f.await;
    }
    // Every line and the final record reach the store before this process exits.
    manager.shutdown().await;
    let code = exit_code(&info);
    if args.json {
        print_json(&info, &output, code)?;
    } else if let JobStatus::TimedOut = info.status {
        eprintln!(
            "berth: {} timed out after {}s; its process group was killed (exit 124)",
            info.id,
            info.spec.timeout.unwrap_or_default()
        );
    } else if let JobStatus::StartFailed { error } = &info.status {
        eprintln!(
            "berth: {} failed to start: {}",
            info.id,
            crate::inert::visible(error)
        );
    } else if let Some(line) = oom_line(&info) {
        eprintln!("{line}");
    }
    Ok(code)
}

/// Print lines to stdout/stderr as they arrive, until all output is in or
/// stdout is closed.
async fn follow(output: Arc<JobOutput>) -> Result<(), StdoutClosed> {
    let page = FollowPage {
        lines: 10_000,
        bytes: 256 * 1024,
        stream: None,
    };
    let batches = output.follow(1, page);
    tokio::pin!(batches);
    // A run of one stream is one write: lines are copied into a buffer, not
    // written one by one.
    let mut text = Vec::with_capacity(64 * 1024);
    // An unreadable store ends the follow; the run's outcome still counts.
    while let Some(Ok(batch)) = batches.next().await {
        batch.runs(&mut text, |stream, text| match stream {
            Stream::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(text)
                    .and_then(|_| out.flush())
                    .map_err(|_| StdoutClosed)
            }
            // Keep the two streams in seq order on a shared terminal.
            Stream::Stderr => {
                let _ = std::io::stderr().lock().write_all(text);
                Ok(())
            }
        })?;
    }
    Ok(())
}

/// One stream's text for the JSON answer, at most `cap` bytes (its head
/// and its tail, with how many bytes were cut between: what
/// [`crate::card::cap_head_tail`] makes of the whole text), read page by page: only
/// about `2 * cap` of it is ever held, however much the job printed.
fn collect(output: &JobOutput, stream: Stream, cap: usize) -> (String, usize) {
    let mut text = HeadTail::new(cap);
    let mut since = 1;
    loop {
        let page = match output.read(&LogQuery {
            since: Some(since),
            stream: Some(stream),
            ..Default::default()
        }) {
            Ok(p) => p,
            Err(e) => return (format!("(output unreadable: {e})"), 0),
        };
        for l in &page.lines {
            text.push_line(&l.text);
        }
        if !page.has_more {
            return text.finish();
        }
        since = page.next_seq;
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

fn print_json(info: &JobInfo, output: &JobOutput, code: i32) -> anyhow::Result<()> {
    let (stdout, cut_out) = collect(output, Stream::Stdout, JSON_OUTPUT_CAP);
    let (stderr, cut_err) = collect(output, Stream::Stderr, JSON_OUTPUT_CAP);
    // As the safety seed's ExecResult: a timed-out run has no exit code of
    // its own (`exit_code: null`, `timed_out: true`); berth itself exits 124.
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
    });
    outln!("{}", serde_json::to_string_pretty(&v)?);
    Ok(())
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
