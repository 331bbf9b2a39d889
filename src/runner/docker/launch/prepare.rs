//! What a launch makes before its first create: a remote engine's copy of
//! the workspace, the decision how the job is networked, the port plan and
//! berth's own listeners (bound first, so a taken host port is known at
//! once), the job's seat in its session's pod, the pool network of its own,
//! and read-only copies of the project's config files. Everything here is
//! given back again when the launch fails (dropped in the reverse order it
//! was made).

use std::path::Path;
use std::sync::Arc;

use bollard::models::Mount;

use super::super::create::{self, PortPlan};
use super::super::pod::{self, Joined, LeaveOnDrop, Member, Pod};
use super::super::reach::Decision;
use super::super::remote::{self, RemoteJob};
use super::super::slot::Slot;
use super::Job;
use crate::error::Result;
use crate::model::Network;
use crate::net::{Want, forward};

/// The job's network and ports as made before the first create. Fields
/// are declared in the reverse order they are made: a failed launch gives
/// back the latest first.
pub(super) struct Prepared {
    /// A pool network of its own (`isolated`, the default), unless in a pod.
    pub slot: Option<Slot>,
    /// Given up however this launch ends (a failed one included).
    pub member: Option<LeaveOnDrop>,
    pub pod: Option<Arc<Pod>>,
    /// Why the job is in no pod although it would be (`not_enforced`).
    pub pod_note: Option<String>,
    /// berth's own listeners, released again if the launch fails.
    pub bound: Option<forward::BoundPorts>,
    pub plan: Vec<PortPlan>,
    /// The job may join its network's pause (`pause.rs`).
    pub may_join: bool,
    pub decision: Decision,
    /// A remote engine's job (remote.rs).
    pub remote: Option<RemoteJob>,
}

impl Prepared {
    /// Make the job's network and ports ready, in the order that matters:
    /// listeners before anything of the engine's, the pod before a network
    /// of the job's own.
    pub async fn make(job: &Job<'_>) -> Result<Prepared> {
        let (engine, spec, project) = (job.engine, job.spec, job.project);
        // A remote engine's job (remote.rs): the workspace uploaded, its ports
        // published on the engine host and relayed from berth's listeners.
        let remote = match remote::remote_host(&engine.endpoint) {
            Some(_) if spec.write == Some(crate::model::WriteMode::ReadOnly) => {
                return Err(crate::error::Error::InvalidSpec(
                    "read-only on a remote engine: its workspace is an uploaded copy, written as it arrives; use --write layer (the job's changes come back into a layer, the checkout untouched)".into(),
                ));
            }
            Some(_) => {
                let layer = project.layer.map(|l| l.meta.name.as_str());
                Some(
                    RemoteJob::prepare(job.id, &engine.endpoint, project.workspace, &project.user, layer)
                        .await?,
                )
            }
            None => None,
        };
        let decision = match &remote {
            None => project.decide(spec),
            Some(_) => remote::decide(spec, project.network, project.egress),
        };
        let (plan, bound) = ports(job, &decision, remote.is_some())?;
        // Unless the engine publishes its ports, the job may join the
        // network's pause (pause.rs): the engine then sets up no network for
        // it. A remote engine's jobs never do (a pause's files are this machine's).
        let may_join = remote.is_none() && (!decision.engine_publishes || plan.is_empty());
        let (member, pod_note) = join_pod(job, &decision, remote.is_none()).await?;
        let pod = member.as_ref().map(|m| m.pod.clone());
        let member = member.map(LeaveOnDrop::new);
        // A pool network of its own (`isolated`, the default): one running
        // container per berth network, see network.rs; internal unless the
        // job's egress is `all` (reach.rs decides).
        let slot = match decision.network == Network::Isolated && member.is_none() {
            true => Some(
                engine
                    .acquire_network(&job.docker, decision.internal, may_join)
                    .await?,
            ),
            false => None,
        };
        Ok(Prepared {
            slot,
            member,
            pod,
            pod_note,
            bound,
            plan,
            may_join,
            decision,
            remote,
        })
    }
}

/// The port plan and, unless the engine publishes the ports, berth's own
/// listeners for them, bound before anything is made.
pub(super) fn ports(
    job: &Job<'_>,
    decision: &Decision,
    remote: bool,
) -> Result<(Vec<PortPlan>, Option<forward::BoundPorts>)> {
    let mut plan = create::plan_ports(
        job.spec,
        job.engine.precheck_ports && decision.engine_publishes && !remote,
    )?;
    // berth's own listeners, before anything is made: released again if
    // the launch fails.
    let bound = match (decision.engine_publishes && !remote) || plan.is_empty() {
        true => None,
        false => Some(forward::bind(job.id.as_str(), &wants(&plan))?),
    };
    if remote {
        // The asked host port is berth's listener here; the engine picks its own.
        plan.iter_mut().for_each(|p| p.host_port = None);
    }
    Ok((plan, bound))
}

/// A job of an MCP session joins its session's pod (pod/) instead of
/// taking a network of its own; when it cannot, why (the job's note).
async fn join_pod(
    job: &Job<'_>,
    decision: &Decision,
    local: bool,
) -> Result<(Option<Member>, Option<String>)> {
    let key = pod::key_of(
        job.spec,
        decision,
        job.project.workspace,
        (local, job.scope.is_some()),
    );
    let Some(key) = key else {
        return Ok((None, None));
    };
    let joined = job
        .engine
        .pods
        .join(
            job.engine,
            &job.docker,
            key,
            decision,
            (job.id, job.spec),
            job.project.image,
        )
        .await?;
    Ok(match joined {
        Joined::In(m) => (Some(m), None),
        Joined::Outside(why) => (None, Some(why)),
    })
}

/// Copies of the project's config files, mounted read-only over them, and
/// what could not be protected.
pub(super) fn protected_files(job: &Job<'_>, remote: bool) -> (Vec<Mount>, Vec<String>) {
    let protect_dir = job.dir.join("protected");
    match crate::store::private::own_dir(&protect_dir) {
        // The job's copy of the workspace is read back by nothing of the caller's.
        Ok(()) if remote => (Vec::new(), Vec::new()),
        Ok(()) => {
            let extra: Vec<&Path> = job.project.protect.iter().map(|p| p.as_path()).collect();
            super::super::protect::mounts(job.project.workspace, &extra, &protect_dir)
        }
        Err(e) => (
            Vec::new(),
            vec![format!("project files are not protected from the job: {e}")],
        ),
    }
}

/// What berth's forwarder listens for: the plan's ports, asked host ports
/// included (a taken one is replaced, with a note).
fn wants(plan: &[PortPlan]) -> Vec<Want> {
    plan.iter()
        .map(|p| Want {
            port: p.port,
            proto: p.proto,
            host_port: p.host_port,
            note: p.note.clone(),
            // At start, an asked host port is the caller's own choice.
            strict: true,
        })
        .collect()
}
