//! Pause containers: one idle container per pool network whose network
//! namespace the next job joins (`network_mode = container:<pause>`), so
//! that job skips the engine's network setup.
//!
//! Why: on a user-defined bridge the engine spends ~100 ms per container on
//! its endpoint and embedded DNS resolver (iptables run inside the new
//! namespace), which made an `isolated` job slower than `docker run` on the
//! default bridge. Joining a namespace that already has all of it takes
//! ~10 ms. Isolation is unchanged: a pool network still serves one job at a
//! time (its [`Slot`] is held while the job runs), the pause is on that
//! network alone, and it is not a job (an idle `sleep`, no capabilities,
//! read-only, nobody's uid). A job with published ports joins one too when
//! berth forwards its ports (the default); one whose ports the engine
//! publishes (`publish = "engine"`) never does: the engine publishes ports
//! only for a container with a network of its own. A joined job gets its
//! own `/etc/hosts`, `resolv.conf` and `hostname` (etc.rs), never the
//! pause's; its kernel hostname is the pause's, which the engine copies
//! and the job cannot change: the same neutral word for every pause.
//!
//! Lifecycle: only a long-lived manager (the daemon, an MCP host) warms
//! pauses ([`super::Engine::keep_warm`]). When a job on a pool network without
//! a pause ended, a pause is made on that network while the slot stays
//! held; the slot is then given back with its pause. The pause runs the
//! instance's default image (never a job's: it shares its namespace with
//! later jobs, so what runs in it must not be a job's choice), and only when
//! that image is present (no pull). A pause that vanished (removed by hand) is
//! forgotten and the job starts the ordinary way. Every pause carries the
//! instance's labels plus `berth.pause`, and goes at teardown: manager
//! shutdown and drop ([`Pauses::close`], [`sweep`]), `berth down` and the
//! crash watchdog (the labelled sweeps), before the networks they sit on.
//! A pod's pause (`pod/`) is made from the same recipe (plus a
//! `berth.pod` label) but belongs to its pod, not to this pool: swept alike.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{CreateContainerOptions, ListContainersOptions};

use super::DockerClient;
use super::client::{remove_all, remove_container};
use super::ownership::{LABEL_STATE, Ownership};
pub use super::slot::Pause;
use super::slot::Slot;
use super::{LABEL_INSTANCE, LABEL_MANAGED, LABEL_OWNER};
use crate::error::{EngineFailure, Error, Result};

pub use super::ownership::LABEL_PAUSE;
/// How long teardown waits for pauses still being made.
const WARMING_LIMIT: Duration = Duration::from_secs(5);
/// How long a job that can join a pause waits for one being made.
pub const JOIN_WAIT: Duration = Duration::from_secs(2);

/// One pause being made: `warming` is counted down when it drops.
struct Warming(Arc<Pauses>);

impl Drop for Warming {
    fn drop(&mut self) {
        self.0.warming.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// The pauses of one engine, by pool slot.
pub struct Pauses {
    state: Mutex<State>,
    /// How many pauses are being made now: counted up under `state`'s
    /// lock (with `closing` looked at), down by their task's guard however
    /// it ends, a panic included; waited on to reach 0.
    warming: tokio::sync::watch::Sender<usize>,
    /// The tasks making and removing pauses.
    tasks: tokio_util::task::TaskTracker,
}

impl Default for Pauses {
    fn default() -> Self {
        Pauses {
            state: Mutex::default(),
            warming: tokio::sync::watch::channel(0).0,
            tasks: tokio_util::task::TaskTracker::new(),
        }
    }
}

#[derive(Default)]
struct State {
    by_slot: BTreeMap<u32, Pause>,
    /// Set at teardown: nothing new is made, what is made meanwhile is removed.
    closing: bool,
    /// Images a pause cannot run from (absent, no `sleep`): not tried again.
    unable: BTreeSet<String>,
}

/// What a pause is made of and labelled with.
#[derive(Clone)]
pub struct Recipe {
    pub image: String,
    pub ownership: Ownership,
    pub owner: String,
    /// The session whose pod the pause holds (pod/), labelled `berth.pod`.
    pub pod: Option<String>,
}

impl Pauses {
    /// The pause of slot `n`, if any.
    pub fn of(&self, n: u32) -> Option<Pause> {
        self.state.lock().ok()?.by_slot.get(&n).cloned()
    }

    /// True when slot `n` has a pause.
    pub fn has(&self, n: u32) -> bool {
        self.state.lock().is_ok_and(|s| s.by_slot.contains_key(&n))
    }

    /// Slot `n`'s pause was found gone (or unusable): forget it, and
    /// remove what is left of it in the background.
    pub fn forget(&self, docker: &DockerClient, n: u32) {
        let gone = self.state.lock().ok().and_then(|mut s| s.by_slot.remove(&n));
        if let Some(h) = gone {
            let docker = docker.clone();
            self.tasks
                .spawn(async move { remove_container(&docker, &h.id).await });
        }
    }

    /// Give `slot` back with a pause on its network, made now in the
    /// background (the slot stays held meanwhile, so no job lands on the
    /// network half-way). Without a pause (teardown began, the image cannot
    /// hold, the engine refused) the slot is given back as it is.
    pub fn warm(self: &Arc<Self>, docker: DockerClient, slot: Slot, recipe: Recipe) {
        let go = self.state.lock().is_ok_and(|s| {
            let go =
                !s.closing && !s.unable.contains(&recipe.image) && !s.by_slot.contains_key(&slot.index());
            if go {
                self.warming.send_modify(|n| *n += 1);
            }
            go
        });
        if !go {
            slot.vacate();
            return;
        }
        let this = self.clone();
        // Counted down however the task ends, a panic included: teardown
        // waits for `warming` to reach 0.
        let warming = Warming(self.clone());
        self.tasks.spawn(async move {
            let _warming = warming;
            let made = make(&docker, &slot, &recipe).await;
            let mut stray = None;
            if let Ok(mut s) = this.state.lock() {
                match made {
                    Ok(h) if s.closing => stray = Some(h.id),
                    Ok(h) => {
                        s.by_slot.insert(slot.index(), h);
                    }
                    Err(e) => {
                        tracing::debug!(image = %recipe.image, error = %e, "no pause container made");
                        // An absent image or one without `sleep` will not
                        // hold next time either; other failures (a busy
                        // engine) may pass.
                        if cannot_hold(&e) {
                            s.unable.insert(recipe.image.clone());
                        }
                    }
                }
            }
            if let Some(id) = stray {
                remove_container(&docker, &id).await;
            }
            slot.vacate();
        });
    }

    /// Wait (at most `limit`) until no pause is being made. A job that can
    /// join one waits for the pause of the job that just ended rather than
    /// making a network of its own, which costs as much and grows the pool.
    pub async fn settle(&self, limit: Duration) {
        let mut warming = self.warming.subscribe();
        let _ = tokio::time::timeout(limit, warming.wait_for(|n| *n == 0)).await;
    }

    /// Teardown: make no more, wait (bounded) for those being made, then
    /// remove every pause of this engine.
    pub async fn close(&self, docker: &DockerClient) {
        self.begin_close();
        self.settle(WARMING_LIMIT).await;
        let held: Vec<Pause> = self
            .state
            .lock()
            .map(|mut s| std::mem::take(&mut s.by_slot).into_values().collect())
            .unwrap_or_default();
        remove_all(docker, held.iter().map(|h| h.id.as_str())).await;
    }

    /// From synchronous teardown: no new pause is kept from now on.
    pub fn begin_close(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.closing = true;
        }
    }
}

/// Make, start and read back a pause on `slot`'s network. Whatever was
/// made is removed again when a step fails.
pub(super) async fn make(docker: &DockerClient, slot: &Slot, recipe: &Recipe) -> Result<Pause> {
    let mut labels = HashMap::from([
        (LABEL_MANAGED.to_string(), "true".to_string()),
        (LABEL_INSTANCE.to_string(), recipe.ownership.instance.clone()),
        (LABEL_STATE.to_string(), recipe.ownership.state.clone()),
        (LABEL_OWNER.to_string(), recipe.owner.clone()),
        (LABEL_PAUSE.to_string(), slot.name.clone()),
    ]);
    if let Some(pod) = &recipe.pod {
        labels.insert(super::ownership::LABEL_POD.to_string(), pod.clone());
    }
    let memory = 16 * 1024 * 1024;
    let body = ContainerCreateBody {
        image: Some(recipe.image.clone()),
        // Idle for ~68 years: any `sleep` takes a plain number of seconds.
        entrypoint: Some(vec!["sleep".into()]),
        hostname: Some(super::reach::PAUSE_HOSTNAME.into()),
        cmd: Some(vec!["2147483647".into()]),
        user: Some("65534:65534".into()),
        labels: Some(labels),
        host_config: Some(HostConfig {
            init: Some(true),
            network_mode: Some(slot.id.clone()),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(vec!["no-new-privileges".into()]),
            readonly_rootfs: Some(true),
            memory: Some(memory),
            memory_swap: Some(memory),
            pids_limit: Some(8),
            nano_cpus: Some(100_000_000),
            auto_remove: Some(false),
            ..Default::default()
        }),
        ..Default::default()
    };
    // Named after its network (what `docker ps` shows), unique per process.
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let name = format!(
        "{}-pause-{}-{}",
        slot.name,
        std::process::id(),
        MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let opts = CreateContainerOptions {
        name: Some(name.clone()),
        ..Default::default()
    };
    let created = docker.create_container(&name, opts, body).await?;
    let ready = async {
        docker.start_container(&created.id).await?;
        let inspected = docker.inspect_container(&created.id).await?;
        Ok::<_, crate::Error>(super::client::container_ip(&inspected))
    }
    .await;
    match ready {
        Ok(ip) => Ok(Pause { id: created.id, ip }),
        Err(e) => {
            remove_container(docker, &created.id).await;
            Err(e)
        }
    }
}

/// Remove the pauses of `owner`'s instance and state dir that no live
/// manager keeps: this process's own (its teardown) and those of managers
/// that died. Another live manager's pauses (a `berth run` beside the
/// daemon) are left to it. Returns how many were removed.
pub async fn sweep(docker: &DockerClient, owner: &Ownership) -> usize {
    let mut labels = owner.filters();
    labels.push(LABEL_PAUSE.to_string());
    let opts = ListContainersOptions {
        all: true,
        filters: Some(HashMap::from([("label".to_string(), labels)])),
        ..Default::default()
    };
    let Ok(list) = docker.list_containers(opts).await else {
        return 0;
    };
    let me = crate::procinfo::owner_label();
    let stale = list.iter().filter(|c| {
        let by = c.labels.as_ref().and_then(|l| l.get(LABEL_OWNER));
        by.is_none_or(|o| *o == me || !crate::procinfo::owner_alive(o))
    });
    remove_all(docker, stale.filter_map(|c| c.id.as_deref())).await
}

/// True when the engine's error says the image has no `sleep` to run.
fn cannot_hold(e: &Error) -> bool {
    matches!(
        e.engine_failure(),
        EngineFailure::NotInImage | EngineFailure::NoSuchFile | EngineFailure::ImageMissing
    )
}

/// True when a create or start that joined `pause` failed because the
/// pause is gone or stopped (the job then starts the ordinary way).
pub fn is_gone(e: &Error, pause: &Pause) -> bool {
    let short = &pause.id[..pause.id.len().min(12)];
    // By status first (404 no such container, 409 non running). The id in
    // the words covers answers whose status does not blame the pause: moby's
    // 409 `Container <id> is restarting` reads as a name conflict.
    e.engine_failure() == EngineFailure::ContainerGone || e.engine_reason().contains(short)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vanished_or_stopped_pause_is_told_from_other_failures() {
        let h = Pause {
            id: "0123456789abcdef0123".into(),
            ip: None,
        };
        let engine = |status: u16, message: &str| Error::Engine {
            op: crate::error::EngineOp::CreateContainer,
            target: "berth-pause".into(),
            source: bollard::errors::Error::DockerResponseServerError {
                status_code: status,
                message: message.into(),
            },
        };
        assert!(is_gone(
            &engine(404, "No such container: 0123456789abcdef0123"),
            &h
        ));
        assert!(is_gone(
            &engine(
                409,
                "cannot join network of a non running container: 0123456789ab"
            ),
            &h
        ));
        assert!(!is_gone(&engine(404, "No such image: busybox:latest"), &h));
        // A 409 blames the pause only when it names it (restarting).
        assert!(is_gone(
            &engine(
                409,
                "Container 0123456789abcdef0123 is restarting, wait until the container is running"
            ),
            &h
        ));
        assert!(!is_gone(
            &engine(
                409,
                "Conflict. The container name \"/berth-t1-job-1\" is already in use by container \"abc\""
            ),
            &h
        ));
        assert!(!is_gone(&engine(500, "port is already allocated"), &h));
        assert!(cannot_hold(&engine(
            400,
            "exec: \"sleep\": executable file not found in $PATH"
        )));
        assert!(!cannot_hold(&engine(500, "the engine is busy")));
    }
}
