//! Where a job runs and what it may use, as every tool set says it: one
//! [`Settings`] that each set fills from its own argument names (`run`,
//! `run_background`, `safe_shell`, the exec `shell` spawn) and that turns
//! them into the [`JobSpec`] in one place, with one parser per value (ports,
//! sizes, runner, network). What an agent asks here can only tighten the
//! sandbox: a looser network than the project's is refused ([`check_network`],
//! applied at the start), `read_only` can only be switched on, and host
//! runners and scoped engines stay behind the user's switches (admission).

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::JobSpec;
use crate::error::{Error, Result};
use crate::job::parse_size;
use crate::model::{Network, PortSpec, RunnerChoice};

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

impl From<EngineArg> for crate::model::EngineAccess {
    fn from(e: EngineArg) -> Self {
        match e {
            EngineArg::None => crate::model::EngineAccess::None,
            EngineArg::Scoped => crate::model::EngineAccess::Scoped,
        }
    }
}

impl From<RunnerArg> for RunnerChoice {
    fn from(r: RunnerArg) -> Self {
        match r {
            RunnerArg::Auto => RunnerChoice::Auto,
            RunnerArg::Docker => RunnerChoice::Docker,
            RunnerArg::Host => RunnerChoice::Host,
        }
    }
}

/// `["3000", "8080:3000"]` as port specs; the first bad one is the error.
pub fn parse_ports(ports: &[String]) -> Result<Vec<PortSpec>> {
    ports.iter().map(|p| p.parse::<PortSpec>()).collect()
}

/// The settings a tool call gave; unset ones are left to the job's project.
#[derive(Debug, Default, Clone)]
pub struct Settings {
    pub ports: Vec<String>,
    pub image: Option<String>,
    pub pull: Option<String>,
    pub runner: Option<RunnerArg>,
    pub engine: Option<EngineArg>,
    pub cwd: Option<String>,
    pub cpus: Option<f64>,
    pub memory: Option<String>,
    pub pids: Option<i64>,
    pub network: Option<String>,
    pub read_only: Option<bool>,
}

impl Settings {
    /// Write these settings into `spec`, parsing each value once; a bad
    /// value is a one-line error and `spec` is not used.
    pub fn apply(self, spec: &mut JobSpec) -> Result<()> {
        spec.ports = parse_ports(&self.ports)?;
        spec.image = self.image;
        spec.pull = self.pull.as_deref().map(str::parse).transpose()?;
        if let Some(r) = self.runner {
            spec.runner = r.into();
        }
        spec.engine = self.engine.map(Into::into);
        spec.cwd = self.cwd.map(PathBuf::from);
        spec.limits.cpus = self.cpus;
        spec.limits.memory = self.memory.as_deref().map(parse_size).transpose()?;
        spec.limits.pids = self.pids;
        spec.network = self.network.as_deref().map(str::parse).transpose()?;
        // Only ever on: the project's read_only applies whatever is asked.
        spec.read_only |= self.read_only.unwrap_or(false);
        Ok(())
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

    #[test]
    fn settings_parse_once_and_only_switch_read_only_on() {
        let mut spec = JobSpec::shell("true");
        spec.read_only = true;
        Settings {
            ports: vec!["8080:3000".into()],
            memory: Some("256m".into()),
            pids: Some(64),
            network: Some("none".into()),
            read_only: Some(false),
            ..Default::default()
        }
        .apply(&mut spec)
        .unwrap();
        assert_eq!(spec.ports[0].port, 3000);
        assert_eq!(spec.limits.memory, Some(256 << 20));
        assert_eq!(spec.limits.pids, Some(64));
        assert_eq!(spec.network, Some(Network::None));
        assert!(spec.read_only);
        let bad = Settings {
            network: Some("everywhere".into()),
            ..Default::default()
        };
        assert!(bad.apply(&mut JobSpec::shell("true")).is_err());
    }
}
