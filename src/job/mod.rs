//! Rules for the job model: parsing what callers type (`3000/udp`, `512m`,
//! `docker`) and checking a [`JobSpec`] before anything runs. The data itself
//! is in [`crate::model`]; these impls live here because they fail with the
//! crate's [`Error`].

use std::str::FromStr;

mod duration;
mod mounts;
mod request;
mod sizes;

pub use duration::{parse_secs, secs_value};
pub use sizes::{
    MAX_ENV_NAME_BYTES, MAX_ENV_VALUE_BYTES, MAX_ENV_VARS, MAX_LABEL_BYTES, MAX_NAME_BYTES, MAX_PORTS,
    MAX_READY, MAX_REASON_BYTES, check_reason,
};

use crate::error::{Error, Result};
use crate::model::{
    Egress, EndedBy, JobSpec, Limits, MAX_PIDS, MIN_MEMORY, Network, PortSpec, Proto, Publish, RunnerChoice,
    host_cpus,
};

impl FromStr for RunnerChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(Self::Auto),
            "docker" => Ok(Self::Docker),
            "host" => Ok(Self::Host),
            "swarm" => Ok(Self::Swarm),
            _ => Err(Error::InvalidValue {
                what: "runner",
                input: s.into(),
                message: "expected auto, docker, host or swarm".into(),
            }),
        }
    }
}

impl FromStr for crate::model::EngineAccess {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "none" => Ok(crate::model::EngineAccess::None),
            "scoped" => Ok(crate::model::EngineAccess::Scoped),
            _ => Err(Error::InvalidValue {
                what: "engine",
                input: s.into(),
                message: "expected none (default: no engine in the job) or scoped (a socket of the job's own: its own child containers, nothing else)"
                    .into(),
            }),
        }
    }
}

impl FromStr for Network {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "isolated" => Ok(Network::Isolated),
            "bridge" => Ok(Network::Bridge),
            "none" => Ok(Network::None),
            "project" => Ok(Network::Project),
            _ => Err(Error::InvalidValue {
                what: "network",
                input: s.into(),
                message: "expected isolated (default: a berth bridge per job, no traffic between jobs), bridge (the engine's default bridge), none, or project (the project's container jobs share one network: localhost and labels reach each other)"
                    .into(),
            }),
        }
    }
}

impl FromStr for crate::model::WriteMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        use crate::model::WriteMode;
        match s {
            "layer" => Ok(WriteMode::Layer),
            "direct" => Ok(WriteMode::Direct),
            "read-only" | "read_only" | "readonly" => Ok(WriteMode::ReadOnly),
            _ => Err(Error::InvalidValue {
                what: "write",
                input: s.into(),
                message: "expected layer (the job writes a layer of its own; `berth apply` brings it to the checkout), direct (the checkout itself) or read-only".into(),
            }),
        }
    }
}

impl FromStr for Egress {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "none" => Ok(Egress::None),
            "proxy" => Ok(Egress::Proxy),
            "all" => Ok(Egress::All),
            _ => Err(Error::InvalidValue {
                what: "egress",
                input: s.into(),
                message: "expected none (no way out), proxy (default: berth's HTTP(S) proxy to the hosts of egress_allow) or all"
                    .into(),
            }),
        }
    }
}

impl FromStr for crate::model::Isolation {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "container" => Ok(Self::Container),
            "gvisor" => Ok(Self::Gvisor),
            _ => Err(Error::InvalidValue {
                what: "isolation",
                input: s.into(),
                message: "expected container (the engine's default runtime) or gvisor (a kernel of gVisor's own between the job and the host)".into(),
            }),
        }
    }
}

impl FromStr for Publish {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "berth" => Ok(Publish::Berth),
            "engine" => Ok(Publish::Engine),
            _ => Err(Error::InvalidValue {
                what: "publish",
                input: s.into(),
                message: "expected berth (default: berth relays 127.0.0.1 to the job) or engine (the engine publishes)"
                    .into(),
            }),
        }
    }
}

impl FromStr for Proto {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "tcp" => Ok(Proto::Tcp),
            "udp" => Ok(Proto::Udp),
            _ => Err(Error::InvalidValue {
                what: "protocol",
                input: s.into(),
                message: "expected tcp or udp".into(),
            }),
        }
    }
}

impl FromStr for PortSpec {
    type Err = Error;
    fn from_str(input: &str) -> Result<Self> {
        let bad = |message: &str| Error::InvalidPort {
            input: input.into(),
            message: message.into(),
        };
        let (rest, proto) = match input.split_once('/') {
            Some((r, p)) => (
                r,
                p.parse::<Proto>()
                    .map_err(|_| bad("protocol must be tcp or udp"))?,
            ),
            None => (input, Proto::Tcp),
        };
        let parse = |s: &str| -> Result<u16> {
            match s.trim().parse::<u16>() {
                Ok(0) => Err(bad("port must be between 1 and 65535")),
                Ok(p) => Ok(p),
                Err(_) => Err(bad("not a number between 1 and 65535")),
            }
        };
        let (host_port, port) = match rest.split_once(':') {
            Some((h, c)) => (Some(parse(h)?), parse(c)?),
            None => (None, parse(rest)?),
        };
        Ok(PortSpec {
            port,
            host_port,
            proto,
        })
    }
}

impl Limits {
    /// Bounds: a limit that would switch itself off (`pids = 0`/`-1`) or that
    /// the engine would refuse is a clear error before anything runs.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: &'static str, input: String, message: String| {
            Err(Error::InvalidValue { what, input, message })
        };
        if let Some(c) = self.cpus {
            let host = host_cpus();
            if !(c.is_finite() && c > 0.0 && c <= host as f64) {
                return bad(
                    "cpus",
                    c.to_string(),
                    format!("must be more than 0 and at most {host} (this machine's CPUs)"),
                );
            }
        }
        if let Some(m) = self.memory
            && m < MIN_MEMORY
        {
            return bad(
                "memory",
                m.to_string(),
                "must be at least 6 MiB (e.g. 64m, 2g)".into(),
            );
        }
        if let Some(p) = self.pids
            && !(1..=MAX_PIDS).contains(&p)
        {
            return bad("pids", p.to_string(), format!("must be between 1 and {MAX_PIDS}"));
        }
        Ok(())
    }
}

/// Parse a size like `512m`, `2g`, `1.5G`, `1048576`, `64k` into bytes.
pub fn parse_size(input: &str) -> Result<u64> {
    let s = input.trim().to_ascii_lowercase();
    let bad = || Error::InvalidSize { input: input.into() };
    let s = s.strip_suffix('b').unwrap_or(&s);
    let s = s.strip_suffix('i').unwrap_or(s);
    let (num, mult) = match s.chars().last().ok_or_else(bad)? {
        'k' => (&s[..s.len() - 1], 1u64 << 10),
        'm' => (&s[..s.len() - 1], 1 << 20),
        'g' => (&s[..s.len() - 1], 1 << 30),
        't' => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    let value: f64 = num.trim().parse().map_err(|_| bad())?;
    if !value.is_finite() || value <= 0.0 {
        return Err(bad());
    }
    let bytes = value * mult as f64;
    if bytes > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

impl JobSpec {
    /// Check what can be checked without running anything.
    pub fn validate(&self) -> Result<()> {
        match (&self.shell, self.argv.is_empty()) {
            (Some(_), false) => {
                return Err(Error::InvalidSpec("give either argv or shell, not both".into()));
            }
            (None, true) => return Err(Error::InvalidSpec("no command given".into())),
            (Some(s), true) if s.trim().is_empty() => {
                return Err(Error::InvalidSpec("empty shell command".into()));
            }
            _ => {}
        }
        for (what, value) in [("timeout", self.timeout), ("keep_alive", self.keep_alive)] {
            if let Some(v) = value
                && !(v.is_finite() && v > 0.0)
            {
                return Err(Error::InvalidValue {
                    what,
                    input: v.to_string(),
                    message: "must be a positive number".into(),
                });
            }
        }
        self.limits.validate()?;
        for p in &self.ports {
            if p.port == 0 || p.host_port == Some(0) {
                return Err(Error::InvalidPort {
                    input: format!("{}:{}", p.host_port.unwrap_or(p.port), p.port),
                    message: "port must be between 1 and 65535".into(),
                });
            }
        }
        crate::watch::check_count(&self.watch)?;
        for p in &self.watch {
            crate::watch::compile_one(p)?;
        }
        for c in &self.ready {
            c.validate()?;
        }
        // Refused at the door for every face: such a check could only fail
        // once the job runs (`ready::Target::http_addr`).
        let http_without_port = self
            .ready
            .iter()
            .any(|c| matches!(c, crate::model::ReadyCondition::Http(h) if h.port.is_none()));
        if http_without_port && self.ports.is_empty() {
            return Err(Error::InvalidSpec(
                "an HTTP readiness check needs a port: publish one (`-p 8080`, MCP `ports: [\"8080\"]`) or name the check's port".into(),
            ));
        }
        self.validate_sizes()?;
        mounts::check_all(&self.mounts)?;
        self.validate_isolation()
    }

    /// `read_only` and `network` are container settings: refuse what cannot hold.
    fn validate_isolation(&self) -> Result<()> {
        if self.network == Some(Network::None) && !self.ports.is_empty() {
            return Err(Error::InvalidSpec(
                "network `none` cannot publish ports: drop the ports or use network `bridge`".into(),
            ));
        }
        if self.runner == RunnerChoice::Host && !self.mounts.is_empty() {
            return Err(host_mounts());
        }
        if self.runner == RunnerChoice::Host
            && (self.read_only || self.network.is_some() || self.egress.is_some())
        {
            return Err(Error::InvalidSpec(
                "read_only, network and egress apply to container jobs; the host runner cannot enforce them"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// The refusal of `-v` for a job on the host.
pub fn host_mounts() -> Error {
    Error::InvalidSpec(
        "mounts (-v) are for container jobs, and this job runs on the host, where there is nothing to mount: use the workspace's paths directly, or --runner docker".into(),
    )
}

impl FromStr for EndedBy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "agent" => Ok(EndedBy::Agent),
            "user" => Ok(EndedBy::User),
            "system" => Ok(EndedBy::System),
            _ => Err(Error::InvalidValue {
                what: "ended_by",
                input: s.into(),
                message: "expected agent, user or system".into(),
            }),
        }
    }
}

/// Longest layer name.
pub const MAX_LAYER_NAME: usize = 64;

/// Whether `name` may name a layer: 1–64 of `a-z 0-9 . _ -`, starting with a
/// letter or digit (it becomes part of a volume and directory name).
pub fn check_layer_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_LAYER_NAME
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidValue {
            what: "layer",
            input: name.chars().take(80).collect(),
            message: format!(
                "a layer name is 1-{MAX_LAYER_NAME} of a-z, 0-9, `.`, `_`, `-`, starting with a letter or digit"
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{JobStatus, StartMode};
    use pretty_assertions::assert_eq;

    #[test]
    fn ports_parse() {
        assert_eq!(
            "3000".parse::<PortSpec>().unwrap(),
            PortSpec {
                port: 3000,
                host_port: None,
                proto: Proto::Tcp
            }
        );
        assert_eq!(
            "8080:3000/udp".parse::<PortSpec>().unwrap(),
            PortSpec {
                port: 3000,
                host_port: Some(8080),
                proto: Proto::Udp
            }
        );
        for bad in ["", "x", "0", "70000", "80/sctp", "a:80", "-1"] {
            let err = bad.parse::<PortSpec>().unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("512m").unwrap(), 512 << 20);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("64KiB").unwrap(), 64 << 10);
        assert_eq!(parse_size("1048576").unwrap(), 1 << 20);
        assert_eq!(parse_size("1.5g").unwrap(), 3 << 29);
        for bad in ["", "m", "-5m", "12q", "abc", "0"] {
            assert!(parse_size(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn status_vocabulary() {
        assert_eq!(JobStatus::Exited { code: 0 }.name(), "success");
        assert!(JobStatus::Exited { code: 3 }.is_failure());
        assert_eq!(JobStatus::TimedOut.exit_code(), Some(124));
        assert_eq!(JobStatus::Signaled { signal: 9 }.exit_code(), Some(137));
        let json = serde_json::to_value(JobStatus::Killed {
            signal: Some(15),
            ended_by: EndedBy::User,
            reason: "killed by user".into(),
        })
        .unwrap();
        assert_eq!(
            json,
            serde_json::json!({"state":"killed","signal":15,"ended_by":"user","reason":"killed by user","cause":{"kind":"requested"}})
        );
        let mode = serde_json::to_value(StartMode::Promoted(EndedBy::System)).unwrap();
        assert_eq!(mode, serde_json::json!({"mode":"promoted","by":"system"}));
    }

    #[test]
    fn spec_validation() {
        assert!(JobSpec::default().validate().is_err());
        assert!(JobSpec::argv(["true"]).validate().is_ok());
        let err = JobSpec::argv(["true"]).with_watch("(").validate().unwrap_err();
        assert!(matches!(err, Error::InvalidRegex { .. }), "{err}");
        assert_eq!(
            JobSpec::argv(["echo", "a b", "c"]).display_command(),
            "echo 'a b' c"
        );
    }

    /// Network and protocol are typed but read and written as the same words
    /// as before: old records and requests still load, bad words are refused
    /// naming what is accepted.
    #[test]
    fn network_and_proto_keep_their_words() {
        for (n, word) in [
            (Network::Isolated, "isolated"),
            (Network::Bridge, "bridge"),
            (Network::None, "none"),
            (Network::Project, "project"),
        ] {
            assert_eq!(serde_json::to_string(&n).unwrap(), format!("\"{word}\""));
            assert_eq!(
                serde_json::from_str::<Network>(&format!("\"{word}\"")).unwrap(),
                n
            );
            assert_eq!(
                (word.parse::<Network>().unwrap(), n.to_string()),
                (n, word.to_string())
            );
        }
        for (p, word) in [(Proto::Tcp, "tcp"), (Proto::Udp, "udp")] {
            assert_eq!(serde_json::to_string(&p).unwrap(), format!("\"{word}\""));
            assert_eq!(word.parse::<Proto>().unwrap(), p);
        }
        // A stored spec and mapping as older versions wrote them.
        let spec: JobSpec = serde_json::from_str(
            r#"{"argv":["x"],"ready":[],"network":"none","ports":[{"port":80,"proto":"udp"},{"port":81}]}"#,
        )
        .unwrap();
        assert_eq!(spec.network, Some(Network::None));
        assert_eq!(
            spec.ports.iter().map(|p| p.proto).collect::<Vec<_>>(),
            [Proto::Udp, Proto::Tcp]
        );
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(
            (&json["network"], &json["ports"][0]["proto"]),
            (&serde_json::json!("none"), &serde_json::json!("udp"))
        );
        let m: crate::model::PortMapping =
            serde_json::from_str(r#"{"port":80,"proto":"tcp","host_ip":"127.0.0.1","host_port":5000}"#)
                .unwrap();
        assert_eq!(m.proto, Proto::Tcp);
        // Refused, with the accepted words.
        let e = "host".parse::<Network>().unwrap_err().to_string();
        assert!(
            e.contains("network") && e.contains("isolated") && e.contains("none"),
            "{e}"
        );
        let e = serde_json::from_str::<Network>("\"host\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected one of `isolated`, `bridge`, `none`"), "{e}");
        let e = "80/sctp".parse::<PortSpec>().unwrap_err().to_string();
        assert!(e.contains("protocol must be tcp or udp"), "{e}");
        let e = serde_json::from_str::<PortSpec>(r#"{"port":80,"proto":"sctp"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected `tcp` or `udp`"), "{e}");
    }
}
