//! The Docker runner (bollard): placeholder until the Docker runner issue lands.

use std::path::Path;
use std::sync::Arc;

use super::Launched;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::job::{JobId, JobSpec, RunnerChoice, RunnerKind};
use crate::output::JobOutput;

/// Signals and removes a job's container.
#[derive(Clone, Debug)]
pub struct DockerControl {
    pub container_id: String,
}

impl DockerControl {
    pub async fn signal(&self, _signal: i32) {}
    pub async fn remove(&self) {}
    pub fn remove_blocking(&self) {}
}

/// The engine connection, made lazily on first use.
pub struct Engine {}

impl Engine {
    pub fn new(_config: &Config) -> Self {
        Engine {}
    }

    pub async fn resolve(&self, choice: RunnerChoice) -> Result<RunnerKind> {
        match choice {
            RunnerChoice::Host | RunnerChoice::Auto => Ok(RunnerKind::Host),
            RunnerChoice::Docker => Err(Error::EngineUnavailable {
                endpoint: "unix:///var/run/docker.sock".into(),
                message: "not implemented yet".into(),
            }),
        }
    }

    pub async fn launch(
        &self,
        id: &JobId,
        _spec: &JobSpec,
        _cwd: &Path,
        _output: &Arc<JobOutput>,
    ) -> Result<Launched> {
        Err(Error::Docker {
            action: "create container",
            job: id.to_string(),
            message: "not implemented yet".into(),
        })
    }
}
