//! The create rounds of one launch: each round puts the egress proxy on
//! the job's network, writes what the network gives the container, and asks
//! the engine to create and start it (`attempt.rs`). A failed round either
//! mends what it found (a network removed meanwhile is made again, a gone
//! pause is forgotten, a leftover with the job's name is cleared) and the
//! next round runs, or ends the launch with the engine's failure.

use std::path::Path;
use std::sync::Arc;

use bollard::models::Mount;

use super::super::attempt::{AttemptError, Started, attempt};
use super::super::create::{Context, PortPlan};
use super::super::pod::{LeaveOnDrop, Pod};
use super::super::reach::{self, Attach, Decision};
use super::super::remote::RemoteJob;
use super::super::scoped::{Scope, Setup};
use super::super::slot::{Pause, Slot};
use super::super::{DockerClient, Engine, Sandbox, pause, remove_container};
use crate::error::{Error, Result};
use crate::model::{Egress, JobId, JobSpec};

/// Everything one launch's create rounds read, and the little they change
/// between rounds (the network, the proxy on it, the container's name).
pub(super) struct Attempts<'a> {
    pub engine: &'a Engine,
    pub docker: &'a DockerClient,
    pub id: &'a JobId,
    pub spec: &'a JobSpec,
    pub cwd: &'a Path,
    pub project: &'a Sandbox<'a>,
    pub scope: Option<&'a Scope>,
    pub image: &'a str,
    pub decision: &'a Decision,
    pub remote: Option<&'a RemoteJob>,
    pub plan: &'a [PortPlan],
    /// The job may join its network's pause (`pause.rs`).
    pub may_join: bool,
    /// The session's pod the job is in, and its seat there.
    pub pod: Option<&'a Arc<Pod>>,
    pub member: Option<&'a LeaveOnDrop>,
    pub job_dir: &'a Path,
    /// Read-only copies of the project's config files (`protect.rs`).
    pub protected: &'a [Mount],
    /// What the engine mounts for each `-v` (`pins.rs`).
    pub pinned: &'a [std::path::PathBuf],
    /// The engine runtime (`gvisor.rs`); `None`: its default.
    pub runtime: Option<&'a str>,
    /// `layer` mode on this machine's engine: the volume that mounts it.
    pub layer: Option<&'a super::super::layer::LayerMount>,
    pub name: String,
    /// Declared before `slot`, so a failed launch drops it first.
    pub proxy: Option<crate::net::Proxy>,
    pub slot: Option<Slot>,
    /// How often a network removed meanwhile is made again.
    pub network_retries: u32,
    /// A leftover with the job's name was cleared once already.
    pub cleared: bool,
    /// The image, found gone at a create, was made present again once.
    pub image_again: bool,
    /// A spare made ahead for a later job (`spare.rs`): its kernel
    /// hostname is the neutral word, and it has no name on its network.
    pub spare: bool,
}

impl Attempts<'_> {
    /// Create rounds until one starts the container (with the pause it
    /// joined, if any) or one fails for good.
    pub async fn run(&mut self) -> Result<(Started, Option<Pause>)> {
        loop {
            let joined = self.joined();
            if !self.proxy_on_network().await? {
                continue;
            }
            let attach = self.attach(joined.as_ref())?;
            let network = self.network_mode(joined.as_ref());
            let engine_setup = self.engine_setup().await?;
            let ctx = Context {
                id: self.id,
                image: self.image,
                instance: &self.engine.instance,
                owner: &self.engine.owner,
                state: self.engine.state(),
                user: &self.project.user,
                network: &network,
                default_network: self.project.network,
                defaults: self.project.defaults,
                workspace: self.project.workspace,
                cwd: self.cwd,
                attach: &attach,
                read_only: self.project.read_only,
                protected: self.protected,
                pinned: self.pinned,
                runtime: self.runtime,
                engine: engine_setup.as_ref(),
                remote: self.remote,
                layer: self.layer,
            };
            match attempt(self.docker, self.spec, &ctx, &self.name, self.plan).await {
                Ok(s) => return Ok((s, joined)),
                Err(e) => self.recover(e, joined.as_ref()).await?,
            }
        }
    }

    /// The pause this round's container joins: its pod's, or its network's
    /// when it may join one.
    fn joined(&self) -> Option<Pause> {
        match self.pod {
            Some(pod) => Some(pod.pause.clone()),
            None => self
                .slot
                .as_ref()
                .and_then(|s| s.pause.clone())
                .filter(|_| self.may_join),
        }
    }

    /// The egress proxy on this network's gateway (made again when a retry
    /// moved the job to another network). `Ok(false)`: the network had been
    /// removed meanwhile and was made again; the round starts over.
    async fn proxy_on_network(&mut self) -> Result<bool> {
        // Where the job's network is: its slot's, or its pod's.
        let net = match (self.pod, &self.slot) {
            (Some(pod), _) => Some((pod.addr, pod.network.as_str())),
            (None, Some(s)) => Some((s.addr, s.name.as_str())),
            (None, None) => None,
        };
        let (Egress::Proxy, Some((addr, net_name))) = (self.decision.egress, net) else {
            return Ok(true);
        };
        if self.proxy.as_ref().map(|p| p.addr().ip()) == addr.gateway {
            return Ok(true);
        }
        match reach::start_proxy(self.id.as_str(), &addr, net_name, &self.project.rules, 0) {
            Ok(p) => self.proxy = Some(p),
            // A network known from before was removed meanwhile (its
            // gateway address went with it): make it again.
            Err(e) if address_gone(&e) && self.network_retries > 0 && self.pod.is_none() => {
                self.remake_network(&e).await?;
                return Ok(false);
            }
            Err(e) => return Err(e),
        }
        Ok(true)
    }

    /// What the job's network gives this round's container: its `/etc`
    /// files, the pod's hosts file, the proxy's variables.
    fn attach(&self, joined: Option<&Pause>) -> Result<Attach> {
        let mut attach = reach::attach(self.id, self.decision, joined, self.job_dir, self.proxy.as_ref())?;
        if let Some(m) = self.member.and_then(LeaveOnDrop::member) {
            // The pod's hosts file, which names every member, for its own.
            reach::in_pod(&mut attach, m.pod.hosts_file(), &m.names);
        }
        if self.remote.is_some() {
            // Files of this machine's: the engine's own /etc files instead.
            attach.mounts.clear();
        }
        if self.spare {
            // The job that takes it is not known yet: nothing of the
            // spare's own id stays visible to it.
            attach.hostname = attach.hostname.map(|_| reach::PAUSE_HOSTNAME.to_string());
            attach.alias = None;
        }
        Ok(attach)
    }

    /// The engine's network mode for this round: the joined pause's
    /// namespace, the slot's network, or none of berth's.
    fn network_mode(&self, joined: Option<&Pause>) -> String {
        match (joined, &self.slot) {
            (Some(h), _) => format!("container:{}", h.id),
            (None, Some(s)) => s.id.clone(),
            (None, None) => String::new(),
        }
    }

    /// The scoped engine's socket and variables, for this round's network.
    async fn engine_setup(&self) -> Result<Option<Setup>> {
        match (self.scope, &self.slot) {
            (Some(scope), Some(s)) => Ok(Some(scope.setup(&s.id).await?)),
            (Some(_), None) => Err(Error::InvalidSpec(
                "a scoped engine needs the job's own network (network isolated)".into(),
            )),
            (None, _) => Ok(None),
        }
    }

    /// What a failed round means: `Ok` when it was mended and the next
    /// round may run, else the launch's failure.
    async fn recover(&mut self, failed: AttemptError, joined: Option<&Pause>) -> Result<()> {
        match failed {
            // The pod's pause went away: the pod is forgotten (the
            // session's next job makes another) and this start fails.
            AttemptError::Other(e) | AttemptError::NetworkGone(e)
                if self.member.is_some() && joined.is_some_and(|h| pause::is_gone(&e, h)) =>
            {
                if let Some(m) = self.member.and_then(LeaveOnDrop::member) {
                    m.broken();
                }
                Err(e)
            }
            // The pause went away (removed by hand, the engine restarted):
            // forget it and start the ordinary way on the same network.
            AttemptError::Other(e) | AttemptError::NetworkGone(e)
                if joined.is_some_and(|h| pause::is_gone(&e, h)) =>
            {
                tracing::debug!(job = %self.id, error = %e, "pause container gone; starting on the network itself");
                if let Some(s) = self.slot.as_mut() {
                    self.engine
                        .pool_of(self.decision.internal)
                        .pauses
                        .forget(self.docker, s.index());
                    s.pause = None;
                }
                Ok(())
            }
            AttemptError::NetworkGone(e) if self.network_retries > 0 && self.slot.is_some() => {
                self.remake_network(&e).await
            }
            // Out of retries: the engine's failure as it came.
            AttemptError::NetworkGone(e) => Err(e),
            AttemptError::PortTaken(e) => Err(self.port_taken(e)),
            AttemptError::NameTaken if !self.cleared => self.rename_or_clear().await,
            AttemptError::NameTaken => Err(Error::Docker {
                action: "create container",
                job: self.id.to_string(),
                message: format!(
                    "the name {} is still taken after its leftover was removed",
                    self.name
                ),
            }),
            AttemptError::ImageGone(_) if !self.image_again => self.image_again().await,
            AttemptError::ImageGone(e) | AttemptError::Other(e) => Err(e),
        }
    }

    /// The image was seen before, and is gone now (`docker rmi`): forget
    /// it and make it present as the job's policy says (a pull, or the
    /// error that says why not), as the look before the start would have.
    async fn image_again(&mut self) -> Result<()> {
        tracing::debug!(job = %self.id, image = self.image, "the image went away; making it present again");
        self.image_again = true;
        self.engine.present.forget(self.image);
        let policy = self.spec.pull.unwrap_or(self.project.pull);
        let quiet: super::super::ProgressFn = Arc::new(|_| {});
        let limit = self.engine.pull_timeout;
        super::super::pull::ensure(self.docker, self.image, false, policy, limit, &quiet).await?;
        self.engine.present.saw(self.image);
        Ok(())
    }

    /// The job's network was removed meanwhile: forget it and take another.
    async fn remake_network(&mut self, e: &Error) -> Result<()> {
        tracing::debug!(job = %self.id, error = %e, "job network removed meanwhile; making it again");
        self.network_retries -= 1;
        if let Some(gone) = self.slot.take() {
            self.engine.pool_of(self.decision.internal).forget(&gone);
        }
        self.slot = Some(
            self.engine
                .acquire_network(self.docker, self.decision.internal, self.may_join)
                .await?,
        );
        Ok(())
    }

    /// A host port the engine found taken: an asked one is the caller's
    /// choice, so refused by its number rather than another port picked.
    fn port_taken(&self, e: Error) -> Error {
        let Some(asked) = self.plan.iter().find(|p| p.host_port.is_some()) else {
            return e;
        };
        tracing::debug!(job = %self.id, error = %e, "asked host port taken");
        Error::PortInUse {
            port: asked.host_port.unwrap_or_default(),
            job_port: asked.port,
        }
    }

    /// A container already has the job's name: cleared when it is a
    /// leftover of berth's, else the job takes another name.
    async fn rename_or_clear(&mut self) -> Result<()> {
        // Ids are never reused, so this is rare (a state dir reset
        // while its containers stayed): checked only when it happens.
        self.cleared = true;
        if !clear_leftover(self.engine, self.docker, &self.name).await? {
            // Someone else's container squats the name (a job can
            // guess the next id): never touch it, take another name.
            let name = &self.name;
            tracing::warn!(job = %self.id, %name, "a container that is not berth's has this job's name; using another");
            self.name = format!("{name}-{}", unique_suffix());
        }
        Ok(())
    }
}

/// True when a listen failed because its address is not on this machine
/// (any more): the network whose gateway it was is gone.
fn address_gone(e: &Error) -> bool {
    matches!(e, Error::Listen { source, .. } if source.kind() == std::io::ErrorKind::AddrNotAvailable)
}

/// A container with this job's name is a leftover of this instance and
/// state dir (ids are never reused) and is cleared; one whose labels say
/// otherwise is never touched: the launch fails naming it.
/// `Ok(false)`: the container with the name is someone else's (left alone).
async fn clear_leftover(engine: &Engine, docker: &DockerClient, name: &str) -> Result<bool> {
    match docker.inspect_container(name).await {
        Ok(c)
            if engine
                .ownership
                .owns(c.config.as_ref().and_then(|c| c.labels.as_ref())) =>
        {
            remove_container(docker, name).await;
            Ok(true)
        }
        Ok(_) => Ok(false),
        Err(e) if e.engine_status() == Some(404) => Ok(true),
        Err(e) => Err(e),
    }
}

/// A suffix no one can have guessed: time and process, in hex.
fn unique_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64 ^ d.as_secs());
    format!("{:x}", nanos ^ ((std::process::id() as u64) << 32))
}
