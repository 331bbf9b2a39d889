//! The seed-compatible `--tools safe_shell` set: one `safe_shell` tool, a
//! binary with args and no shell, blocking (until exit), interactive
//! (`keep_alive` seconds, then killed) or background (`{pid, stdout,
//! stderr}` with log files).
//!
//! The seed's documented background flow is: start in the background, read
//! the log files with `safe_shell(command="cat", args=[<log file>])`, stop it
//! with `safe_shell(command="kill", args=["<pid>"])`. Under the Docker runner
//! neither the log files nor the pid exist inside a fresh container, so
//! those two calls are recognised when they name *our* jobs: `kill <pid>` of
//! a job's pid stops that job, `cat <log file>` of a job's log file answers
//! that stream from the manager. Anything else runs as asked.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::core::{Answer, Started, reply};
use super::format::{self, Dialect};
use super::service::BerthMcp;
use crate::error::{Error, Result};
use crate::manager::{KillRequest, ListFilter};
use crate::model::{EndedBy, JobInfo, JobSpec, RunRequest};
use crate::output::{LogQuery, Stream};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SafeShellArgs {
    /// The binary to run (e.g., './server', 'go'). No shell metacharacters.
    pub command: String,
    /// Arguments for the command.
    #[serde(default)]
    pub args: Vec<String>,
    /// Stdin data to feed to the process.
    pub input: Option<String>,
    /// If true, starts the process and returns immediately. Output is redirected to log files. (Default: false)
    #[serde(default)]
    pub background: bool,
    /// Duration in seconds. For blocking calls: process is killed after this time. For background: acts
    /// as a strict time-to-live (optional). 0 or omitted: blocking calls wait until exit.
    pub keep_alive: Option<u64>,
    /// Ports the process listens on, e.g. ["8000"]: each is published and answered as
    /// http://127.0.0.1:PORT (`ports` in the background answer). A host process gets its port in $PORT.
    #[serde(default, deserialize_with = "crate::mcp::args::ports_de")]
    #[schemars(with = "Vec<crate::mcp::args::PortArg>")]
    pub ports: Vec<String>,
}

#[tool_router(router = safe_shell_router, vis = "pub(super)")]
impl BerthMcp {
    #[tool(
        description = "Execute a specific binary safely. Supports blocking (wait for completion) or background \
(start and detach) modes. Blocking: runs, feeds `input`, waits for the exit and returns the exit code and merged \
stdout/stderr (capped at 120 lines / 16 KiB); with keep_alive N > 0 it is killed after N seconds and the output \
returned (interactive programs). background: true returns at once JSON {\"pid\", \"stdout\", \"stderr\"} (log file \
paths; with `ports`, each port's URL). Read a log with command \"cat\" and the path; stop it with command \"kill\" and \
args [\"<pid>\"]."
    )]
    async fn safe_shell(&self, Parameters(a): Parameters<SafeShellArgs>) -> CallToolResult {
        reply(self.safe_shell_answer(a).await)
    }
}

impl BerthMcp {
    async fn safe_shell_answer(&self, a: SafeShellArgs) -> Result<Answer> {
        if a.command.trim().is_empty() || a.command.contains(char::is_whitespace) {
            return Err(Error::InvalidSpec(format!(
                "`command` is one binary with no spaces (got `{}`); put its arguments in `args`",
                a.command
            )));
        }
        if !a.background {
            if let Some(answer) = self.kill_own_job(&a).await? {
                return Ok(answer);
            }
            if let Some(answer) = self.cat_own_log(&a).await? {
                return Ok(answer);
            }
        }
        let mut argv = vec![a.command.clone()];
        argv.extend(a.args.iter().cloned());
        let mut spec = JobSpec::argv(argv);
        RunRequest {
            ports: a.ports.clone(),
            input: a.input.clone(),
            ..Default::default()
        }
        .apply(&mut spec)?;
        spec.background = a.background;
        let keep = a.keep_alive.filter(|k| *k > 0).map(|k| k as f64);
        spec.keep_alive = keep;
        if let (Some(k), false) = (keep, a.background) {
            // Blocking with keep-alive: the kill at N s ends it, not the foreground budget.
            spec.timeout = Some(k + self.core.manager.config().grace_secs + 5.0);
        }
        let (info, how) = self.core.start(spec, None).await?;
        match how {
            Started::Background(_) => {
                let mut v = serde_json::json!({
                    "pid": info.pid,
                    "stdout": info.logs.stdout,
                    "stderr": info.logs.stderr,
                    "job_id": info.id,
                });
                if !info.ports.is_empty() {
                    v["ports"] = format::port_urls(&info).into();
                }
                Ok(Answer::json(&v))
            }
            Started::Promoted => self.core.promoted(&info, Dialect::SafeShell).await,
            Started::Finished => {
                let mut text = match info.exit_code {
                    Some(c) => format!("exit code: {c}"),
                    None => "exit code: none".into(),
                };
                text += &format!(
                    " ({}) after {}
",
                    info.end_words(),
                    format::duration(&info)
                );
                text += &format::output_block(&self.core.manager, &info.id, Dialect::SafeShell).await?;
                Ok(Answer {
                    is_error: info.status.is_failure(),
                    text,
                })
            }
        }
    }

    /// `kill [-SIG] <pid>…` where every pid is one of our running jobs: stop those jobs.
    async fn kill_own_job(&self, a: &SafeShellArgs) -> Result<Option<Answer>> {
        if a.command != "kill" && a.command != "/bin/kill" {
            return Ok(None);
        }
        let Some((signal, pids)) = parse_kill(&a.args) else {
            return Ok(None);
        };
        let running = self.core.manager.list(ListFilter::Running);
        let jobs: Option<Vec<&JobInfo>> = pids
            .iter()
            .map(|p| running.iter().find(|j| j.pid == Some(*p)))
            .collect();
        let Some(jobs) = jobs else { return Ok(None) };
        let signal = signal
            .map(|s| match s.parse::<i32>() {
                Ok(n) => Ok(n),
                Err(_) => super::args::SignalArg::Name(s).number(),
            })
            .transpose()?;
        let mut text = String::from("exit code: 0\n");
        for j in jobs {
            let req = KillRequest {
                ended_by: Some(EndedBy::Agent),
                signal,
                ..Default::default()
            };
            let out = self.core.kill(&j.id, req).await?;
            text += &format!(
                "{} (pid {}): {}\n",
                j.id,
                j.pid.unwrap_or_default(),
                format::end_words(
                    out.status.name(),
                    out.ended_by,
                    out.exit_code,
                    out.reason.as_deref()
                )
            );
        }
        Ok(Some(Answer::ok(text)))
    }

    /// `cat <log file>…` where every path is a log file of one of our jobs: that stream's lines.
    async fn cat_own_log(&self, a: &SafeShellArgs) -> Result<Option<Answer>> {
        if (a.command != "cat" && a.command != "/bin/cat") || a.args.is_empty() || a.input.is_some() {
            return Ok(None);
        }
        let mut all = self.core.manager.off_worker(|m| m.list(ListFilter::All)).await;
        self.core.keep_visible(&mut all);
        let mut text = String::from("exit code: 0\n");
        for path in &a.args {
            let found = all.iter().find_map(|j| {
                if j.logs.stdout.as_os_str() == path.as_str() {
                    Some((j, Stream::Stdout))
                } else if j.logs.stderr.as_os_str() == path.as_str() {
                    Some((j, Stream::Stderr))
                } else {
                    None
                }
            });
            let Some((job, stream)) = found else {
                return Ok(None);
            };
            let mut page = self
                .core
                .manager
                .read_logs(
                    &job.id,
                    &LogQuery {
                        tail: Some(format::MAX_LINES),
                        stream: Some(stream),
                        ..Default::default()
                    },
                )
                .await?;
            // The last lines within the answer's byte cap, as `logs` reads them.
            format::cap_page_tail(&mut page);
            for l in page.lines {
                text += &format::truncate_line(&l.text, format::MAX_LINE_SHOWN);
                text.push('\n');
            }
        }
        Ok(Some(Answer::ok(text)))
    }
}

/// `-9`, `-KILL`, `-s KILL`, `-SIGTERM` then pids; None when it is not that shape.
fn parse_kill(args: &[String]) -> Option<(Option<String>, Vec<u32>)> {
    let mut signal = None;
    let mut rest = args;
    match rest.first().map(String::as_str) {
        Some("-s") => {
            signal = Some(rest.get(1)?.clone());
            rest = &rest[2..];
        }
        Some(s) if s.starts_with('-') && s.len() > 1 => {
            signal = Some(s[1..].to_string());
            rest = &rest[1..];
        }
        _ => {}
    }
    let pids: Option<Vec<u32>> = rest.iter().map(|p| p.parse().ok()).collect();
    let pids = pids?;
    (!pids.is_empty()).then_some((signal, pids))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_arguments_parse_like_kill() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(parse_kill(&s(&["123"])), Some((None, vec![123])));
        assert_eq!(
            parse_kill(&s(&["-9", "5", "6"])),
            Some((Some("9".into()), vec![5, 6]))
        );
        assert_eq!(
            parse_kill(&s(&["-s", "TERM", "7"])),
            Some((Some("TERM".into()), vec![7]))
        );
        assert_eq!(parse_kill(&s(&["-l"])), None);
        assert_eq!(parse_kill(&s(&["%1"])), None);
    }
}
