//! What a container job's exit future knows while it follows the container
//! (`exit.rs`), and how it rides out an engine that stops answering.
//!
//! The engine is the truth for what runs. When its connection breaks (the
//! wait request or the output stream fails, inspect gets no answer), the
//! container may well still run: the job keeps its slot and stays running,
//! and inspect is asked again with a growing pause. Once the engine answers
//! a container that still runs is followed again (a new wait request, its
//! output read again from the start, the lines already taken skipped: the
//! engine keeps its logs, so what was printed meanwhile is not lost); one
//! that ended gives its exit code and the rest of its output; one that is
//! gone ends the job as lost. The containers of this manager that no job
//! claims any more are swept then (`claims.rs`). An engine that does not
//! answer within the engine's patience (`engine_patience`) gives the job up
//! as [`Exit::Stranded`], its container left to that sweep.

use std::time::{Duration, Instant};

use bollard::models::ContainerInspectResponse;
use bollard::query_parameters::LogsOptions;
use tokio::task::JoinHandle;

use super::{FALLBACK_POLL, Pumped, Waited, Writers, pump, wait_exit};
use crate::model::JobId;
use crate::runner::Exit;
use crate::runner::docker::{DockerClient, DockerControl};

/// The longest pause between two questions to an engine that does not answer.
const RECONNECT_MAX: Duration = Duration::from_secs(4);
/// How long one inspect may take before the engine counts as not answering.
const INSPECT_LIMIT: Duration = Duration::from_secs(5);

/// One container as its exit future follows it.
pub(super) struct Following {
    /// The exit code, once the engine gave it.
    pub code: Option<i64>,
    /// The wait request, until it answered or failed.
    pub wait: Option<JoinHandle<Waited>>,
    /// The output task, until it ended; then its writers are back here.
    pub pump: Option<JoinHandle<Pumped>>,
    pub writers: Option<Writers>,
    /// Why the engine's connection broke: what was read may be cut short,
    /// so once the engine answers, the output is read again and the exit
    /// asked again.
    broken: Option<String>,
    /// Since when the engine has not answered.
    unreachable_since: Option<Instant>,
    /// The pause before the next inspect.
    pub poll: Duration,
}

impl Following {
    pub fn new(wait: JoinHandle<Waited>, pump: JoinHandle<Pumped>) -> Self {
        Following {
            code: None,
            wait: Some(wait),
            pump: Some(pump),
            writers: None,
            broken: None,
            unreachable_since: None,
            poll: FALLBACK_POLL,
        }
    }

    /// The engine's connection broke (the first reason is kept).
    pub fn broke(&mut self, why: String) {
        self.broken.get_or_insert(why);
    }

    /// Ask inspect what became of the container: the job's exit when that
    /// is decided (gone, or given up), else `None` (followed again, its
    /// exit code read, or the engine asked again later).
    pub async fn check(
        &mut self,
        docker: &DockerClient,
        control: &DockerControl,
        job: &JobId,
    ) -> Option<Exit> {
        let cid = &control.container_id;
        match tokio::time::timeout(INSPECT_LIMIT, docker.inspect_container(cid)).await {
            Ok(Ok(inspected)) => {
                self.answered(docker, control, job, &inspected).await;
                None
            }
            Ok(Err(e)) if e.engine_status() == Some(404) => {
                self.stop_reading();
                let why = match self.broken.take() {
                    Some(broke) => format!("{broke}; then the container was gone"),
                    None => e.engine_reason(),
                };
                Some(Exit::Lost(format!("lost the container: {why}")))
            }
            Ok(Err(e)) => self.unanswered(e.engine_reason(), control.claims.patience, job),
            Err(_) => self.unanswered(
                format!("no answer within {INSPECT_LIMIT:?}"),
                control.claims.patience,
                job,
            ),
        }
    }

    /// The engine did not answer: ask again after a longer pause, or give
    /// the job up once it has not answered for `patience`.
    fn unanswered(&mut self, why: String, patience: Duration, job: &JobId) -> Option<Exit> {
        let since = *self.unreachable_since.get_or_insert_with(|| {
            tracing::warn!(job = %job, error = %why, "the engine does not answer; the job keeps its slot while berth asks again");
            Instant::now()
        });
        self.broke(why.clone());
        if since.elapsed() >= patience {
            self.stop_reading();
            return Some(Exit::Stranded(format!(
                "the engine stopped answering ({why}) and did not answer again within engine_patience ({}s); its container may still run and is removed once the engine answers",
                patience.as_secs()
            )));
        }
        self.poll = (self.poll * 2).min(RECONNECT_MAX);
        None
    }

    /// The engine answered inspect: after a break, sweep what no job
    /// claims and follow the container again; else read its exit code once
    /// it stopped.
    async fn answered(
        &mut self,
        docker: &DockerClient,
        control: &DockerControl,
        job: &JobId,
        inspected: &ContainerInspectResponse,
    ) {
        self.poll = FALLBACK_POLL;
        let state = inspected.state.as_ref();
        let running = state.and_then(|s| s.running).unwrap_or(false)
            || state.and_then(|s| s.restarting).unwrap_or(false);
        let exit_code = state.and_then(|s| s.exit_code).unwrap_or(-1);
        let was_unreachable = self.unreachable_since.take().is_some();
        let Some(why) = self.broken.take() else {
            if !running {
                tracing::debug!(job = %job, "exit read from inspect (no wait answer)");
                self.code = Some(exit_code);
            }
            return;
        };
        tracing::warn!(job = %job, broke = %why, was_unreachable, running, "the engine answers again; following the container again");
        let swept = control.claims.sweep(docker).await;
        if swept > 0 {
            tracing::warn!(swept, "removed containers no job claims");
        }
        let cid = &control.container_id;
        match running {
            true if self.wait.is_none() => {
                self.wait = Some(tokio::spawn(wait_exit(docker.clone(), cid.clone())))
            }
            true => {}
            false => self.code = Some(exit_code),
        }
        // The output read again from its start into the same writers,
        // unless the output task still reads (only the wait broke).
        if self.pump.is_none()
            && let Some(mut writers) = self.writers.take()
        {
            writers.rewind();
            let opts = LogsOptions {
                follow: true,
                stdout: true,
                stderr: true,
                ..Default::default()
            };
            let stream = docker.logs(cid, opts);
            self.pump = Some(tokio::spawn(pump(stream, writers, None)));
        }
    }

    /// Nothing more will be read: the output task goes (its writers close).
    fn stop_reading(&mut self) {
        if let Some(p) = self.pump.take() {
            p.abort();
        }
    }
}
