//! A container job's environment: HOME, line-buffered output, the scoped
//! engine's variables, the ports' numbers, what the job's network sets
//! (`HOSTNAME`, the proxy's variables), file watchers set to poll in
//! `layer` mode, and last the job's own, which win.

use super::{Context, PortPlan};
use crate::model::JobSpec;

/// The job's environment in the order it is set; a name the spec sets is
/// the spec's alone.
pub(super) fn environment(
    spec: &JobSpec,
    ctx: &Context<'_>,
    ports: &[PortPlan],
    home: &str,
) -> Vec<(String, String)> {
    // PORT/BERTH_PORT_N name the container port: inside the container the
    // server binds its own port; the host side is the engine's business.
    // The job's own env wins, as on the host runner.
    let mut env: Vec<(String, String)> = vec![("HOME".into(), home.to_string())];
    env.extend(
        crate::runner::LINE_BUFFERED
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    if let Some(engine) = ctx.engine {
        env.extend(engine.env.iter().cloned());
    }
    if let Some(first) = ports.first() {
        env.push(("PORT".into(), first.port.to_string()));
    }
    for p in ports {
        env.push((format!("BERTH_PORT_{}", p.port), p.port.to_string()));
    }
    env.extend(ctx.attach.env.iter().cloned());
    if spec.write == Some(crate::model::WriteMode::Layer) {
        env.extend(
            crate::runner::LAYER_POLLING
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
    }
    env.retain(|(k, _)| !spec.env.contains_key(k));
    env.extend(spec.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}
