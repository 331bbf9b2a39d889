//! The seed-compatible `--tools process` set over the same core:
//! `run_background`, `stop_process`, `list_processes`,
//! `read_process_output`, `wait_for_service`, plus the canonical
//! `wait_for_port`, `run_test` and `run_build`.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::args::{EngineArg, RunnerArg, WaitForPortArgs, id_de, job_id, opt_id_de};
use super::core::{Answer, reply};
use super::format::Dialect;
use super::logs::{self, LogMode, LogRequest};
use super::service::BerthMcp;
use super::tools::kill_json;
use crate::error::{Error, Result};
use crate::manager::{KillRequest, ListFilter};
use crate::model::{EndedBy, JobSpec, RunRequest};
use crate::ready::ReadyCondition;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunBackgroundArgs {
    /// The command. With `args`: the binary, run directly. Without: a shell command line (sh -c).
    pub command: String,
    /// Arguments for the binary (no shell).
    pub args: Option<Vec<String>>,
    /// Ports to publish, e.g. ["3000"]; each comes back as a URL http://127.0.0.1:PORT (host jobs get $PORT).
    #[serde(default, deserialize_with = "crate::mcp::args::ports_de")]
    #[schemars(with = "Vec<crate::mcp::args::PortArg>")]
    pub ports: Vec<String>,
    /// Working directory, relative to the workspace root.
    pub cwd: Option<String>,
    /// auto (default: docker when available), docker, host or swarm.
    pub runner: Option<RunnerArg>,
    /// Engine access for a container process: none (default) or scoped (testcontainers work inside).
    pub engine: Option<EngineArg>,
    /// Docker image (default berth/sandbox:latest).
    pub image: Option<String>,
    /// CPU cores, e.g. 0.5.
    pub cpus: Option<f64>,
    /// Memory limit, e.g. "256m", "1g".
    pub memory: Option<String>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListProcessesArgs {
    /// Also list ended processes, with their exit codes. Default false: active ones only.
    #[serde(default)]
    pub all: bool,
    /// Add CPU and memory use of running processes (sampled live).
    #[serde(default)]
    pub usage: bool,
    /// Most processes in the answer, newest first (default 50).
    pub limit: Option<usize>,
    /// Only processes older than this process_id: the last one of the previous page.
    pub before: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StopProcessArgs {
    /// The process_id from run_background (e.g. "job-3").
    #[serde(deserialize_with = "id_de")]
    #[schemars(with = "String")]
    pub process_id: String,
    /// Why it is stopped (kept in its record and its `ended` event).
    pub reason: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadOutputArgs {
    /// The process_id.
    #[serde(deserialize_with = "id_de")]
    #[schemars(with = "String")]
    pub process_id: String,
    /// How many recent lines (default 50).
    pub lines: Option<usize>,
    /// Read forward from this line seq instead (the next_seq of a previous answer).
    pub since_seq: Option<u64>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitForServiceArgs {
    /// The process to wait on (its port and output); without it, `port` is checked on 127.0.0.1.
    #[serde(default, deserialize_with = "opt_id_de")]
    #[schemars(with = "Option<String>")]
    pub process_id: Option<String>,
    /// Port that must accept connections (the process's own port, as given in `ports`).
    pub port: Option<u16>,
    /// Regex a line of output must match, e.g. "Ready on".
    pub output_regex: Option<String>,
    /// true: wait for the process to end instead (a background run_test or build): answers its
    /// exit code and last lines.
    #[serde(default)]
    pub exit: bool,
    /// Seconds to wait at most (default 60).
    pub timeout: Option<f64>,
}

#[tool_router(router = process_router, vis = "pub(super)")]
impl BerthMcp {
    #[tool(
        description = "Start a long-running process (dev server, database, watcher) in the background and return \
at once with its process_id, each port as a URL and its log files. Then use wait_for_service instead of sleeping, \
read_process_output to peek at logs, stop_process when done. All processes stop when the session ends."
    )]
    async fn run_background(&self, Parameters(a): Parameters<RunBackgroundArgs>) -> CallToolResult {
        reply(
            async {
                let mut spec = match a.args {
                    Some(args) => JobSpec::argv(std::iter::once(a.command).chain(args)),
                    None => JobSpec::shell(a.command),
                };
                spec.background = true;
                RunRequest {
                    ports: a.ports,
                    cwd: a.cwd.map(Into::into),
                    runner: a.runner.map(RunnerArg::word),
                    engine: a.engine.map(EngineArg::word),
                    image: a.image,
                    cpus: a.cpus,
                    memory: a.memory,
                    ..Default::default()
                }
                .apply(&mut spec)?;
                self.core.run(spec, None, Dialect::Process).await
            }
            .await,
        )
    }

    #[tool(
        description = "Stop a background process (TERM, then KILL); `reason` is kept in its record. Answers \
{result, reason, ended_by}."
    )]
    async fn stop_process(&self, Parameters(a): Parameters<StopProcessArgs>) -> CallToolResult {
        reply(
            async {
                let req = KillRequest {
                    ended_by: Some(EndedBy::Agent),
                    reason: a.reason,
                    ..Default::default()
                };
                Ok(Answer::json(&kill_json(
                    &self.core.kill(&job_id(&a.process_id), req).await?,
                )))
            }
            .await,
        )
    }

    #[tool(
        description = "List active processes: id, status, ports as URLs, run time, command. all: true adds \
ended ones with their exit codes (and who ended them); usage: true adds CPU and memory use (takes about a second). \
Newest first, 50 at a time: pass `before` (the last process_id shown) for the next page, `limit` for more or fewer."
    )]
    async fn list_processes(&self, Parameters(a): Parameters<ListProcessesArgs>) -> CallToolResult {
        let filter = if a.all {
            ListFilter::All
        } else {
            ListFilter::Running
        };
        reply(Ok(self
            .list_answer(filter, a.usage, a.limit, a.before.as_deref())
            .await))
    }

    #[tool(
        description = "Peek at a process's recent output: the last `lines` lines (default 50) of stdout and stderr \
merged. since_seq reads forward from a line number instead."
    )]
    async fn read_process_output(&self, Parameters(a): Parameters<ReadOutputArgs>) -> CallToolResult {
        let req = LogRequest {
            mode: if a.since_seq.is_some() {
                LogMode::Body
            } else {
                LogMode::Tail
            },
            since: a.since_seq,
            limit: Some(a.lines.unwrap_or(50)),
            stream: None,
        };
        let id = job_id(&a.process_id);
        reply(
            async {
                self.core.may_read(&id).await?;
                logs::answer(&self.core.manager, &id, &req, Dialect::Process).await
            }
            .await,
        )
    }

    #[tool(
        description = "Block until a service is ready instead of guessing with sleep: its `port` accepts \
connections and/or a line of its output matches `output_regex`. Answers as soon as it is ready, or early with \
the reason (the process exited, with its code and last output; or `timeout` seconds passed, default 60). \
exit: true waits for the process to end (a background run_test) and answers its exit code and last lines."
    )]
    async fn wait_for_service(&self, Parameters(a): Parameters<WaitForServiceArgs>) -> CallToolResult {
        reply(self.wait_for_service_answer(a).await)
    }
}

impl BerthMcp {
    async fn wait_for_service_answer(&self, a: WaitForServiceArgs) -> Result<Answer> {
        if a.exit {
            if a.port.is_some() || a.output_regex.is_some() {
                return Err(Error::InvalidSpec(
                    "`exit: true` waits for the end: give `process_id` only, not `port` or `output_regex`"
                        .into(),
                ));
            }
            let id = a.process_id.as_deref().map(job_id).ok_or_else(|| {
                Error::InvalidSpec("`exit: true` needs the `process_id` to wait for".into())
            })?;
            return self.core.wait(&id, &[], a.timeout).await;
        }
        // The seed's call is {port, output_regex} with no id: the process is
        // the one that publishes that port.
        let by_port = a.port.and_then(|p| self.job_with_port(p));
        let Some(id) = a.process_id.or(by_port.as_ref().map(|(id, _)| id.to_string())) else {
            if a.output_regex.is_some() {
                return Err(Error::InvalidSpec(format!(
                    "no running process publishes port {}: give the process_id whose output to watch",
                    a.port.map(|p| p.to_string()).unwrap_or_else(|| "-".into())
                )));
            }
            let port = a.port.ok_or_else(|| {
                Error::InvalidSpec("give process_id, port or both (and output_regex with process_id)".into())
            })?;
            return self
                .wait_for_port_answer(WaitForPortArgs {
                    host: None,
                    port,
                    timeout: a.timeout,
                })
                .await;
        };
        let id = job_id(&id);
        let mut conds = Vec::new();
        if let Some(p) = a.port {
            // A published (host) port of that job counts as its own port.
            let own = match &by_port {
                Some((j, own)) if *j == id => *own,
                _ => p,
            };
            conds.push(ReadyCondition::Port(own));
        }
        if let Some(re) = a.output_regex {
            conds.push(ReadyCondition::Log(re));
        }
        if conds.is_empty() {
            let info = self.core.manager.read_info(&id).await?;
            let port = info.ports.first().map(|m| m.port).ok_or_else(|| {
                Error::InvalidSpec(format!("{id} publishes no port: give `port` or `output_regex`"))
            })?;
            conds.push(ReadyCondition::Port(port));
        }
        self.core.wait(&id, &conds, a.timeout).await
    }
}

impl BerthMcp {
    /// The active job whose own or published port is `port`, and its own port.
    fn job_with_port(&self, port: u16) -> Option<(crate::JobId, u16)> {
        self.core
            .manager
            .list(ListFilter::Running)
            .into_iter()
            .find_map(|j| {
                let m = j.ports.iter().find(|m| m.port == port || m.host_port == port)?;
                Some((j.id.clone(), m.port))
            })
    }
}
