//! What a launched job reports back while it starts and runs: pull and
//! build progress (on its record and as events), the requests its egress
//! proxy denies and its scoped engine refuses (in the security log). Kept
//! apart from `start.rs`, which hands these to the runner.

use std::path::Path;
use std::sync::Arc;

use super::Inner;
use super::project::Project;
use crate::events::EventKind;
use crate::model::{JobId, JobSpec};

/// Every request a job's scoped engine refused, in the security log (the
/// job itself asked: its id is the client).
pub(super) fn follow_refusals(
    project: &Project,
    id: &JobId,
    spec: &JobSpec,
    cwd: &Path,
    mut refusals: tokio::sync::mpsc::Receiver<crate::runner::docker::Refused>,
) {
    let safety = project.safety.clone();
    let (job, command, cwd) = (id.to_string(), spec.display_command(), cwd.to_path_buf());
    tokio::spawn(async move {
        while let Some(r) = refusals.recv().await {
            safety.log_engine(&job, &command, &cwd, &r.endpoint, &r.field, &r.reason);
        }
    });
}

/// Pull progress of job `id`: kept on its record (`starting (pulling)`) and
/// emitted as a `pulling` event (the pull throttles how often).
pub(super) fn pull_reporter(inner: &Arc<Inner>, id: &JobId) -> crate::runner::docker::ProgressFn {
    let inner = Arc::downgrade(inner);
    let id = id.clone();
    Arc::new(move |p: crate::images::PullProgress| {
        let Some(inner) = inner.upgrade() else { return };
        if let Ok(e) = inner.registry.lock().unwrap().get_mut(&id) {
            e.info.pulling = Some(p.clone());
        }
        inner.events.emit(id.clone(), EventKind::Pulling(p));
    })
}

/// Requests job `id`'s egress proxy denies: written to the security log
/// (kind `egress`) and emitted as an `egress_denied` event the agent sees.
pub(super) fn egress_reporter(
    inner: &Arc<Inner>,
    id: &JobId,
    spec: &JobSpec,
    project: &Project,
    cwd: &Path,
) -> crate::net::DenialFn {
    let inner = Arc::downgrade(inner);
    let (id, command, cwd) = (id.clone(), spec.display_command(), cwd.to_path_buf());
    let safety = project.safety.clone();
    // Bounded (`denials.rs`): a flood cannot rotate earlier refusals away.
    let limiter = super::denials::Limiter::new(Box::new(move |request: &str, target: &str, reason: &str| {
        safety.log_egress(id.as_str(), &command, &cwd, request, target, reason);
        if let Some(inner) = inner.upgrade() {
            inner.events.emit(
                id.clone(),
                EventKind::EgressDenied {
                    request: request.to_string(),
                    reason: reason.to_string(),
                },
            );
        }
    }));
    Arc::new(move |d: crate::net::Denial| {
        let target = format!("{}:{}", d.host, d.port);
        limiter.deny(&d.request(), &target, &d.reason, std::time::Instant::now());
    })
}

/// Build progress of job `id`'s project image: kept on its record
/// (`starting (building)`) and emitted as a `building` event.
pub(super) fn build_reporter(inner: &Arc<Inner>, id: &JobId) -> crate::runner::docker::BuildProgressFn {
    let inner = Arc::downgrade(inner);
    let id = id.clone();
    Arc::new(move |p: crate::images::BuildProgress| {
        let Some(inner) = inner.upgrade() else { return };
        if let Ok(e) = inner.registry.lock().unwrap().get_mut(&id) {
            e.info.building = Some(p.clone());
        }
        inner.events.emit(id.clone(), EventKind::Building(p));
    })
}
