//! What a project build's steps get. A build runs the project's `RUN`
//! steps, which the agent may have written, so they get what a job of the
//! project would get, as far as the classic builder's API allows:
//!
//! - **Network**, by the project's egress: no `RUN` at all, `egress =
//!   "none"`, `network = "none"`, or `proxy` on a remote engine (as for
//!   its jobs: the proxy would listen on the engine host) → the engine's
//!   `none`; `proxy` → the instance's internal build network
//!   (`…-build-in`: no route out, no traffic between its containers) whose
//!   only way out is an egress proxy of the build's own on its gateway,
//!   with the project's allowlist, passed to the steps as the standard
//!   proxy build args (denials reported as a job's are); `all` (only where
//!   the user allowed it: a project file's `egress = "all"` needs trust) →
//!   the NAT'd build bridge (`…-build`), never the engine's default bridge.
//! - **Memory and CPU**: the project's limits (memory at most 2 GiB − 1, the
//!   API's 32-bit bound), no swap on top.
//! - **Processes**: the build API has no pids limit, and an `nproc` ulimit
//!   does not bind root (a `RUN` step's default user); so each step's
//!   container gets the project's pids limit through the engine's `update`
//!   as soon as the builder names it (`---> Running in …`), milliseconds
//!   after it starts; a step already over the limit by then is killed
//!   (`build.rs`).
//! - **Capabilities**: the API has no list; steps keep the engine's default
//!   set (SECURITY.md says which and why).

use super::super::reach::{self, EgressRules};
use super::super::slot::NetAddr;
use super::super::{DockerClient, Engine, network};
use crate::config::Config;
use crate::error::Result;
use crate::images::context::Context;
use crate::model::{Egress, Network};
use crate::net::{Allowlist, DenialFn, Proxy};

/// The network, limits and proxy a build's steps get (see the module doc).
pub struct Confined {
    pub network: String,
    pub memory: Option<i32>,
    pub cpu_quota: Option<i32>,
    pub pids: Option<i64>,
    /// The proxy's build args (`HTTP_PROXY`…), with `egress = "proxy"`.
    pub proxy_args: Vec<(String, String)>,
    /// The build's egress proxy, open while it runs.
    pub proxy: Option<Proxy>,
}

impl Drop for Confined {
    fn drop(&mut self) {
        if let Some(p) = &self.proxy {
            p.close();
        }
    }
}

/// Whether a Dockerfile runs commands (then its build may need a network).
pub fn runs_commands(dockerfile: &[u8]) -> bool {
    String::from_utf8_lossy(dockerfile).lines().any(|l| {
        let word = l.split_whitespace().next().unwrap_or("");
        // ONBUILD RUN triggers run in builds FROM this image, not this one.
        word.eq_ignore_ascii_case("RUN")
    })
}

/// The confinement of the build of `ctx` for `project` (`tag` names it in
/// the proxy's messages).
pub async fn confine(
    engine: &Engine,
    docker: &DockerClient,
    ctx: &Context,
    project: &Config,
    tag: &str,
    on_denial: DenialFn,
) -> Result<Confined> {
    let limits = &project.limits;
    let mut confined = Confined {
        network: "none".into(),
        // The engine's build API takes 32-bit sizes: at most 2 GiB − 1 byte.
        memory: limits.memory.map(|m| m.min(i32::MAX as u64) as i32),
        cpu_quota: limits
            .cpus
            .map(|c| (c * 100_000.0).round().clamp(1_000.0, i32::MAX as f64) as i32),
        pids: limits.pids,
        proxy_args: Vec::new(),
        proxy: None,
    };
    let remote = super::super::remote::remote_host(&engine.endpoint).is_some();
    let egress = match (project.network, project.egress) {
        (Network::None, _) => Egress::None,
        // The proxy would listen on the engine host's bridge: as for a
        // remote engine's jobs, `proxy` is `none` there.
        (_, Egress::Proxy) if remote => Egress::None,
        (_, egress) => egress,
    };
    if !runs_commands(ctx.dockerfile_text()) || egress == Egress::None {
        return Ok(confined);
    }
    let internal = egress == Egress::Proxy;
    let name = match internal {
        true => format!("{}-build-in", engine.pool.prefix()),
        false => format!("{}-build", engine.pool.prefix()),
    };
    let id = {
        static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        let _one = LOCK.lock().await;
        engine
            .used_network
            .store(true, std::sync::atomic::Ordering::SeqCst);
        network::ensure(docker, &name, &engine.ownership, internal).await?
    };
    confined.network = name.clone();
    if internal {
        let addr = NetAddr::of(&docker.inspect_network(&id).await?);
        let rules = EgressRules {
            allow: Allowlist::parse(&project.egress_allow)?,
            deny: reach::endpoint_addr(engine.endpoint()),
            on_denial,
        };
        let proxy = reach::start_proxy(&format!("the build of {tag}"), &addr, &name, &rules, 0)?;
        // Docker's predefined build args: no `ARG` needed, kept out of the
        // image's history and cache key.
        confined.proxy_args = reach::proxy_env(proxy.addr());
        confined.proxy = Some(proxy);
    }
    Ok(confined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_run_step_needs_a_network() {
        assert!(runs_commands(b"FROM x\n  run make\n"));
        assert!(!runs_commands(b"FROM x\nONBUILD RUN make\nCOPY . /\n"));
    }
}
