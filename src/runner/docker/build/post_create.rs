//! A trusted devcontainer.json's `postCreateCommand`, run once on the
//! project image: one more build step (`FROM` the image the job would run
//! in, the workspace copied to its own path, `RUN` the command), confined
//! as every project build is (`confine.rs`: the project's egress, limits
//! and processes), its output shown as build progress. The image that
//! results is the one the project's container jobs run in.
//!
//! Why a build step and not a container that is then committed: the build
//! path already holds every guard a command from a project file needs
//! (trust, confinement, cleanup of a failed step, one build per tag at a
//! time), and a commit would not see the workspace anyway (a job's
//! workspace is a mount). So what the command writes under the workspace
//! stays in the image, under the path each job's workspace is mounted on:
//! setup that belongs to the workspace (`npm ci` into `node_modules`) is a
//! job's, setup of the system (`pip install`, `apt-get install`) is this.
//!
//! "Once" is per image and command: the tag is a hash of the Dockerfile
//! berth writes (base image id, workspace path, user, command), so a new
//! base image or an edited command runs it again, and an unchanged one is
//! reused as it is (edits to the workspace do not, as with the dev
//! container tool, which runs it when the container is created).

use std::path::Path;
use std::time::Instant;

use super::{
    BuildProgressFn, DockerClient, Engine, confine, labels, present, remove_older, run_build, tag_lock,
};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::images::ImageChoice;
use crate::images::build::project_tag;
use crate::model::{PostCreate, ProjectBuild};
use crate::net::DenialFn;

/// Label naming the workspace a post-create image was built for (older
/// ones are removed after a new one; the base image is not of this kind).
pub const POST_LABEL: &str = "berth.project.post-create";

/// The image `base` (the job's, present) with `post`'s command run on it
/// for `project`: reused when its tag exists, else built (see the module
/// doc). `progress` hears the build; `on_denial`, what its proxy denies.
pub async fn ensure(
    engine: &Engine,
    docker: &DockerClient,
    project: &Config,
    base: ImageChoice,
    post: &PostCreate,
    progress: &BuildProgressFn,
    on_denial: DenialFn,
) -> Result<ImageChoice> {
    let workspace = std::fs::canonicalize(&project.workspace).unwrap_or_else(|_| project.workspace.clone());
    let base_id = docker.inspect_image(&base.name).await?.id.unwrap_or_default();
    let text = dockerfile(&base_id, &workspace, post)?;
    let hash = crate::trust::digest(text.as_bytes())
        .trim_start_matches("sha256:")
        .to_string();
    let tag = project_tag(&workspace, &hash).replacen(':', ":post-", 1);
    let mut choice = ImageChoice {
        name: tag.clone(),
        why: format!(
            "{}; then the postCreateCommand of {} (run once: {tag})",
            base.why,
            post.file.display()
        ),
        ..base
    };
    let lock = tag_lock(&tag);
    let _held = lock.lock().await;
    if present(docker, &tag).await? {
        return Ok(choice);
    }
    let started = Instant::now();
    let ws = workspace.clone();
    let ctx = tokio::task::spawn_blocking(move || crate::images::context::walk_workspace(&ws))
        .await
        .map_err(|e| Error::BuildContext {
            path: workspace.clone(),
            message: e.to_string(),
        })??
        .with_dockerfile(text.into_bytes(), hash.clone());
    let confined = confine(engine, docker, &ctx, project, &tag, on_denial).await?;
    let build = ProjectBuild {
        dockerfile: post.file.clone(),
        context: workspace.clone(),
        args: Default::default(),
        declared_in: post.file.clone(),
    };
    let labels = labels(POST_LABEL, &workspace, &hash);
    run_build(docker, &build, ctx, &tag, labels, progress, &confined)
        .await
        .map_err(|e| match e {
            Error::ImageBuildFailed { dockerfile, reason } => Error::ImageBuildFailed {
                dockerfile,
                reason: format!("its postCreateCommand failed: {reason}"),
            },
            other => other,
        })?;
    let took = started.elapsed().as_millis() as u64;
    choice.build_ms = Some(choice.build_ms.unwrap_or(0) + took);
    remove_older(docker, POST_LABEL, &workspace, &tag).await;
    Ok(choice)
}

/// The Dockerfile of the step: the workspace at its own path (owned by the
/// user the command runs as), the command in the exec form, its words as
/// JSON (no shell of the builder's reads them, no `$` is substituted).
fn dockerfile(base_id: &str, workspace: &Path, post: &PostCreate) -> Result<String> {
    let ws = workspace.to_string_lossy();
    // WORKDIR and COPY substitute `$…` and end at a line's end: a path that
    // would be read as more than a path is refused rather than escaped.
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._+-@=,:~ ".contains(c);
    if !ws.chars().all(plain) || base_id.is_empty() {
        return Err(Error::ImageBuildFailed {
            dockerfile: post.file.clone(),
            reason: format!(
                "its postCreateCommand is not run: the workspace path {} holds characters a Dockerfile reads as its own (run the setup as a job instead)",
                crate::inert::visible(&ws)
            ),
        });
    }
    let argv = serde_json::to_string(&post.argv).map_err(|e| Error::InvalidSpec(e.to_string()))?;
    let mut out = format!("FROM {base_id}\nWORKDIR {ws}\n");
    match post.user.as_deref() {
        Some(user) => {
            let owner = if user == "root" { "0:0" } else { user };
            out.push_str(&format!("COPY --chown={owner} . .\nUSER {owner}\n"));
        }
        None => out.push_str("COPY . .\n"),
    }
    out.push_str(&format!("RUN {argv}\n"));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(argv: &[&str], user: Option<&str>) -> PostCreate {
        PostCreate {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            user: user.map(str::to_string),
            file: "/p/.devcontainer.json".into(),
        }
    }

    #[test]
    fn the_command_is_one_json_line_whatever_it_holds() {
        let cmd = "echo \"$HOME\" \\\nrm -rf / # ]\nRUN evil";
        let text = dockerfile(
            "sha256:ab",
            Path::new("/w/p"),
            &post(&["/bin/sh", "-c", cmd], None),
        )
        .unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert_eq!(&lines[..3], ["FROM sha256:ab", "WORKDIR /w/p", "COPY . ."]);
        let run = lines[3].strip_prefix("RUN ").unwrap();
        let back: Vec<String> = serde_json::from_str(run).unwrap();
        assert_eq!(
            back,
            ["/bin/sh", "-c", cmd],
            "the words reach the step as written"
        );
        let text = dockerfile(
            "sha256:ab",
            Path::new("/w/p"),
            &post(&["make"], Some("1000:1000")),
        )
        .unwrap();
        assert!(
            text.contains("COPY --chown=1000:1000 . .\nUSER 1000:1000\nRUN [\"make\"]"),
            "{text}"
        );
    }

    #[test]
    fn a_workspace_path_a_dockerfile_would_read_is_refused() {
        for ws in ["/w/$HOME", "/w/a\nRUN x", "/w/a\\b"] {
            let err = dockerfile("sha256:ab", Path::new(ws), &post(&["make"], None)).unwrap_err();
            assert!(err.to_string().contains("run the setup as a job"), "{ws}: {err}");
        }
    }
}
