//! How a job touches the world: what it may reach outside ([`Egress`]), who
//! makes its published ports answer on 127.0.0.1 ([`Publish`]) and how it
//! writes its workspace ([`WriteMode`]). Plain data, serialized as the words a caller types;
//! parsing lives in `job.rs`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What a container job may reach beyond the machine it runs on.
/// Ordered from tightest to loosest: a job may ask for a tighter one than
/// its project's, never a looser one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Egress {
    /// Nothing: the job's network has no way out.
    None,
    /// Only through berth's HTTP(S) proxy, to the hosts of `egress_allow`.
    #[default]
    Proxy,
    /// Anything the engine's NAT reaches (the engine's default behaviour).
    All,
}

impl Egress {
    pub fn as_str(self) -> &'static str {
        match self {
            Egress::None => "none",
            Egress::Proxy => "proxy",
            Egress::All => "all",
        }
    }
}

impl fmt::Display for Egress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What stands between a container job and the host's kernel. Ordered
/// from weakest to strongest: a job or a project file may ask for a
/// stronger one than the user's, never a weaker one without trust.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// Namespaces, cgroups, no capabilities, the engine's seccomp profile
    /// (the engine's default runtime, runc).
    #[default]
    Container,
    /// gVisor: the job's system calls go to a kernel of gVisor's own
    /// (`runsc`, registered with the engine as `gvisor_runtime`).
    Gvisor,
}

impl Isolation {
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::Container => "container",
            Isolation::Gvisor => "gvisor",
        }
    }
}

impl fmt::Display for Isolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who makes a container job's published ports answer on 127.0.0.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Publish {
    /// berth listens on 127.0.0.1 and relays each connection to the job's
    /// address on its own network (which then needs no way in from outside).
    #[default]
    Berth,
    /// The engine publishes the port (its proxy and NAT rules).
    Engine,
}

impl Publish {
    pub fn as_str(self) -> &'static str {
        match self {
            Publish::Berth => "berth",
            Publish::Engine => "engine",
        }
    }
}

impl fmt::Display for Publish {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a job writes its workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteMode {
    /// The workspace is mounted read-only: the job writes nowhere in it.
    ReadOnly,
    /// The job's writes go to a layer of its own (an overlay whose lower is
    /// the live checkout); `berth diff` shows them, `berth apply` brings
    /// them to the checkout.
    Layer,
    /// The checkout itself, bind-mounted: the job changes it at once.
    #[default]
    Direct,
}

impl WriteMode {
    pub fn as_str(self) -> &'static str {
        match self {
            WriteMode::ReadOnly => "read-only",
            WriteMode::Layer => "layer",
            WriteMode::Direct => "direct",
        }
    }
}

impl fmt::Display for WriteMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a container job may start containers of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineAccess {
    /// No engine inside the job (the default): nothing to talk to.
    #[default]
    None,
    /// A socket berth serves into the job at `/var/run/docker.sock`: a
    /// filtering proxy of the Engine API through which the job creates,
    /// reaches and removes its own child containers, and nothing else.
    Scoped,
}

impl EngineAccess {
    pub fn as_str(self) -> &'static str {
        match self {
            EngineAccess::None => "none",
            EngineAccess::Scoped => "scoped",
        }
    }
}

impl fmt::Display for EngineAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
