//! The one conversion of a [`RunRequest`] (what a face received: flags,
//! tool arguments) into the [`JobSpec`] it asks for: each value parsed
//! once, by the parser of its kind, so `berth run` and every MCP tool set
//! refuse a bad value with the same one-line error. What only one face has
//! (the CLI's env files and input files, MCP's network rule) stays there.

use crate::error::Result;
use crate::model::{JobSpec, RunRequest};

use super::parse_size;

impl RunRequest {
    /// Write what was asked into `spec`, parsing each value once; a value
    /// left unset leaves `spec` as it is (the manager fills it from the
    /// project). A bad value is the error and `spec` is not to be used.
    pub fn apply(self, spec: &mut JobSpec) -> Result<()> {
        // Unset (`auto`): the manager gives the job its project's runner.
        if let Some(r) = &self.runner {
            spec.runner = r.parse()?;
        }
        if self.image.is_some() {
            spec.image = self.image;
        }
        if let Some(p) = &self.pull {
            spec.pull = Some(p.parse()?);
        }
        if let Some(n) = &self.network {
            spec.network = Some(n.parse()?);
        }
        if let Some(e) = &self.egress {
            spec.egress = Some(e.parse()?);
        }
        if let Some(i) = &self.isolation {
            spec.isolation = Some(i.parse()?);
        }
        if let Some(w) = &self.write {
            spec.write = Some(w.parse()?);
        }
        if let Some(l) = self.layer {
            super::check_layer_name(&l)?;
            spec.layer = Some(l);
        }
        if let Some(e) = &self.engine {
            spec.engine = Some(e.parse()?);
        }
        if !self.ports.is_empty() {
            spec.ports = self.ports.iter().map(|p| p.parse()).collect::<Result<_>>()?;
        }
        if let Some(m) = &self.memory {
            spec.limits.memory = Some(parse_size(m)?);
        }
        if self.cpus.is_some() {
            spec.limits.cpus = self.cpus;
        }
        if self.pids.is_some() {
            spec.limits.pids = self.pids;
        }
        if self.cwd.is_some() {
            spec.cwd = self.cwd;
        }
        // Only ever on: the project's read_only applies whatever is asked.
        spec.read_only |= self.read_only.unwrap_or(false);
        if self.timeout.is_some() {
            spec.timeout = self.timeout;
        }
        if self.keep_alive.is_some() {
            spec.keep_alive = self.keep_alive;
        }
        if self.input.is_some() {
            spec.input = self.input;
        }
        spec.env.extend(self.env);
        spec.watch.extend(self.watch);
        if self.label.is_some() {
            spec.label = self.label;
        }
        spec.queue |= self.queue;
        spec.ready.extend(self.ready.conditions());
        // Validated by the manager that starts it (with its defaults filled).
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EngineAccess, Network, PullPolicy, ReadyAsk, ReadyCondition, RunnerChoice};

    fn applied(r: RunRequest) -> Result<JobSpec> {
        let mut spec = JobSpec::shell("true");
        r.apply(&mut spec).map(|()| spec)
    }

    /// The one-line error a bad value gets, whichever face sent it.
    fn refusal(r: RunRequest) -> String {
        let e = applied(r).unwrap_err().to_string();
        assert!(!e.contains('\n'), "not one line: {e}");
        e
    }

    #[test]
    fn each_value_is_parsed_into_the_spec() {
        let spec = applied(RunRequest {
            runner: Some("docker".into()),
            pull: Some("never".into()),
            engine: Some("scoped".into()),
            ports: vec!["8080:3000".into(), "53/udp".into()],
            memory: Some("256m".into()),
            pids: Some(64),
            network: Some("none".into()),
            cwd: Some("sub".into()),
            ready: ReadyAsk {
                port: Some(3000),
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap();
        assert_eq!(spec.runner, RunnerChoice::Docker);
        assert_eq!(spec.pull, Some(PullPolicy::Never));
        assert_eq!(spec.engine, Some(EngineAccess::Scoped));
        assert_eq!((spec.ports[0].host_port, spec.ports[0].port), (Some(8080), 3000));
        assert_eq!(spec.ports[1].port, 53);
        assert_eq!(spec.limits.memory, Some(256 << 20));
        assert_eq!(spec.limits.pids, Some(64));
        assert_eq!(spec.network, Some(Network::None));
        assert_eq!(spec.cwd.as_deref(), Some(std::path::Path::new("sub")));
        assert_eq!(spec.ready, [ReadyCondition::Port(3000)]);
        // Nothing asked, nothing changed: the project decides.
        assert_eq!(applied(RunRequest::default()).unwrap(), JobSpec::shell("true"));
    }

    #[test]
    fn read_only_can_only_be_switched_on() {
        let mut spec = JobSpec::shell("true");
        spec.read_only = true;
        RunRequest {
            read_only: Some(false),
            ..Default::default()
        }
        .apply(&mut spec)
        .unwrap();
        assert!(spec.read_only, "an asked false loosened the project's read_only");
        let on = applied(RunRequest {
            read_only: Some(true),
            ..Default::default()
        });
        assert!(on.unwrap().read_only);
    }

    #[test]
    fn a_bad_value_is_one_line_naming_it() {
        let ask = |f: fn(&mut RunRequest)| {
            let mut r = RunRequest::default();
            f(&mut r);
            refusal(r)
        };
        let e = ask(|r| r.runner = Some("vm".into()));
        assert!(
            e.contains("vm") && e.contains("expected auto, docker, host or swarm"),
            "{e}"
        );
        let e = ask(|r| r.network = Some("everywhere".into()));
        assert!(e.contains("everywhere") && e.contains("expected isolated"), "{e}");
        let e = ask(|r| r.engine = Some("full".into()));
        assert!(e.contains("full") && e.contains("expected none"), "{e}");
        let e = ask(|r| r.egress = Some("open".into()));
        assert!(e.contains("open"), "{e}");
        let e = ask(|r| r.pull = Some("sometimes".into()));
        assert!(e.contains("sometimes"), "{e}");
        let e = ask(|r| r.memory = Some("lots".into()));
        assert!(e.contains("lots"), "{e}");
        let e = ask(|r| r.ports = vec!["3000".into(), "http".into()]);
        assert!(e.contains("http"), "{e}");
    }
}
