//! The runner seam: what the manager asks of any place a job can run.
//!
//! A [`Runner`] makes a job's prerequisites present (an image pulled or
//! built), launches it writing into its [`JobOutput`], and samples what it
//! uses. What it hands back ([`Launched`](super::Launched)) carries the rest
//! of the job's life: its exit future (the wait, resolved only once every
//! byte of output went through the writers), its mapped ports and relay, and
//! a [`Control`] to signal it. The host, Docker and fake runners implement
//! it; a new place (a Kubernetes pod) is one more implementation, and the
//! manager needs no change beyond choosing it.
//!
//! Adoption of jobs a crashed manager left running is not part of the seam:
//! only containers can be adopted (they are found by their labels), while a
//! host job ends with its manager by design (the watchdog, `shim.rs`).

use std::path::Path;
use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::Launched;
use crate::config::Config;
use crate::error::Result;
use crate::images::ImageChoice;
use crate::model::{JobId, JobInfo, JobSpec, Usage};
use crate::output::JobOutput;

/// A job as a runner is asked to start it.
pub struct Launch<'a> {
    pub id: &'a JobId,
    pub spec: &'a JobSpec,
    /// The job's working directory, resolved in its workspace.
    pub cwd: &'a Path,
    pub output: &'a Arc<JobOutput>,
    /// The job's project: image, workspace, user, network and limits.
    pub config: &'a Config,
    /// Told of every request the job's egress proxy denies.
    pub on_denial: crate::net::DenialFn,
    /// `layer` mode: the layer the job writes (`crate::layers`).
    pub layer: Option<&'a crate::layers::Layer>,
}

/// Who hears how the preparation goes (pull and build progress).
#[derive(Clone)]
pub struct Progress {
    pub pull: Arc<dyn Fn(crate::images::PullProgress) + Send + Sync>,
    pub build: Arc<dyn Fn(crate::images::BuildProgress) + Send + Sync>,
}

/// A place jobs run.
pub trait Runner: Send + Sync {
    /// Make what the job needs present before it starts; `Some` names the
    /// image chosen for it. Dropping the future cancels the work (a stop
    /// that comes during a pull). Nothing to prepare by default.
    fn prepare<'a>(
        &'a self,
        _job: &'a Launch<'a>,
        _progress: Progress,
    ) -> BoxFuture<'a, Result<Option<ImageChoice>>> {
        Box::pin(async { Ok(None) })
    }

    /// Start the job.
    fn launch<'a>(&'a self, job: &'a Launch<'a>) -> BoxFuture<'a, Result<Launched>>;

    /// What a running job of this runner uses now (`None`: unknown).
    fn usage<'a>(&'a self, _info: &'a JobInfo) -> BoxFuture<'a, Option<Usage>> {
        Box::pin(async { None })
    }

    /// The nodes this runner's jobs are spread over, with what they hold
    /// (none: the runner has one place).
    fn nodes(&self) -> BoxFuture<'_, Result<Vec<crate::model::NodeLoad>>> {
        Box::pin(async { Ok(Vec::new()) })
    }
}

/// How a runner signals one of its running jobs.
pub trait JobControl: Send + Sync {
    /// Send `signal` (SIGTERM for a polite stop) to the whole job.
    fn signal(&self, signal: i32) -> BoxFuture<'_, ()>;

    /// Remove what the job started through its scoped engine (children,
    /// networks, volumes): before the job counts as ended.
    fn end_children(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// Bring back what the ended job wrote where this machine cannot see
    /// it (a `layer` job on a remote engine or a swarm: its changes, into
    /// its layer), before it is cleaned up; why they did not come back.
    fn collect(&self) -> BoxFuture<'_, Option<String>> {
        Box::pin(async { None })
    }

    /// Clean up after the job ended and its output was read (a container is
    /// removed in the background). Called inside a tokio runtime.
    fn cleanup(&self) {}

    /// Synchronous last-resort kill, for `Drop` paths that cannot await.
    fn kill_now(&self);
}

/// A running job's [`JobControl`], shared by its supervisor, its stoppers
/// and the manager's last-resort teardown.
#[derive(Clone)]
pub struct Control(Arc<dyn JobControl>);

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Control(..)")
    }
}

impl Control {
    pub fn new(control: impl JobControl + 'static) -> Control {
        Control(Arc::new(control))
    }

    /// Send `signal` (SIGTERM for a polite stop) to the whole job.
    pub async fn signal(&self, signal: i32) {
        self.0.signal(signal).await
    }

    /// Kill the job outright.
    pub async fn kill(&self) {
        self.0.signal(nix::sys::signal::Signal::SIGKILL as i32).await
    }

    /// See [`JobControl::end_children`].
    pub async fn end_children(&self) {
        self.0.end_children().await
    }

    /// See [`JobControl::collect`].
    pub async fn collect(&self) -> Option<String> {
        self.0.collect().await
    }

    /// See [`JobControl::cleanup`].
    pub fn cleanup(&self) {
        self.0.cleanup()
    }

    /// See [`JobControl::kill_now`].
    pub fn kill_now(&self) {
        self.0.kill_now()
    }
}
