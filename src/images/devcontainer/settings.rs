//! The devcontainer.json keys berth applies to a project's container jobs
//! when the user trusts the file: `containerEnv` (the job's environment),
//! `forwardPorts` (published ports, as `-p` publishes them), `remoteUser`
//! (the container's user) and `postCreateCommand` (run once on the project
//! image, `runner/docker/build/post_create.rs`). From a file the user has
//! not trusted none of them applies: the agent writes the project's files,
//! a `remoteUser` of root is a loosening like berth.toml's `user = "root"`,
//! and a setup command is a build step like a trusted Dockerfile's `RUN`.
//!
//! What even a trusted file cannot ask for is left out value by value and
//! said: a variable whose value needs the dev container tool's `${…}`
//! substitution (`${localEnv:HOME}` would hand the host's variables to the
//! job), a port of another service (`"db:5432"`), a user given by name
//! (berth runs jobs as `UID:GID` or root, never looking names up in an
//! image the project built). Nothing here reaches past admission: the
//! job's own `env`/ports win, and its filter, limits and network are the
//! project's as for any job.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::model::{JobSpec, Network, PortSpec, PostCreate, Proto};

/// Most `containerEnv` variables and `forwardPorts` entries taken.
const MAX_VARS: usize = 256;
const MAX_PORTS: usize = 32;
/// Longest `containerEnv` value taken (an environment is no file store),
/// and longest `postCreateCommand` (all its words together).
const MAX_VALUE: usize = 16 * 1024;
/// Most words of a `postCreateCommand` given as a list.
const MAX_WORDS: usize = 256;

/// The keys of this module, in the order said.
pub const APPLIED: [&str; 4] = ["containerEnv", "forwardPorts", "remoteUser", "postCreateCommand"];

/// What a trusted devcontainer.json sets for its project's container jobs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DevSettings {
    /// The file (canonical), the source `berth config` names.
    pub file: PathBuf,
    /// `containerEnv`.
    pub env: BTreeMap<String, String>,
    /// `forwardPorts`, each published on a free host port.
    pub ports: Vec<PortSpec>,
    /// `remoteUser`: `root` or `UID:GID`.
    pub user: Option<String>,
    /// `postCreateCommand`, run once on the project image.
    pub post_create: Option<PostCreate>,
    /// Values left out, each as `key value (why)`.
    pub skipped: Vec<String>,
}

impl DevSettings {
    /// The settings of the parsed file `value` read at `file`.
    pub fn parse(file: PathBuf, value: &serde_json::Value) -> DevSettings {
        let mut s = DevSettings {
            file,
            ..Default::default()
        };
        if let Some(env) = value.get("containerEnv") {
            s.take_env(env);
        }
        if let Some(ports) = value.get("forwardPorts") {
            s.take_ports(ports);
        }
        if let Some(user) = value.get("remoteUser").filter(|v| !v.is_null()) {
            match user.as_str().map(str::trim) {
                Some(u) if u == "root" || crate::config::validate_user(u.to_string()).is_ok() => {
                    s.user = Some(u.to_string());
                }
                _ => s.skip("remoteUser", user, "berth takes root or UID:GID, not a name"),
            }
        }
        if let Some(cmd) = value.get("postCreateCommand").filter(|v| !v.is_null()) {
            s.take_post_create(cmd);
        }
        s
    }

    /// `postCreateCommand`: a string (through `/bin/sh -c`) or a list of
    /// words; the object form (commands the tool runs in parallel) is left
    /// out, as are empty, oversized or NUL-holding commands.
    fn take_post_create(&mut self, cmd: &serde_json::Value) {
        let argv: Option<Vec<String>> = match cmd {
            serde_json::Value::String(text) => Some(vec!["/bin/sh".into(), "-c".into(), text.clone()]),
            serde_json::Value::Array(words) if words.len() <= MAX_WORDS => {
                words.iter().map(|w| w.as_str().map(str::to_string)).collect()
            }
            _ => None,
        };
        let Some(argv) = argv else {
            return self.skip(
                "postCreateCommand",
                cmd,
                "berth runs one command: a string or a list of words",
            );
        };
        let size: usize = argv.iter().map(String::len).sum();
        let blank = argv.last().is_none_or(|w| w.trim().is_empty());
        if blank || size > MAX_VALUE || argv.iter().any(|w| w.contains('\0')) {
            return self.skip("postCreateCommand", cmd, "empty, too long or not text");
        }
        self.post_create = Some(PostCreate {
            argv,
            user: self.user.clone(),
            file: self.file.clone(),
        });
    }

    fn skip(&mut self, key: &str, value: &serde_json::Value, why: &str) {
        let shown: String = value.to_string().chars().take(60).collect();
        self.skipped.push(format!("{key} {shown} ({why})"));
    }

    fn take_env(&mut self, env: &serde_json::Value) {
        let Some(vars) = env.as_object() else {
            return self.skip("containerEnv", env, "not an object");
        };
        for (name, v) in vars {
            let shown = serde_json::Value::String(name.clone());
            let good_name = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            match v.as_str() {
                _ if self.env.len() >= MAX_VARS => {
                    return self.skip("containerEnv", &shown, "and the rest: too many variables");
                }
                _ if !good_name => self.skip("containerEnv", &shown, "not a variable name"),
                Some(text) if text.contains("${") => self.skip(
                    "containerEnv",
                    &shown,
                    "${…} substitution is the dev container tool's",
                ),
                Some(text) if text.len() > MAX_VALUE || text.contains('\0') => {
                    self.skip("containerEnv", &shown, "value too long or not text")
                }
                Some(text) => {
                    self.env.insert(name.clone(), text.to_string());
                }
                None => self.skip("containerEnv", &shown, "the value is not a string"),
            }
        }
    }

    fn take_ports(&mut self, ports: &serde_json::Value) {
        let Some(list) = ports.as_array() else {
            return self.skip("forwardPorts", ports, "not a list");
        };
        for p in list {
            let port = match p {
                serde_json::Value::Number(n) => n.as_u64(),
                serde_json::Value::String(s) => s.trim().parse::<u64>().ok(),
                _ => None,
            };
            match port.and_then(|n| u16::try_from(n).ok()).filter(|n| *n > 0) {
                _ if self.ports.len() >= MAX_PORTS => {
                    return self.skip("forwardPorts", p, "and the rest: too many ports");
                }
                Some(port) if !self.ports.iter().any(|q| q.port == port) => self.ports.push(PortSpec {
                    port,
                    host_port: None,
                    proto: Proto::Tcp,
                }),
                Some(_) => {}
                None => self.skip("forwardPorts", p, "not a port of the job's own"),
            }
        }
    }

    /// Give a container job `spec` the file's variables and ports: those
    /// the job names itself stay its own, and a job on no network gets no
    /// ports (it could not be reached on them). Called at admission, after
    /// the runner is known and before the launch: the record shows them.
    pub fn apply_to(&self, spec: &mut JobSpec, network: Network) {
        for (k, v) in &self.env {
            spec.env.entry(k.clone()).or_insert_with(|| v.clone());
        }
        if network == Network::None {
            return;
        }
        for p in &self.ports {
            if !spec.ports.iter().any(|q| q.port == p.port && q.proto == p.proto) {
                spec.ports.push(p.clone());
            }
        }
    }

    /// Whether it sets anything a job gets.
    pub fn is_empty(&self) -> bool {
        self.env.is_empty() && self.ports.is_empty() && self.user.is_none() && self.post_create.is_none()
    }

    /// What trusting the file allows, as `berth trust` says it: the user
    /// (root is a loosening), the variables, the ports.
    pub fn allows(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(u) = &self.user {
            out.push(format!("remoteUser = \"{u}\" (jobs run as this user)"));
        }
        if !self.env.is_empty() {
            let names: Vec<&str> = self.env.keys().map(String::as_str).collect();
            out.push(format!("containerEnv = {}", names.join(" ")));
        }
        if !self.ports.is_empty() {
            let ports: Vec<String> = self.ports.iter().map(|p| p.port.to_string()).collect();
            out.push(format!("forwardPorts = {}", ports.join(" ")));
        }
        if let Some(p) = &self.post_create {
            let shown: String = p.argv.join(" ").chars().take(80).collect();
            out.push(format!(
                "postCreateCommand = {} (run once on the project image, as a build step, with the project's egress and limits)",
                crate::inert::visible(&shown)
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> DevSettings {
        DevSettings::parse(
            PathBuf::from("/p/.devcontainer.json"),
            &json5::from_str(text).unwrap(),
        )
    }

    #[test]
    fn env_ports_and_user_are_read_from_jsonc() {
        let s = parse(
            r#"{ // comments and trailing commas, as the tool writes them
                "containerEnv": {"GREETING": "hello world", "EMPTY": ""},
                "forwardPorts": [8000, "3000", 8000,],
                "remoteUser": "root",
            }"#,
        );
        assert_eq!(s.env.get("GREETING").map(String::as_str), Some("hello world"));
        assert_eq!(s.env.get("EMPTY").map(String::as_str), Some(""));
        let ports: Vec<u16> = s.ports.iter().map(|p| p.port).collect();
        assert_eq!(ports, [8000, 3000], "a port forwarded twice is published once");
        assert!(
            s.ports
                .iter()
                .all(|p| p.host_port.is_none() && p.proto == Proto::Tcp)
        );
        assert_eq!(s.user.as_deref(), Some("root"));
        assert!(s.skipped.is_empty(), "{:?}", s.skipped);
        assert!(
            s.allows()[0].starts_with("remoteUser = \"root\""),
            "{:?}",
            s.allows()
        );
        assert_eq!(
            parse(r#"{"remoteUser": "1000:1000"}"#).user.as_deref(),
            Some("1000:1000")
        );
        assert!(parse(r#"{"image": "x"}"#).is_empty());
    }

    #[test]
    fn what_berth_cannot_apply_is_left_out_and_said() {
        let s = parse(
            r#"{"containerEnv": {"HOME_COPY": "${localEnv:HOME}", "BAD=NAME": "x", "N": 3, "OK": "1"},
                "forwardPorts": ["db:5432", 0, 70000, true, 5000],
                "remoteUser": "vscode"}"#,
        );
        assert_eq!(s.env.keys().collect::<Vec<_>>(), ["OK"]);
        assert_eq!(s.ports.iter().map(|p| p.port).collect::<Vec<_>>(), [5000]);
        assert_eq!(s.user, None, "a name is never looked up");
        let said = s.skipped.join("; ");
        for part in [
            "containerEnv \"HOME_COPY\" (${…} substitution",
            "containerEnv \"BAD=NAME\" (not a variable name)",
            "containerEnv \"N\" (the value is not a string)",
            "forwardPorts \"db:5432\" (not a port of the job's own)",
            "forwardPorts 70000",
            "remoteUser \"vscode\" (berth takes root or UID:GID",
        ] {
            assert!(said.contains(part), "{part}: {said}");
        }
        // Not the shapes the keys take: said, nothing taken.
        let s = parse(r#"{"containerEnv": ["A=1"], "forwardPorts": 8000, "remoteUser": 0}"#);
        assert!(s.is_empty() && s.skipped.len() == 3, "{s:?}");
    }

    #[test]
    fn a_post_create_command_is_a_string_or_words_and_nothing_else() {
        let argv = |text: &str| parse(text).post_create.map(|p| p.argv);
        assert_eq!(
            argv(r#"{"postCreateCommand": "pip install -r requirements.txt"}"#).unwrap(),
            ["/bin/sh", "-c", "pip install -r requirements.txt"]
        );
        assert_eq!(
            argv(r#"{"postCreateCommand": ["npm", "ci"]}"#).unwrap(),
            ["npm", "ci"]
        );
        let s = parse(r#"{"postCreateCommand": ["npm", "ci"], "remoteUser": "1000:1000"}"#);
        assert_eq!(s.post_create.unwrap().user.as_deref(), Some("1000:1000"));
        let long = "x".repeat(MAX_VALUE + 1);
        for bad in [
            r#"{"postCreateCommand": {"a": "make", "b": "npm ci"}}"#.to_string(),
            r#"{"postCreateCommand": ["npm", 3]}"#.into(),
            r#"{"postCreateCommand": "  "}"#.into(),
            r#"{"postCreateCommand": []}"#.into(),
            format!(r#"{{"postCreateCommand": "{long}"}}"#),
        ] {
            let s = parse(&bad);
            assert!(s.post_create.is_none(), "{bad}");
            assert!(s.skipped[0].starts_with("postCreateCommand "), "{:?}", s.skipped);
        }
    }

    #[test]
    fn a_huge_file_gives_a_bounded_set() {
        let vars: Vec<String> = (0..1000).map(|i| format!("\"V{i}\": \"x\"")).collect();
        let ports: Vec<String> = (1..1000).map(|i| i.to_string()).collect();
        let s = parse(&format!(
            "{{\"containerEnv\": {{{}}}, \"forwardPorts\": [{}]}}",
            vars.join(","),
            ports.join(",")
        ));
        assert_eq!((s.env.len(), s.ports.len()), (MAX_VARS, MAX_PORTS));
        assert_eq!(s.skipped.len(), 2, "{:?}", s.skipped);
    }

    #[test]
    fn the_jobs_own_env_and_ports_win_and_no_network_gets_no_ports() {
        let s = parse(r#"{"containerEnv": {"A": "file", "B": "file"}, "forwardPorts": [8000, 9000]}"#);
        let mut spec = JobSpec::shell("true");
        spec.env.insert("A".into(), "job".into());
        spec.ports.push(PortSpec {
            port: 8000,
            host_port: Some(18000),
            proto: Proto::Tcp,
        });
        s.apply_to(&mut spec, Network::Isolated);
        assert_eq!((spec.env["A"].as_str(), spec.env["B"].as_str()), ("job", "file"));
        let ports: Vec<(u16, Option<u16>)> = spec.ports.iter().map(|p| (p.port, p.host_port)).collect();
        assert_eq!(ports, [(8000, Some(18000)), (9000, None)]);
        let mut spec = JobSpec::shell("true");
        s.apply_to(&mut spec, Network::None);
        assert!(spec.ports.is_empty() && spec.env.len() == 2);
    }
}
