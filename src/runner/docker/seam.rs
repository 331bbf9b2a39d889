//! The Docker engine as a [`Runner`]: the image chosen, pulled or built
//! first (with progress, cancelled by dropping), then the container
//! launched under the job's project, its usage sampled from the engine.

use futures_util::future::BoxFuture;

use super::Engine;
use crate::error::Result;
use crate::images::ImageChoice;
use crate::model::{JobInfo, Usage};
use crate::runner::{Launch, Launched, Progress, Runner};

impl Runner for Engine {
    fn prepare<'a>(
        &'a self,
        job: &'a Launch<'a>,
        progress: Progress,
    ) -> BoxFuture<'a, Result<Option<ImageChoice>>> {
        Box::pin(async move {
            let progress = (progress.pull, progress.build);
            let choice = Engine::prepare(
                self,
                job.id,
                job.spec,
                job.config,
                progress,
                job.on_denial.clone(),
            )
            .await?;
            Ok(Some(choice))
        })
    }

    fn launch<'a>(&'a self, job: &'a Launch<'a>) -> BoxFuture<'a, Result<Launched>> {
        Box::pin(self.launch_in(job))
    }

    fn usage<'a>(&'a self, info: &'a JobInfo) -> BoxFuture<'a, Option<Usage>> {
        Box::pin(Engine::usage(self, info))
    }
}
