//! Where a job runs and what it may use, as every tool set says it: each set
//! fills the core's one [`RunRequest`](crate::model::RunRequest) from its own
//! argument names (`run`, `run_background`, `safe_shell`, the exec `shell`
//! spawn), which turns them into the `JobSpec` as `berth run`'s flags are,
//! with one parser per value. Here are the choices a tool's schema shows
//! ([`RunnerArg`], [`EngineArg`]) and MCP's own rule: what an agent asks can
//! only tighten the sandbox, so a looser network than the project's is
//! refused ([`check_network`], applied at the start); `read_only` can only
//! be switched on (the request's rule), and host runners and scoped engines
//! stay behind the user's switches (admission).

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::model::{EngineAccess, Network, RunnerChoice};

/// Where a job runs.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunnerArg {
    /// Docker when the engine answers, else the host.
    Auto,
    /// A container with limits (image default berth/sandbox:latest).
    Docker,
    /// A plain process group on this machine.
    Host,
    /// A one-replica service on the swarm whose manager DOCKER_HOST names
    /// (only where the user's config says `runner = "swarm"`).
    Swarm,
}

/// Engine access a job asks for.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EngineArg {
    /// No engine inside the job (default).
    None,
    /// An engine socket of the job's own at /var/run/docker.sock (DOCKER_HOST set): its tests
    /// (testcontainers) start, reach and remove containers of the job's own, and nothing else.
    /// Allowed only where the user's config says engine = "scoped" or allow_engine = true.
    Scoped,
}

impl From<EngineArg> for EngineAccess {
    fn from(e: EngineArg) -> Self {
        match e {
            EngineArg::None => EngineAccess::None,
            EngineArg::Scoped => EngineAccess::Scoped,
        }
    }
}

impl EngineArg {
    /// The word a request carries (the CLI's `--engine` takes the same).
    pub fn word(self) -> String {
        EngineAccess::from(self).as_str().into()
    }
}

impl RunnerArg {
    /// The word a request carries (the CLI's `--runner` takes the same).
    pub fn word(self) -> String {
        RunnerChoice::from(self).as_str().into()
    }
}

impl From<RunnerArg> for RunnerChoice {
    fn from(r: RunnerArg) -> Self {
        match r {
            RunnerArg::Auto => RunnerChoice::Auto,
            RunnerArg::Docker => RunnerChoice::Docker,
            RunnerArg::Host => RunnerChoice::Host,
            RunnerArg::Swarm => RunnerChoice::Swarm,
        }
    }
}

/// An agent may ask for no network, a network of the job's own, or the
/// project's: never a looser one (`bridge`, where jobs reach each other,
/// unless the project says so).
pub fn check_network(asked: Network, project: Network) -> Result<()> {
    let tighter = asked == Network::None || (asked == Network::Isolated && project != Network::None);
    if asked == project || tighter {
        return Ok(());
    }
    Err(Error::InvalidSpec(format!(
        "network `{asked}` is looser than this project's `{project}`: an agent may only tighten it (none, isolated); set network in berth.toml to loosen"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_only_tightens_the_network() {
        use Network::*;
        for (asked, project, ok) in [
            (None, Isolated, true),
            (Isolated, Isolated, true),
            (Bridge, Isolated, false),
            (Isolated, None, false),
            (Bridge, Bridge, true),
            (Isolated, Bridge, true),
        ] {
            assert_eq!(check_network(asked, project).is_ok(), ok, "{asked} in {project}");
        }
    }
}
