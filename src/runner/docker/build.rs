//! Building a project image on the engine: the context is walked and hashed
//! off the async workers (`images::context`), an image already tagged with
//! that hash is reused as it is, else the tar is streamed to the engine's
//! classic builder while its output is folded into [`BuildProgress`]
//! reports. A failed build is one error naming the Dockerfile and the
//! engine's last error line; intermediate containers are always removed
//! (`forcerm`) and no tag is left, so nothing of a failed build is used. One
//! build per tag at a time in this process: a second job asking for the same
//! context waits and then reuses it. After a build, older images of the same
//! workspace are removed (unless a container still uses them).
//!
//! A build runs the project's `RUN` steps, which a job could have written:
//! it is sandboxed like a job (and only ever starts from a file the user
//! trusted, see `crate::trust`). Its steps get the project's CPU and memory
//! limits, and no network at all when the Dockerfile runs nothing; one that
//! does runs on the instance's own build bridge (`…-net-build`, no traffic
//! between its containers, removed with the job networks), never on the
//! engine's default bridge beside other containers. The classic builder's
//! API has no process limit and no capability list: SECURITY.md says so.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use super::DockerClient;
use bollard::query_parameters::{BuildImageOptions, ListImagesOptions};
use bytes::Bytes;

use super::throttle::Throttle;
use super::{Engine, network};
use crate::error::{Error, Result};
use crate::images::build::{WORKSPACE_LABEL, project_tag};
use crate::images::context::{self, Context};
use crate::images::{BuildProgress, ImageChoice, ProjectBuild};
use crate::model::Limits;

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

/// Whether a Dockerfile runs commands (then its build may need a network).
pub fn runs_commands(dockerfile: &[u8]) -> bool {
    String::from_utf8_lossy(dockerfile).lines().any(|l| {
        let word = l.split_whitespace().next().unwrap_or("");
        // ONBUILD RUN triggers run in builds FROM this image, not this one.
        word.eq_ignore_ascii_case("RUN")
    })
}

/// The network and limits a build's steps get (see the module doc).
struct Confined {
    network: String,
    memory: Option<i32>,
    cpu_quota: Option<i32>,
}

async fn confine(engine: &Engine, docker: &DockerClient, ctx: &Context, limits: &Limits) -> Result<Confined> {
    let network = match runs_commands(ctx.dockerfile_text()) {
        false => "none".to_string(),
        true => {
            static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
            let _one = LOCK.lock().await;
            engine
                .used_network
                .store(true, std::sync::atomic::Ordering::SeqCst);
            let name = format!("{}-build", engine.pool.prefix());
            // A build's RUN steps fetch packages: a NAT'd network, not an internal one.
            network::ensure(docker, &name, &engine.ownership, false).await?;
            name
        }
    };
    // The engine's build API takes 32-bit sizes: at most 2 GiB − 1 byte.
    let memory = limits.memory.map(|m| m.min(i32::MAX as u64) as i32);
    let cpu_quota = limits
        .cpus
        .map(|c| (c * 100_000.0).round().clamp(1_000.0, i32::MAX as f64) as i32);
    Ok(Confined {
        network,
        memory,
        cpu_quota,
    })
}

/// Make the project image of `build` present: reused when its tag exists,
/// else built, confined to `limits` (see the module doc). `reason` says why
/// this build applies (for the card).
pub async fn ensure(
    engine: &Engine,
    docker: &DockerClient,
    workspace: &Path,
    build: &ProjectBuild,
    reason: &str,
    progress: &BuildProgressFn,
    limits: &Limits,
) -> Result<ImageChoice> {
    let ctx = walk(workspace, build).await?;
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
    let confined = confine(engine, docker, &ctx, limits).await?;
    run_build(docker, workspace, build, ctx, &tag, progress, confined).await?;
    choice.build_ms = Some(started.elapsed().as_millis() as u64);
    remove_older(docker, workspace, &tag).await;
    Ok(choice)
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

async fn run_build(
    docker: &DockerClient,
    workspace: &Path,
    build: &ProjectBuild,
    ctx: Context,
    tag: &str,
    progress: &BuildProgressFn,
    confined: Confined,
) -> Result<()> {
    let failed = |reason: String| Error::ImageBuildFailed {
        dockerfile: build.dockerfile.clone(),
        reason,
    };
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let dockerfile = ctx.dockerfile_in_tar.clone();
    let hash = ctx.hash.clone();
    let writer = tokio::task::spawn_blocking(move || {
        let mut w = ChannelWriter {
            tx,
            buf: Vec::with_capacity(CHUNK),
        };
        if let Err(e) = ctx.write_tar(&mut w) {
            let _ = w.tx.blocking_send(Err(e));
        }
    });
    let body = tokio_stream::wrappers::ReceiverStream::new(rx);
    let opts = BuildImageOptions {
        dockerfile,
        t: Some(tag.into()),
        rm: true,
        // Intermediate containers go even when a step fails: nothing is left behind.
        forcerm: true,
        buildargs: Some(build.args.clone().into_iter().collect()),
        labels: Some(HashMap::from([
            (WORKSPACE_LABEL.to_string(), workspace.display().to_string()),
            ("berth.project.hash".to_string(), hash),
        ])),
        networkmode: Some(confined.network),
        memory: confined.memory,
        // No swap on top of the limit, as for jobs.
        memswap: confined.memory,
        cpuperiod: confined.cpu_quota.map(|_| 100_000),
        cpuquota: confined.cpu_quota,
        ..Default::default()
    };
    let mut p = BuildProgress {
        image: tag.into(),
        dockerfile: build.dockerfile.clone(),
        ..Default::default()
    };
    let started = Instant::now();
    progress(p.clone());
    let mut stream = Box::pin(docker.build_image(tag, opts, body));
    let mut outcome = Ok(());
    let mut throttle = Throttle::new();
    while let Some(item) = throttle.next(&mut stream, || progress(p.clone())).await {
        let info = match item {
            Ok(info) => info,
            // The builder's own error comes as a stream error: its words, unwrapped.
            Err(e) => {
                outcome = Err(last_line(&e.engine_reason()));
                break;
            }
        };
        if let Some(detail) = &info.error_detail {
            let msg = detail.message.clone().unwrap_or_default();
            outcome = Err(last_line(&msg));
            break;
        }
        for text in [info.stream.as_deref(), info.status.as_deref()]
            .into_iter()
            .flatten()
        {
            for line in text.lines() {
                p.add_line(line);
            }
        }
        p.elapsed_ms = started.elapsed().as_millis() as u64;
        throttle.changed(|| progress(p.clone()));
    }
    drop(stream);
    let _ = writer.await;
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
    p.elapsed_ms = started.elapsed().as_millis() as u64;
    progress(p);
    Ok(())
}

/// The last non-empty line of an engine message (builds can answer with several).
fn last_line(msg: &str) -> String {
    msg.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("the engine reported an error")
        .to_string()
}

/// Remove this workspace's other project images (older contexts); one a
/// container still uses stays (the engine refuses without force).
async fn remove_older(docker: &DockerClient, workspace: &Path, keep: &str) {
    let filters = HashMap::from([(
        "label".to_string(),
        vec![format!("{WORKSPACE_LABEL}={}", workspace.display())],
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
