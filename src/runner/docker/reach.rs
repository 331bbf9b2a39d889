//! How a container job is reached and what it reaches: which kind of
//! network it gets, who publishes its ports (berth's forwarder or the
//! engine), its egress proxy, and what its container is given for them
//! (environment, its own `/etc` files, its hostname).
//!
//! The rules ([`decide`]):
//! - `network = "isolated"` (the default): a pool network, `internal` unless
//!   the job's egress is `all`. Ports are berth's (`publish = "berth"`, the
//!   default): berth listens on 127.0.0.1 and relays to the job's address,
//!   and the job may join a pause container, ports or not. With `publish =
//!   "engine"` a job with ports gets a NAT'd network (the engine publishes
//!   nothing on an internal one), so its egress is `all`: said in the
//!   record's `not_enforced`.
//! - `network = "bridge"`: the engine's default bridge; the engine publishes,
//!   and egress is whatever the engine allows (`all`; said when the job asked
//!   for less).
//! - `network = "none"`: nothing in or out.
//! - `network = "project"`: as `isolated`, on the project's pod (`pod/`).
//!
//! What berth opens for a job ([`JobNet`]: the forwarder and the proxy)
//! belongs to the job's control and is closed when the job ends, however
//! it ends.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Mutex;

use bollard::models::Mount;

use super::Sandbox;
use super::etc;
use super::slot::{NetAddr, Pause};
use crate::error::{Error, Result};
use crate::model::{Egress, JobId, JobSpec, Network, Publish};
use crate::net::{Allowlist, DenialFn, Forwarder, Policy, Proxy};

/// What the proxy variables name besides the proxy: never proxied (and
/// the job network's gateway, this machine's address the job reaches
/// directly: a scoped engine's children are relayed there).
pub const NO_PROXY: &str = "localhost,127.0.0.1,::1";
/// The kernel hostname of a job that joins a pause: the engine copies the
/// pause's and a job cannot set its own, so it is the same neutral word
/// for every such job (the job's id is in `/etc/hostname` and `$HOSTNAME`).
pub const PAUSE_HOSTNAME: &str = "berth-job";

/// How one job's network is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub network: Network,
    /// The egress the job gets.
    pub egress: Egress,
    /// The engine publishes the ports (else berth forwards them).
    pub engine_publishes: bool,
    /// An isolated job's network is internal (no way out but the proxy).
    pub internal: bool,
    /// What was asked and could not be held (the record's `not_enforced`).
    pub notes: Vec<String>,
    /// `network = "project"` was asked: the job belongs in its project's pod
    /// (`network` is then `isolated`: the pod's bridge is a pool network).
    pub project_pod: bool,
}

/// Decide for `spec` under `project` (see the module docs).
pub fn decide(spec: &JobSpec, network: Network, egress: Egress, publish: Publish) -> Decision {
    let asked = spec.egress.unwrap_or(egress);
    let mut notes = Vec::new();
    let project_pod = spec.network.unwrap_or(network) == Network::Project;
    let network = match spec.network.unwrap_or(network) {
        Network::Project => Network::Isolated,
        n => n,
    };
    let (egress, engine_publishes) = match network {
        Network::None => (Egress::None, false),
        Network::Bridge => {
            if asked != Egress::All {
                notes.push(format!(
                    "egress {asked}: not enforced on network bridge (the engine's default bridge reaches everywhere; use network isolated)"
                ));
            }
            (Egress::All, true)
        }
        // (`project` was made `isolated` above.)
        Network::Isolated | Network::Project => {
            let engine = publish == Publish::Engine && !spec.ports.is_empty();
            if engine && asked != Egress::All {
                notes.push(format!(
                    "egress {asked}: not enforced with publish = engine (the engine publishes ports only on a network with a way out; use publish = berth)"
                ));
            }
            (if engine { Egress::All } else { asked }, engine)
        }
    };
    Decision {
        network,
        project_pod,
        egress,
        engine_publishes,
        internal: egress != Egress::All,
        notes,
    }
}

impl Sandbox<'_> {
    /// [`decide`] with this project's settings.
    pub fn decide(&self, spec: &JobSpec) -> Decision {
        decide(spec, self.network, self.egress, self.publish)
    }
}

/// What a container is given for its network, beside the spec's own.
#[derive(Debug, Clone, Default)]
pub struct Attach {
    /// berth forwards the ports: the engine publishes none.
    pub berth_forwards: bool,
    /// Variables set unless the job sets them itself (`HOSTNAME`, the proxy's).
    pub env: Vec<(String, String)>,
    /// The job's own `/etc` files.
    pub mounts: Vec<Mount>,
    /// The kernel hostname (a job with a network of its own).
    pub hostname: Option<String>,
    /// A name the engine's DNS gives the job's address on its network.
    pub alias: Option<String>,
}

/// The proxy variables for the proxy at `at` (upper and lower case: tools
/// read either); its own address, the gateway, is not proxied.
pub fn proxy_env(at: SocketAddr) -> Vec<(String, String)> {
    let url = format!("http://{at}");
    let direct = format!("{NO_PROXY},{}", at.ip());
    let mut env = Vec::new();
    for k in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        env.push((k.to_string(), url.clone()));
    }
    for k in ["NO_PROXY", "no_proxy"] {
        env.push((k.to_string(), direct.clone()));
    }
    env
}

/// The egress settings a job's proxy is made from.
#[derive(Clone)]
pub struct EgressRules {
    pub allow: Allowlist,
    /// Extra addresses never proxied to (the engine's TCP endpoint).
    pub deny: Vec<SocketAddr>,
    pub on_denial: DenialFn,
}

/// Start the egress proxy of `who` (a job's id, or a build) on the gateway
/// of its network `name` at `addr` (`port` 0: any; an adopted job's
/// recorded port otherwise).
pub fn start_proxy(who: &str, addr: &NetAddr, name: &str, rules: &EgressRules, port: u16) -> Result<Proxy> {
    let (Some(gateway), Some(subnet)) = (addr.gateway, addr.subnet) else {
        return Err(Error::Docker {
            action: "start the egress proxy",
            job: who.to_string(),
            message: format!(
                "the job network {name} has no gateway address; set egress = \"none\" or \"all\""
            ),
        });
    };
    let policy = Policy {
        allow: rules.allow.clone(),
        deny: rules.deny.clone(),
        on_denial: rules.on_denial.clone(),
    };
    Proxy::start(SocketAddr::new(gateway, port), subnet, policy, who)
}

/// What berth runs for one job on this machine: closed with the job.
#[derive(Debug, Default)]
pub struct JobNet {
    /// Set once the job's address is known; `closed` once the job ended.
    forwarder: Mutex<(Option<Forwarder>, bool)>,
    proxy: Option<Proxy>,
}

impl JobNet {
    pub fn new(proxy: Option<Proxy>) -> Self {
        JobNet {
            forwarder: Mutex::default(),
            proxy,
        }
    }

    /// The job's forwarder, relaying now. One given after the job ended is
    /// closed at once.
    pub fn set_forwarder(&self, f: Forwarder) {
        let mut held = self.forwarder.lock().unwrap_or_else(|e| e.into_inner());
        if held.1 {
            f.close();
        }
        held.0 = Some(f);
    }

    /// The job's egress proxy, if it has one.
    pub fn proxy(&self) -> Option<&Proxy> {
        self.proxy.as_ref()
    }

    /// Close the forwarder's listeners and connections and the proxy (the
    /// job ended). Closing twice is harmless.
    pub fn close(&self) {
        let mut held = self.forwarder.lock().unwrap_or_else(|e| e.into_inner());
        held.1 = true;
        if let Some(f) = &held.0 {
            f.close();
        }
        if let Some(p) = &self.proxy {
            p.close();
        }
    }
}

/// What job `id`'s container is given for its network (`decision`):
/// `HOSTNAME`, the proxy's variables, its own `/etc` files (written under
/// `job_dir`; the engine's default bridge keeps the engine's, which are
/// the container's own there), and its name: the kernel hostname and a
/// DNS alias on an endpoint of its own, the pause's address in
/// `/etc/hosts` when it `joined` one.
pub fn attach(
    id: &JobId,
    decision: &Decision,
    joined: Option<&Pause>,
    job_dir: &Path,
    proxy: Option<&Proxy>,
) -> Result<Attach> {
    let mut env = vec![("HOSTNAME".to_string(), id.to_string())];
    if let Some(p) = proxy {
        env.extend(proxy_env(p.addr()));
    }
    let mounts = match decision.network {
        Network::Bridge => Vec::new(),
        net => {
            let address = joined.and_then(|h| h.ip);
            etc::write(job_dir, id, address, net == Network::Isolated)?.mounts()
        }
    };
    Ok(Attach {
        berth_forwards: !decision.engine_publishes,
        env,
        mounts,
        hostname: joined.is_none().then(|| id.to_string()),
        alias: (joined.is_none() && decision.network == Network::Isolated).then(|| id.to_string()),
    })
}

/// A pod member's (pod/): the pod's `hosts` file as its `/etc/hosts`
/// instead of its own, and its siblings' `names` never proxied (they are on
/// its loopback; the proxy, on this machine, could not resolve them).
pub fn in_pod(attach: &mut Attach, hosts: &Path, names: &[String]) {
    for m in attach.mounts.iter_mut() {
        if m.target.as_deref() == Some("/etc/hosts") {
            m.source = Some(hosts.to_string_lossy().into_owned());
        }
    }
    for (k, v) in attach.env.iter_mut() {
        if k == "NO_PROXY" || k == "no_proxy" {
            for name in names {
                v.push(',');
                v.push_str(name);
            }
        }
    }
}

/// The engine's TCP endpoint (`tcp://ADDR:PORT` with an address, not a
/// name), which the egress proxy must never reach.
pub fn endpoint_addr(endpoint: &str) -> Vec<SocketAddr> {
    endpoint
        .strip_prefix("tcp://")
        .map(|rest| rest.trim_end_matches('/'))
        .and_then(|a| a.parse::<SocketAddr>().ok())
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PortSpec;

    fn with_port(mut spec: JobSpec) -> JobSpec {
        spec.ports.push(PortSpec {
            port: 80,
            host_port: None,
            proto: crate::model::Proto::Tcp,
        });
        spec
    }

    #[test]
    fn networks_egress_and_who_publishes() {
        let plain = JobSpec::argv(["true"]);
        let d = decide(
            &with_port(plain.clone()),
            Network::Isolated,
            Egress::Proxy,
            Publish::Berth,
        );
        assert_eq!(
            (d.egress, d.engine_publishes, d.internal, d.notes.len()),
            (Egress::Proxy, false, true, 0)
        );
        let d = decide(&plain, Network::Isolated, Egress::All, Publish::Berth);
        assert_eq!((d.egress, d.internal), (Egress::All, false));
        // A job may ask for less than its project's.
        let mut tight = plain.clone();
        tight.egress = Some(Egress::None);
        let d = decide(&tight, Network::Isolated, Egress::All, Publish::Berth);
        assert_eq!((d.egress, d.internal), (Egress::None, true));
        // The engine publishes only on a NAT'd network: said, not hidden.
        let d = decide(
            &with_port(plain.clone()),
            Network::Isolated,
            Egress::Proxy,
            Publish::Engine,
        );
        assert_eq!(
            (d.egress, d.engine_publishes, d.internal),
            (Egress::All, true, false)
        );
        assert!(d.notes[0].contains("publish = engine"), "{:?}", d.notes);
        let d = decide(&plain, Network::Isolated, Egress::Proxy, Publish::Engine);
        assert_eq!(
            (d.engine_publishes, d.internal),
            (false, true),
            "no ports: nothing to publish"
        );
        let d = decide(
            &with_port(plain.clone()),
            Network::Bridge,
            Egress::Proxy,
            Publish::Berth,
        );
        assert_eq!((d.egress, d.engine_publishes), (Egress::All, true));
        assert!(d.notes[0].contains("network bridge"));
        // The project's pod: an isolated network, in the project's pod.
        let d = decide(&plain, Network::Project, Egress::Proxy, Publish::Berth);
        assert_eq!(
            (d.network, d.project_pod, d.internal),
            (Network::Isolated, true, true)
        );
        let d = decide(&plain, Network::Isolated, Egress::Proxy, Publish::Berth);
        assert!(!d.project_pod);
        let d = decide(&plain, Network::None, Egress::All, Publish::Berth);
        assert_eq!((d.egress, d.engine_publishes), (Egress::None, false));
    }

    #[test]
    fn proxy_variables_and_the_engine_endpoint() {
        let env = proxy_env("172.18.0.1:4000".parse().unwrap());
        assert!(env.contains(&("https_proxy".into(), "http://172.18.0.1:4000".into())));
        assert!(env.contains(&("NO_PROXY".into(), format!("{NO_PROXY},172.18.0.1"))));
        assert_eq!(
            endpoint_addr("tcp://10.0.0.5:2376"),
            ["10.0.0.5:2376".parse::<SocketAddr>().unwrap()]
        );
        assert!(endpoint_addr("unix:///var/run/docker.sock").is_empty());
        assert!(endpoint_addr("tcp://docker.corp:2376").is_empty());
    }
}
