//! Spare containers (`warm_pool`): a started container kept ready per job
//! shape, which the next job of that shape takes instead of a create and
//! start (~0.1 s of the engine's, more under load).
//!
//! A spare is made by the ordinary launch (`make`) for a job spec with
//! the shape's image, limits, network, egress, workspace, write mode and
//! runtime, whose command is [`WAITER`]: POSIX `sh` reading a script from
//! stdin to its end and running it. A job that takes the spare writes its
//! script there (its environment exported, `cd` to its directory, `exec`
//! of its argv, every word single-quoted) and closes stdin; the shell then
//! *is* the job, under the same init, so its output, exit code, signals,
//! stop and removal are a cold job's. What berth runs beside the
//! container is the job's own: its port listeners are bound and its
//! egress proxy started at the take, its `/etc` files rewritten with its
//! id, its environment computed as a cold create would set it.
//!
//! What a warm job cannot keep: the container's name and labels are the
//! spare's (`warm-…`; the record has the container id), its kernel
//! hostname is the neutral word a pause-joined job has, it has no DNS alias
//! on its network, and a command that is not found exits 127 with the
//! shell's message instead of failing the start. Cold, always: a job with
//! input, `-v` mounts, a scoped engine, `layer` mode, a pod (MCP
//! sessions), a remote engine, ports the engine publishes, or a variable
//! name `sh` cannot export; and any job when no spare of its shape is
//! ready. A shape whose spare died unasked (an image without `sh`) is not
//! made again. Spares are made by a long-lived manager only, after a job
//! of their shape started, and removed after `warm_idle`, at shutdown and,
//! after a crash, by the labelled sweeps (they carry the instance's labels).

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::models::ContainerCreateBody;
use tokio::io::AsyncWriteExt;

use super::super::create::{self, Context};
use super::super::{DockerClient, Engine, Sandbox, pod, reach, remote, remove_container};
use super::prepare::{self, Prepared};
use super::started::{self, Made};
use super::{Job, make};
use crate::error::Result;
use crate::model::{Egress, JobId, JobSpec, WriteMode};
use crate::output::JobOutput;
use crate::runner::Launched;

/// Most spares at once, of every shape: a caller who varies its jobs'
/// limits makes a shape per job, never more spares than this.
const MAX_SPARES: usize = 16;

/// What a spare runs until a job takes it: its script read to the end of
/// stdin, line by line (`read -r` keeps backslashes), then evaluated.
const WAITER: &str = "s=\nwhile IFS= read -r l; do s=\"$s$l\n\"; done\neval \"$s$l\"\n";

/// The spares of one engine, by shape.
pub struct Spares {
    state: Mutex<State>,
    /// Spares kept per shape; 0: none.
    size: usize,
    /// How long a spare waits for a job before it is removed.
    idle: Duration,
    /// Where spares keep their `/etc` files (`<instance>/warm`).
    dir: PathBuf,
    serial: AtomicU64,
    /// How many spares are being made, of every shape: shutdown waits
    /// for 0 (a spare made after it is removed at once).
    making: tokio::sync::watch::Sender<usize>,
    tasks: tokio_util::task::TaskTracker,
}

#[derive(Default)]
struct State {
    ready: HashMap<String, Vec<Spare>>,
    /// Spares being made, by shape.
    making: HashMap<String, usize>,
    /// Shapes whose spare died unasked: not made again.
    refused: HashSet<String>,
    closed: bool,
}

/// One started spare and what its launch made.
pub(super) struct Spare {
    serial: u64,
    dir: PathBuf,
    prepared: Prepared,
    made: Made,
    protect_warnings: Vec<String>,
}

/// A spare being made, counted in `making` until dropped.
struct Making<'a>(&'a Spares, String);

impl Drop for Making<'_> {
    fn drop(&mut self) {
        let mut st = self.0.state.lock().unwrap();
        if let Some(n) = st.making.get_mut(&self.1) {
            *n = n.saturating_sub(1);
        }
        self.0.making.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Spares {
    pub fn new(size: usize, idle: Duration, dir: PathBuf) -> Spares {
        Spares {
            state: Mutex::default(),
            size,
            idle,
            dir,
            serial: AtomicU64::new(0),
            making: tokio::sync::watch::channel(0).0,
            tasks: tokio_util::task::TaskTracker::new(),
        }
    }

    /// Spares are kept at all.
    pub fn wanted(&self) -> bool {
        self.size > 0 && !self.state.lock().unwrap().closed
    }

    /// How many spares are ready now.
    pub fn ready(&self) -> usize {
        self.state.lock().unwrap().ready.values().map(Vec::len).sum()
    }

    /// A ready spare of `shape`; one that died meanwhile is removed, and
    /// its shape not made again.
    pub(super) fn take(self: &Arc<Self>, docker: &DockerClient, shape: &str) -> Option<Spare> {
        let mut st = self.state.lock().unwrap();
        while let Some(spare) = st.ready.get_mut(shape)?.pop() {
            if !spare.made.started.wait.is_finished() {
                return Some(spare);
            }
            tracing::warn!(
                shape,
                "a spare container ended unasked; this shape starts cold from now on"
            );
            st.refused.insert(shape.to_string());
            self.discard_later(docker, spare);
        }
        None
    }

    /// Count a spare of `shape` as being made, unless enough are.
    fn begin(&self, shape: &str) -> Option<Making<'_>> {
        let mut st = self.state.lock().unwrap();
        let have = st.ready.get(shape).map_or(0, Vec::len) + st.making.get(shape).copied().unwrap_or(0);
        let all = st.ready.values().map(Vec::len).sum::<usize>() + *self.making.borrow();
        if st.closed || have >= self.size || all >= MAX_SPARES || st.refused.contains(shape) {
            return None;
        }
        *st.making.entry(shape.to_string()).or_default() += 1;
        self.making.send_modify(|n| *n += 1);
        Some(Making(self, shape.to_string()))
    }

    /// Keep a made spare until a job takes it or `idle` passed.
    fn put(self: &Arc<Self>, docker: &DockerClient, shape: String, spare: Spare) {
        let serial = spare.serial;
        {
            let mut st = self.state.lock().unwrap();
            if !st.closed {
                st.ready.entry(shape.clone()).or_default().push(spare);
                drop(st);
                let (me, docker) = (self.clone(), docker.clone());
                self.tasks.spawn(async move {
                    tokio::time::sleep(me.idle).await;
                    me.expire(&docker, &shape, serial);
                });
                return;
            }
        }
        self.discard_later(docker, spare);
    }

    /// Remove spare `serial` of `shape` if no job took it.
    fn expire(self: &Arc<Self>, docker: &DockerClient, shape: &str, serial: u64) {
        let mut st = self.state.lock().unwrap();
        let Some(list) = st.ready.get_mut(shape) else {
            return;
        };
        if let Some(i) = list.iter().position(|s| s.serial == serial) {
            let spare = list.swap_remove(i);
            self.discard_later(docker, spare);
        }
    }

    fn discard_later(&self, docker: &DockerClient, spare: Spare) {
        let docker = docker.clone();
        self.tasks.spawn(async move { discard(&docker, spare).await });
    }

    /// Shutdown: every spare removed, the ones being made waited for (a
    /// made one finds the pool closed and goes at once).
    pub async fn close(&self, docker: &DockerClient) {
        let spares: Vec<Spare> = {
            let mut st = self.state.lock().unwrap();
            st.closed = true;
            st.ready.drain().flat_map(|(_, v)| v).collect()
        };
        futures_util::future::join_all(spares.into_iter().map(|s| discard(docker, s))).await;
        let mut making = self.making.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(10), making.wait_for(|n| *n == 0)).await;
        self.tasks.close();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.tasks.wait()).await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Remove a spare's container, then give back its network and proxy.
async fn discard(docker: &DockerClient, spare: Spare) {
    let Spare {
        dir, prepared, made, ..
    } = spare;
    made.started.wait.abort();
    remove_container(docker, &made.started.container_id).await;
    if let Some(p) = &made.proxy {
        p.close();
    }
    drop((made, prepared));
    let _ = std::fs::remove_dir_all(dir);
}

/// The shape a spare for this job would have; `None` when the job must
/// start cold (see the module docs).
pub(super) fn shape(job: &Job<'_>) -> Option<String> {
    (job.engine.spares.wanted() && fits(job, job.spec)).then(|| key(job))
}

/// `spec` may take a spare (or have one made) in `job`'s sandbox.
fn fits(job: &Job<'_>, spec: &JobSpec) -> bool {
    let project = job.project;
    let decision = project.decide(spec);
    let argv = spec.effective_argv();
    job.scope.is_none()
        && spec.input.is_none()
        && spec.mounts.is_empty()
        && project.layer.is_none()
        && spec.write != Some(WriteMode::Layer)
        && remote::remote_host(&job.engine.endpoint).is_none()
        && (!decision.engine_publishes || spec.ports.is_empty())
        && pod::key_of(spec, &decision, project.workspace, (true, false)).is_none()
        && spec.env.iter().all(|(k, v)| exportable(k) && !v.contains('\0'))
        && !argv.iter().any(|a| a.contains('\0'))
}

/// A name POSIX `sh` can export.
fn exportable(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What a spare and the job that takes it must agree on: everything the
/// container is made with that the job's script cannot set.
fn key(job: &Job<'_>) -> String {
    let (spec, project) = (job.spec, job.project);
    let limits = (
        spec.limits.cpus.or(project.defaults.cpus),
        spec.limits.memory.or(project.defaults.memory),
        spec.limits.pids.or(project.defaults.pids),
    );
    let workspace = std::fs::canonicalize(project.workspace).unwrap_or(project.workspace.to_path_buf());
    format!(
        "{}\n{}\n{}\n{limits:?}\n{:?}\n{:?}\n{}\n{:?}\n{:x}",
        job.image,
        project.user,
        workspace.display(),
        project.decide(&normal(spec)),
        spec.write.unwrap_or_default(),
        spec.read_only || project.read_only,
        job.runtime,
        protected_print(job),
    )
}

/// The protected files as they are now (`protect.rs`): a spare's copies
/// were made of these, so a change since means its copies are stale.
fn protected_print(job: &Job<'_>) -> u64 {
    let mut h = DefaultHasher::new();
    if job.spec.write.unwrap_or_default() != WriteMode::Direct {
        return 0;
    }
    let ws = job.project.workspace;
    let extra = job.project.protect.iter().filter_map(|p| p.strip_prefix(ws).ok());
    let mut budget = 0;
    for rel in super::super::protect::PROTECTED
        .iter()
        .map(Path::new)
        .chain(extra)
    {
        print(&ws.join(rel), &mut h, &mut budget);
    }
    h.finish()
}

fn print(path: &Path, h: &mut DefaultHasher, budget: &mut usize) {
    *budget += 1;
    // Past what a protected directory may hold it is not copied at all.
    if *budget > 4 * super::super::protect::MAX_FILES {
        return;
    }
    path.hash(h);
    let Ok(m) = std::fs::symlink_metadata(path) else {
        return 0u8.hash(h);
    };
    (
        m.ino(),
        m.size(),
        m.mode(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    )
        .hash(h);
    if m.is_dir()
        && let Ok(entries) = std::fs::read_dir(path)
    {
        let mut names: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        names.sort();
        for n in names {
            print(&n, h, budget);
        }
    }
}

/// The spec a spare is made from: `spec`'s shape, [`WAITER`] as its
/// command, stdin open for the script.
fn normal(spec: &JobSpec) -> JobSpec {
    JobSpec {
        argv: vec!["/bin/sh".into(), "-c".into(), WAITER.into()],
        shell: None,
        env: Default::default(),
        ports: Vec::new(),
        input: Some(String::new()),
        keep_alive: None,
        ready: Vec::new(),
        watch: Vec::new(),
        owner: None,
        label: None,
        client_ref: None,
        ..spec.clone()
    }
}

/// Make one spare of `spec`'s shape, unless enough are ready or being made.
pub(in super::super) async fn fill(
    engine: &Engine,
    docker: DockerClient,
    spec: &JobSpec,
    cwd: &Path,
    project: &Sandbox<'_>,
) {
    let spares = &engine.spares;
    let serial = spares.serial.fetch_add(1, Ordering::Relaxed);
    let id = JobId(format!("warm-{}-{serial}", std::process::id()));
    let dir = spares.dir.join(id.as_str());
    let shaped = normal(spec);
    let job = match Job::new(engine, docker.clone(), (&id, &shaped, dir.clone()), project, None).await {
        Ok(job) if fits(&job, spec) => job,
        Ok(_) => return tracing::debug!("this job's shape starts cold"),
        Err(e) => return tracing::debug!(error = %e, "no spare container"),
    };
    let shape = key(&job);
    let Some(_making) = spares.begin(&shape) else {
        return tracing::debug!("enough spare containers of this shape");
    };
    if let Err(e) = crate::store::private::own_dir(&dir) {
        return tracing::debug!(error = %e, "no directory for a spare container");
    }
    let claim = engine.claims.claim(&id);
    match make(&job, cwd, true).await {
        Ok((prepared, mut made, protect_warnings)) => {
            made.claim = Some(claim);
            let spare = Spare {
                serial,
                dir,
                prepared,
                made,
                protect_warnings,
            };
            spares.put(&docker, shape, spare);
        }
        Err(e) => {
            tracing::debug!(error = %e, "a spare container could not be made");
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// Start `job` in `spare`. `Ok(None)`: the spare had gone (removed, its
/// job starts cold); a failure of the job's own (a taken port) removes
/// the spare and is the launch's.
pub(super) async fn start(
    job: &Job<'_>,
    cwd: &Path,
    output: &Arc<JobOutput>,
    spare: Spare,
) -> Result<Option<Launched>> {
    let Spare {
        serial,
        dir,
        mut prepared,
        mut made,
        protect_warnings,
    } = spare;
    match hand_over(job, cwd, &dir, &mut prepared, &mut made).await {
        Ok(true) => {
            let mut launched = started::finish(job, output, prepared, made, protect_warnings).await?;
            launched.limits.warm = true;
            Ok(Some(launched))
        }
        gone_or_failed => {
            let spare = Spare {
                serial,
                dir,
                prepared,
                made,
                protect_warnings,
            };
            discard(&job.docker, spare).await;
            gone_or_failed.map(|_| None)
        }
    }
}

/// Make the spare the job's: its listeners, its proxy, its `/etc` files,
/// and its script written. `Ok(false)`: the spare's container had gone.
async fn hand_over(
    job: &Job<'_>,
    cwd: &Path,
    dir: &Path,
    prepared: &mut Prepared,
    made: &mut Made,
) -> Result<bool> {
    let (engine, project) = (job.engine, job.project);
    let (plan, bound) = prepare::ports(job, &prepared.decision, false)?;
    (prepared.plan, prepared.bound) = (plan, bound);
    if let Some(p) = made.proxy.take() {
        p.close();
    }
    if let (Egress::Proxy, Some(slot)) = (prepared.decision.egress, &prepared.slot) {
        let proxy = reach::start_proxy(job.id.as_str(), &slot.addr, &slot.name, &project.rules, 0)?;
        made.proxy = Some(proxy);
    }
    let attach = reach::attach(
        job.id,
        &prepared.decision,
        made.joined.as_ref(),
        dir,
        made.proxy.as_ref(),
    )?;
    let ctx = Context {
        id: job.id,
        image: &job.image,
        instance: &engine.instance,
        owner: &engine.owner,
        state: engine.state(),
        user: &project.user,
        network: "",
        default_network: project.network,
        defaults: project.defaults,
        workspace: project.workspace,
        cwd,
        attach: &attach,
        read_only: project.read_only,
        protected: &[],
        pinned: &[],
        runtime: job.runtime.as_deref(),
        engine: None,
        remote: None,
        layer: None,
    };
    let (body, _) = create::body(job.spec, &ctx, &prepared.plan)?;
    let input = &mut made.started.input;
    let sent = async {
        input.write_all(script(&body).as_bytes()).await?;
        input.flush().await?;
        input.shutdown().await
    };
    Ok(sent.await.is_ok() && !made.started.wait.is_finished())
}

/// The job's script for [`WAITER`]: what a cold create would set, said in
/// `sh`, every word single-quoted.
fn script(body: &ContainerCreateBody) -> String {
    let mut s = String::new();
    for kv in body.env.iter().flatten() {
        s += &format!("export {}\n", quote(kv));
    }
    if let Some(wd) = &body.working_dir {
        s += &format!("cd {} || exit 126\n", quote(wd));
    }
    s += "exec";
    for word in body.cmd.iter().flatten() {
        s.push(' ');
        s += &quote(word);
    }
    s.push('\n');
    s
}

/// `word` as one `sh` word, whatever it holds (but NUL, refused before).
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests;
