//! Building a project image on the engine: the context is walked and hashed
//! off the async workers (`images::context`), an image already tagged with
//! that hash is reused as it is, else the tar is streamed to the engine's
//! classic builder while its output is folded into [`BuildProgress`]
//! reports. A failed build is one error naming the Dockerfile and the
//! engine's last error line (or the context and berth's own line, when it
//! changed while berth sent it); intermediate containers are always
//! removed (`forcerm`) and no tag is left, so nothing of a failed build is
//! used. One build per tag at a time in this process: a second job asking
//! for the same context waits and then reuses it. After a build, older
//! images of the same workspace are removed (unless a container still uses
//! them).
//!
//! A build runs the project's `RUN` steps, which a job could have written:
//! it only ever starts from a file the user trusted (`crate::trust`), and
//! is confined like a job (`confine.rs`: the project's egress, limits and
//! processes). It fetches nothing by itself: a Dockerfile whose `ADD` names
//! a URL (which the engine would download from its own host, past every
//! network the build has) is refused before the build, naming the line,
//! unless the user's own config says `build_add_urls = true`.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use super::DockerClient;
use bollard::query_parameters::{BuildImageOptions, KillContainerOptions, ListImagesOptions, StatsOptions};
use bytes::Bytes;
use futures_util::StreamExt;

use super::Engine;
use super::throttle::Throttle;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::images::build::{WORKSPACE_LABEL, project_tag};
use crate::images::context::{self, Context};
use crate::images::{BuildProgress, ImageChoice, ProjectBuild};
use crate::net::DenialFn;

mod confine;
mod post_create;

use confine::{Confined, confine};
pub use post_create::ensure as ensure_post_create;

/// Shortest time between two progress reports.
/// Bytes per chunk of the context sent to the engine.
const CHUNK: usize = 256 * 1024;

/// Where build progress goes (the manager records it and emits `building` events).
pub type BuildProgressFn = Arc<dyn Fn(BuildProgress) + Send + Sync>;

/// One lock per tag: concurrent starts of one project build once.
fn tag_lock(tag: &str) -> Arc<tokio::sync::Mutex<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> = OnceLock::new();
    let mut locks = LOCKS.get_or_init(Default::default).lock().unwrap();
    locks.entry(tag.to_string()).or_default().clone()
}

/// Walk the context of `build` in `workspace` (hash, size, files).
pub async fn walk(workspace: &Path, build: &ProjectBuild) -> Result<Context> {
    let (ws, b) = (workspace.to_path_buf(), build.clone());
    tokio::task::spawn_blocking(move || context::walk(&ws, &b.context, &b.dockerfile, &b.args))
        .await
        .map_err(|e| Error::BuildContext {
            path: build.context.clone(),
            message: e.to_string(),
        })?
}

/// Make the project image of `build` present for `project` (its workspace,
/// egress and limits): reused when its tag exists, else built, confined
/// (see the module doc). `reason` says why this build applies (for the
/// card); `on_denial` hears of what the build's egress proxy denies.
pub async fn ensure(
    engine: &Engine,
    docker: &DockerClient,
    project: &Config,
    build: &ProjectBuild,
    reason: &str,
    progress: &BuildProgressFn,
    on_denial: DenialFn,
) -> Result<ImageChoice> {
    let workspace = &project.workspace;
    let ctx = walk(workspace, build).await?;
    if !project.build_add_urls {
        refuse_fetches(project, build, &ctx)?;
    }
    let tag = project_tag(workspace, &ctx.hash);
    let mut choice = ImageChoice {
        name: tag.clone(),
        why: crate::images::build::why(build, reason, &ctx.hash),
        ..Default::default()
    };
    let lock = tag_lock(&tag);
    let _held = lock.lock().await;
    if present(docker, &tag).await? {
        return Ok(choice);
    }
    let started = Instant::now();
    let confined = confine(engine, docker, &ctx, project, &tag, on_denial).await?;
    let labels = labels(WORKSPACE_LABEL, workspace, &ctx.hash);
    run_build(docker, build, ctx, &tag, labels, progress, &confined).await?;
    choice.build_ms = Some(started.elapsed().as_millis() as u64);
    remove_older(docker, WORKSPACE_LABEL, workspace, &tag).await;
    Ok(choice)
}

/// A Dockerfile whose `ADD` fetches a URL, refused in one line naming it.
fn refuse_fetches(project: &Config, build: &ProjectBuild, ctx: &Context) -> Result<()> {
    let Some(fetch) = crate::images::dockerfile::first_fetch(ctx.dockerfile_text()) else {
        return Ok(());
    };
    let own = match &project.user_file {
        Some(f) => format!(" ({})", f.display()),
        None => String::new(),
    };
    Err(Error::BuildContext {
        path: build.dockerfile.clone(),
        message: format!(
            "line {}: `{}` would have the engine fetch a URL from its own host, past the project's egress; fetch it in a RUN step (under the egress policy), or allow URL sources with build_add_urls = true in your own berth config{own}",
            fetch.line,
            crate::inert::visible(&fetch.instruction)
        ),
    })
}

async fn present(docker: &DockerClient, tag: &str) -> Result<bool> {
    match docker.inspect_image(tag).await {
        Ok(_) => Ok(true),
        Err(e) if e.engine_status() == Some(404) => Ok(false),
        Err(e) => Err(e),
    }
}

/// A `Write` that hands the tar to the request body in chunks.
struct ChannelWriter {
    tx: tokio::sync::mpsc::Sender<std::io::Result<Bytes>>,
    buf: Vec<u8>,
}

impl ChannelWriter {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::take(&mut self.buf));
        // The receiver is gone when the engine stopped reading (a cancelled build).
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the build request ended"))
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

/// The labels of a build: `kind` naming the workspace (old builds of the
/// same kind are removed after a new one), and the build's hash.
fn labels(kind: &str, workspace: &Path, hash: &str) -> HashMap<String, String> {
    HashMap::from([
        (kind.to_string(), workspace.display().to_string()),
        ("berth.project.hash".to_string(), hash.to_string()),
    ])
}

async fn run_build(
    docker: &DockerClient,
    build: &ProjectBuild,
    ctx: Context,
    tag: &str,
    labels: HashMap<String, String>,
    progress: &BuildProgressFn,
    confined: &Confined,
) -> Result<()> {
    let failed = |reason: String| Error::ImageBuildFailed {
        dockerfile: build.dockerfile.clone(),
        reason,
    };
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let opts = options(build, &ctx, tag, labels, confined);
    let writer = tokio::task::spawn_blocking(move || {
        let mut w = ChannelWriter {
            tx,
            buf: Vec::with_capacity(CHUNK),
        };
        let wrote = ctx.write_tar(&mut w);
        if let Err(e) = &wrote {
            // Ends the request: the engine never builds from a cut context.
            let _ =
                w.tx.blocking_send(Err(std::io::Error::new(e.kind(), e.to_string())));
        }
        wrote
    });
    let body = tokio_stream::wrappers::ReceiverStream::new(rx);
    let mut p = BuildProgress {
        image: tag.into(),
        dockerfile: build.dockerfile.clone(),
        ..Default::default()
    };
    let stream = Box::pin(docker.build_image(tag, opts, body));
    let outcome = follow(docker, stream, &mut p, progress, confined.pids).await;
    // The context changed while berth sent it: berth's own words, not the
    // engine's about a request cut short. (A broken pipe is the engine
    // having stopped reading: its own error says why.)
    if let Ok(Err(e)) = writer.await
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        let _ = docker.remove_image(tag).await;
        return Err(Error::BuildContext {
            path: build.context.clone(),
            message: e.to_string(),
        });
    }
    if let Err(reason) = outcome {
        let at = match p.steps {
            0 => String::new(),
            m => format!(" (at step {}/{m}: {})", p.step, p.instruction),
        };
        return Err(failed(format!("{reason}{at}")));
    }
    // A stream can end without an error and without the image (engine cut off).
    if !present(docker, tag).await? {
        return Err(failed("the build ended but the image is not there".into()));
    }
    p.done = true;
    progress(p);
    Ok(())
}

/// The build's query: the tag, labels, args and confinement.
fn options(
    build: &ProjectBuild,
    ctx: &Context,
    tag: &str,
    labels: HashMap<String, String>,
    c: &Confined,
) -> BuildImageOptions {
    let mut args: HashMap<String, String> = build.args.clone().into_iter().collect();
    args.extend(c.proxy_args.iter().cloned());
    BuildImageOptions {
        dockerfile: ctx.dockerfile_in_tar.clone(),
        t: Some(tag.into()),
        rm: true,
        // Intermediate containers go even when a step fails: nothing is left behind.
        forcerm: true,
        buildargs: Some(args),
        labels: Some(labels),
        networkmode: Some(c.network.clone()),
        memory: c.memory,
        // No swap on top of the limit, as for jobs.
        memswap: c.memory,
        cpuperiod: c.cpu_quota.map(|_| 100_000),
        cpuquota: c.cpu_quota,
        ..Default::default()
    }
}

/// Fold the build's output into `p` (reported through `progress`), giving
/// each step's container the `pids` limit as soon as it is named; the
/// engine's error line, if the build failed.
async fn follow(
    docker: &DockerClient,
    mut stream: impl futures_util::Stream<Item = Result<bollard::models::BuildInfo>> + Unpin,
    p: &mut BuildProgress,
    progress: &BuildProgressFn,
    pids: Option<i64>,
) -> std::result::Result<(), String> {
    let started = Instant::now();
    progress(p.clone());
    let mut throttle = Throttle::new();
    // A step berth stopped for having more processes than `pids` when the
    // limit landed: the build's error says so before the engine's words.
    let mut stopped = None;
    let said = |stopped: Option<u64>, engine: &str| match (stopped, pids) {
        (Some(n), Some(limit)) => format!(
            "a RUN step had {n} processes before its limit of {limit} could be set, so berth stopped it: {}",
            last_line(engine)
        ),
        _ => last_line(engine),
    };
    while let Some(item) = throttle.next(&mut stream, || progress(p.clone())).await {
        let info = match item {
            Ok(info) => info,
            // The builder's own error comes as a stream error: its words, unwrapped.
            Err(e) => return Err(said(stopped, &e.engine_reason())),
        };
        if let Some(detail) = &info.error_detail {
            return Err(said(stopped, detail.message.as_deref().unwrap_or_default()));
        }
        for text in [info.stream.as_deref(), info.status.as_deref()]
            .into_iter()
            .flatten()
        {
            for line in text.lines() {
                if let (Some(id), Some(pids)) = (line.trim().strip_prefix("---> Running in "), pids) {
                    stopped = stopped.or(limit_step(docker, id.trim(), pids).await);
                }
                p.add_line(line);
            }
        }
        p.elapsed_ms = started.elapsed().as_millis() as u64;
        throttle.changed(|| progress(p.clone()));
    }
    p.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(())
}

/// The step container `id` gets the project's process limit (the build API
/// has none; see `confine.rs`). The limit lands after the step started, and
/// a lowered limit leaves the processes already there: a step found over
/// it then (a fork loop outrunning berth under load) is killed, so no step
/// keeps more processes than a job could. Its process count, if so.
async fn limit_step(docker: &DockerClient, id: &str, pids: i64) -> Option<u64> {
    if let Err(e) = docker.limit_pids(id, pids).await {
        // A step that ended already needs none.
        tracing::debug!(container = id, error = %e, "a build step's process limit was not set");
        return None;
    }
    let opts = StatsOptions {
        stream: false,
        one_shot: true,
    };
    let stats = docker.stats(id, opts).next().await?.ok()?;
    let count = stats.pids_stats?.current?;
    if count <= u64::try_from(pids).unwrap_or(0) {
        return None;
    }
    let kill = KillContainerOptions {
        signal: "KILL".into(),
    };
    if let Err(e) = docker.kill_container(id, kill).await {
        tracing::debug!(container = id, error = %e, "a build step over its process limit was not stopped");
    }
    Some(count)
}

/// The last non-empty line of an engine message (builds can answer with several).
fn last_line(msg: &str) -> String {
    msg.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("the engine reported an error")
        .to_string()
}

/// Remove this workspace's other images of the `kind` label (older
/// contexts); one a container still uses stays (the engine refuses
/// without force).
async fn remove_older(docker: &DockerClient, kind: &str, workspace: &Path, keep: &str) {
    let filters = HashMap::from([(
        "label".to_string(),
        vec![format!("{kind}={}", workspace.display())],
    )]);
    let opts = ListImagesOptions {
        filters: Some(filters),
        ..Default::default()
    };
    let Ok(images) = docker.list_images(opts).await else {
        return;
    };
    for image in images {
        if image.repo_tags.iter().any(|t| t == keep) {
            continue;
        }
        for t in &image.repo_tags {
            if let Err(e) = docker.remove_image(t).await {
                tracing::debug!(error = %e, "older project image kept");
            }
        }
    }
}

#[cfg(test)]
mod tests;
