//! Making a job's image present on the engine ([`Engine::prepare`]: pulled
//! as the job's policy says, or the project image built from its
//! Dockerfile and reused while its context is unchanged, then a trusted
//! devcontainer's `postCreateCommand` run on it once), and the image verbs
//! of `berth images` (build, pull, has).

use std::time::Duration;

use super::{BuildProgressFn, Engine, ProgressFn, build, pull};
use crate::config::Config;
use crate::error::Result;
use crate::model::{JobId, JobSpec};

impl Engine {
    /// Choose the image of `spec` in `project` (the job's effective config)
    /// and make it present: pulled as the job's pull policy says, or built
    /// from the project's Dockerfile (reused while its context is unchanged),
    /// reporting progress; `on_denial` hears of what a build's egress proxy
    /// denies. Dropping the future cancels a pull or build under way.
    /// (`_id`: engine failures name the image, not the job.)
    pub async fn prepare(
        &self,
        _id: &JobId,
        spec: &JobSpec,
        project: &Config,
        progress: (ProgressFn, BuildProgressFn),
        on_denial: crate::net::DenialFn,
    ) -> Result<crate::images::ImageChoice> {
        let (progress, building) = progress;
        let docker = self.client().await?;
        // Whether berth/dev is there matters only to a job whose image no
        // one named. Looked up each time: a stale "there" would pick it.
        let named = spec.image.is_some() || crate::images::image_named_in(project).is_some();
        let dev_present = !named && docker.inspect_image(crate::images::DEV_IMAGE).await.is_ok();
        let choice = match crate::images::choose_image(spec, project, dev_present)? {
            crate::images::Choice::Image(mut c) => {
                let policy = spec.pull.unwrap_or(project.pull);
                let limit = Duration::from_secs_f64(project.pull_timeout_secs);
                // Seen before, or the default image just looked up: no second look.
                let seen = self.present.knows(&c.name) || (dev_present && c.name == crate::images::DEV_IMAGE);
                c.pull_ms = pull::ensure(docker, &c.name, seen, policy, limit, &progress).await?;
                self.present.saw(&c.name);
                c
            }
            crate::images::Choice::Build { build, why } => {
                let denial = on_denial.clone();
                build::ensure(self, docker, project, &build, &why, &building, denial).await?
            }
        };
        match &project.post_create {
            // A job naming its own image runs that image as it is.
            Some(post) if spec.image.is_none() => {
                build::ensure_post_create(self, docker, project, choice, post, &building, on_denial).await
            }
            _ => Ok(choice),
        }
    }

    /// Build (or reuse) the project image of `project` now (`berth images
    /// build project`); `None` when the project names no Dockerfile.
    pub async fn build_project(
        &self,
        project: &Config,
        building: BuildProgressFn,
        on_denial: crate::net::DenialFn,
    ) -> Result<Option<crate::images::ImageChoice>> {
        let docker = self.client().await?;
        if let Some(l) = project.untrusted.first() {
            return Err(l.refusal());
        }
        match crate::images::choose_image(&JobSpec::default(), project, false)? {
            crate::images::Choice::Build { build, why } => Ok(Some(
                build::ensure(self, docker, project, &build, &why, &building, on_denial).await?,
            )),
            crate::images::Choice::Image(_) => Ok(None),
        }
    }

    /// True when the engine answers and has `image`.
    pub async fn has_image(&self, image: &str) -> bool {
        match self.client().await {
            Ok(d) => d.inspect_image(image).await.is_ok(),
            Err(_) => false,
        }
    }

    /// Pull `image` now (`berth images pull`), reporting progress; the
    /// error names the registry and suggests the fix.
    pub async fn pull(&self, image: &str, progress: ProgressFn) -> Result<u64> {
        let docker = self.client().await?;
        let ms = pull::ensure(
            docker,
            image,
            false,
            crate::images::PullPolicy::Always,
            self.pull_timeout,
            &progress,
        )
        .await?;
        self.present.saw(image);
        Ok(ms.unwrap_or(0))
    }
}
