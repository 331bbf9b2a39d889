//! Which values of a project file loosen the sandbox, and what happens to
//! them when the user has not trusted the file.
//!
//! The baseline is what the user's own say gives (defaults ← the user's
//! config); a project value loosens when it gives a job more than that:
//! - `runner = "host"` (or `auto` where the user asked for `docker`): no container;
//! - `fallback = true` where the user said false: a host job when the engine is down;
//! - `allow_host = true`: agents may ask for host jobs;
//! - `user` other than the caller's own: root, or another uid's set-uid files;
//! - `network`: `bridge` over `project` over `isolated` over `none`;
//! - `read_only = false` where the user set true;
//! - `write` / `agent_write` looser than yours (`direct` over `layer` over
//!   `read-only`), a larger `apply_max_deletes`, fewer
//!   `apply_protect` patterns;
//! - `workspace` outside the file's own directory: the job sees more of the disk;
//! - `state_dir`: where berth writes its records and security log;
//! - `[safety]`: the default blocklist off, `allow_env` additions, another `security_log`;
//! - `[image] dockerfile`: a build that runs the project's `RUN` steps;
//! - `egress` wider than yours (`all` over `proxy` over `none`), hosts added
//!   to `egress_allow`, `publish = "engine"` (the engine's published ports
//!   take traffic from other machines that route to the job);
//! - `engine = "scoped"`, `allow_engine = true` and a larger `max_children`:
//!   jobs (or agents) start containers of their own through the engine;
//! - `build_add_urls = true`: the project's Dockerfile (agent-writable even
//!   when berth.toml is trusted) has the engine fetch URLs from its host.
//!   This one and `fallback` (a host job when the engine is down: no
//!   agent may get one from the files it writes) are never the file's to
//!   give, trusted or not ([`USERS_OWN`]): only the user's config,
//!   `BERTH_*` or flags.
//!
//! A loosening that only the `BERTH_*` variables or flags set again is the
//! user's say, not the file's: only values whose source is still the file
//! count. Untrusted ones are put back to the baseline (nothing loose can
//! leak into a job that skips admission) and listed, so a start is refused
//! with one line naming the key and `berth trust`.

use std::path::{Component, Path, PathBuf};

use super::SafetyLayer;
use super::{Config, Source, caller_user};
use crate::model::{Egress, EngineAccess, Network, Publish, RunnerChoice};
use crate::trust::Loosening;

/// Loosenings a project file cannot give even when trusted: what its
/// Dockerfile (which trust does not cover) would do with them.
const USERS_OWN: &[&str] = &["build_add_urls", "fallback", "project_symlinks", "agent_all_jobs"];

/// Compare `config` (all layers applied) with `baseline` (defaults and the
/// user's config) for the values `file` (holding `bytes`) set; untrusted
/// loosenings are reverted and recorded in `config.untrusted`.
pub(super) fn settle(
    config: &mut Config,
    baseline: &Config,
    file: &Path,
    bytes: &[u8],
    safety: Option<&SafetyLayer>,
) {
    let file_real = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    let found = loosenings(config, baseline, &file_real, file, safety);
    if found.is_empty() {
        return;
    }
    if config.trusted.allows(&file_real, bytes) {
        for l in found.iter().filter(|l| USERS_OWN.contains(&l.key)) {
            revert(config, baseline, l.key);
        }
        return;
    }
    for l in &found {
        revert(config, baseline, l.key);
    }
    config.untrusted = found;
}

/// Limits and retention `c` raises above `base` (the user's say): a job
/// that writes the project file must not get itself 20 GiB or 32,768
/// processes on a shared machine. Lowering any of them needs no trust.
fn raised_limits(c: &Config, base: &Config) -> Vec<(&'static str, String)> {
    let above = |a: Option<f64>, b: Option<f64>| a.unwrap_or(f64::INFINITY) > b.unwrap_or(f64::INFINITY);
    let mut out = Vec::new();
    if above(c.limits.cpus, base.limits.cpus) {
        out.push((
            "cpus",
            c.limits
                .cpus
                .map(|v| v.to_string())
                .unwrap_or_else(|| "none".into()),
        ));
    }
    let mem = |l: &Config| l.limits.memory.map(|v| v as f64);
    if above(mem(c), mem(base)) {
        out.push((
            "memory",
            c.limits
                .memory
                .map(super::jobs::size_text)
                .unwrap_or_else(|| "none".into()),
        ));
    }
    let pids = |l: &Config| l.limits.pids.map(|v| v as f64);
    if above(pids(c), pids(base)) {
        out.push((
            "pids",
            c.limits
                .pids
                .map(|v| v.to_string())
                .unwrap_or_else(|| "none".into()),
        ));
    }
    if c.max_output_bytes > base.max_output_bytes {
        out.push(("max_output", super::jobs::size_text(c.max_output_bytes)));
    }
    if c.ring_bytes > base.ring_bytes {
        out.push(("ring_size", super::jobs::size_text(c.ring_bytes as u64)));
    }
    if c.keep_runs > base.keep_runs {
        out.push(("keep_runs", c.keep_runs.to_string()));
    }
    if c.keep_days > base.keep_days {
        out.push(("keep_days", c.keep_days.to_string()));
    }
    if c.layer_bytes > base.layer_bytes {
        out.push(("layer_size", super::jobs::size_text(c.layer_bytes)));
    }
    if c.layer_days > base.layer_days {
        out.push(("layer_days", c.layer_days.to_string()));
    }
    out
}

fn loosenings(
    c: &Config,
    base: &Config,
    file_real: &Path,
    file: &Path,
    safety: Option<&SafetyLayer>,
) -> Vec<Loosening> {
    let from_file = |key: &str| matches!(c.sources.get(key), Some(Source::File(p)) if p == file);
    let mut out = Vec::new();
    let mut add = |key: &'static str, value: String| {
        out.push(Loosening {
            file: file_real.to_path_buf(),
            key,
            value,
        })
    };
    let quoted = |s: &str| format!("\"{s}\"");
    let runner_loose = match c.runner {
        RunnerChoice::Host => base.runner != RunnerChoice::Host,
        RunnerChoice::Auto => base.runner == RunnerChoice::Docker,
        RunnerChoice::Docker => false,
    };
    if from_file("runner") && runner_loose {
        add("runner", quoted(&format!("{:?}", c.runner).to_lowercase()));
    }
    if from_file("allow_host") && c.allow_host && !base.allow_host {
        add("allow_host", "true".into());
    }
    if from_file("fallback") && c.fallback && !base.fallback {
        add("fallback", "true".into());
    }
    if from_file("user") && c.user != base.user {
        let own = c.user.as_deref() == Some(caller_user().as_str()) && !nix::unistd::getuid().is_root();
        if !own {
            add("user", quoted(c.user.as_deref().unwrap_or("")));
        }
    }
    let rank = |n: Network| match n {
        Network::None => 0,
        Network::Isolated => 1,
        // The project's jobs reach each other: looser than isolated.
        Network::Project => 2,
        Network::Bridge => 3,
    };
    if from_file("network") && rank(c.network) > rank(base.network) {
        add("network", quoted(&c.network.to_string()));
    }
    let reach = |e: Egress| match e {
        Egress::None => 0,
        Egress::Proxy => 1,
        Egress::All => 2,
    };
    if from_file("egress") && reach(c.egress) > reach(base.egress) {
        add("egress", quoted(c.egress.as_str()));
    }
    // A weaker kernel boundary than yours, or another runtime for gVisor.
    if from_file("isolation") && c.isolation < base.isolation {
        add("isolation", quoted(c.isolation.as_str()));
    }
    if from_file("agent_isolation") && c.agent_isolation < base.agent_isolation {
        add("agent_isolation", quoted(c.agent_isolation.as_str()));
    }
    if from_file("gvisor_runtime") && c.gvisor_runtime != base.gvisor_runtime {
        add("gvisor_runtime", quoted(&c.gvisor_runtime));
    }
    let more: Vec<&String> = c
        .egress_allow
        .iter()
        .filter(|h| !base.egress_allow.contains(h))
        .collect();
    if from_file("egress_allow") && !more.is_empty() {
        add(
            "egress_allow",
            format!(
                "[{}]",
                more.iter().map(|v| quoted(v)).collect::<Vec<_>>().join(", ")
            ),
        );
    }
    if from_file("publish") && c.publish == Publish::Engine && base.publish != Publish::Engine {
        add("publish", quoted(c.publish.as_str()));
    }
    if from_file("engine") && c.engine == EngineAccess::Scoped && base.engine != EngineAccess::Scoped {
        add("engine", quoted(c.engine.as_str()));
    }
    if from_file("allow_engine") && c.allow_engine && !base.allow_engine {
        add("allow_engine", "true".into());
    }
    if from_file("max_children") && c.max_children > base.max_children {
        add("max_children", c.max_children.to_string());
    }
    for (key, value) in raised_limits(c, base) {
        if from_file(key) {
            add(key, value);
        }
    }
    // Writing the checkout itself is looser than a layer, a layer looser
    // than nothing (`WriteMode`'s order).
    if from_file("write") && c.write > base.write {
        add("write", quoted(c.write.as_str()));
    }
    if from_file("agent_write") && c.agent_write > base.agent_write {
        add("agent_write", quoted(c.agent_write.as_str()));
    }
    if from_file("apply_max_deletes") && c.apply_max_deletes > base.apply_max_deletes {
        add("apply_max_deletes", c.apply_max_deletes.to_string());
    }
    if from_file("apply_protect") && base.apply_protect.iter().any(|p| !c.apply_protect.contains(p)) {
        add(
            "apply_protect",
            format!(
                "[{}]",
                c.apply_protect
                    .iter()
                    .map(|v| quoted(v))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    if from_file("agent_all_jobs") && c.agent_all_jobs && !base.agent_all_jobs {
        add("agent_all_jobs", "true".into());
    }
    if from_file("project_symlinks") && c.project_symlinks && !base.project_symlinks {
        add("project_symlinks", "true".into());
    }
    if from_file("build_add_urls") && c.build_add_urls && !base.build_add_urls {
        add("build_add_urls", "true".into());
    }
    if from_file("read_only") && !c.read_only && base.read_only {
        add("read_only", "false".into());
    }
    if from_file("state_dir") && c.state_dir != base.state_dir {
        add("state_dir", quoted(&c.state_dir.display().to_string()));
    }
    let dir = file_real.parent().unwrap_or(Path::new("/"));
    let ws_set = matches!(c.sources.get("workspace"), Some(Source::File(p)) if p == file);
    if ws_set && !inside(&c.workspace, dir) {
        add("workspace", quoted(&c.workspace.display().to_string()));
    }
    if from_file("image") && c.image_build.is_some() {
        add("image.dockerfile", "(a project image build)".into());
    }
    if let Some(s) = safety {
        if s.default_blocklist == Some(false) && base.safety.default_blocklist {
            add("safety.default_blocklist", "false".into());
        }
        let more: Vec<&String> = s
            .allow_env
            .iter()
            .filter(|v| !base.safety.allow_env.contains(v))
            .collect();
        if !more.is_empty() {
            add(
                "safety.allow_env",
                format!(
                    "[{}]",
                    more.iter().map(|v| quoted(v)).collect::<Vec<_>>().join(", ")
                ),
            );
        }
        if s.security_log.is_some() && c.safety.security_log != base.safety.security_log {
            add("safety.security_log", "(another file)".into());
        }
    }
    out
}

/// Put `key` back to the baseline's value and source.
fn revert(c: &mut Config, base: &Config, key: &str) {
    let source = |c: &mut Config, k: &'static str| match base.sources.get(k) {
        Some(s) => {
            c.sources.insert(k, s.clone());
        }
        None => {
            c.sources.remove(k);
        }
    };
    match key {
        "runner" => {
            c.runner = base.runner;
            source(c, "runner");
        }
        "fallback" => {
            c.fallback = base.fallback;
            source(c, "fallback");
        }
        "allow_host" => {
            c.allow_host = base.allow_host;
            source(c, "allow_host");
        }
        "user" => {
            c.user = base.user.clone();
            source(c, "user");
        }
        "network" => {
            c.network = base.network;
            source(c, "network");
        }
        "egress" => {
            c.egress = base.egress;
            source(c, "egress");
        }
        "egress_allow" => {
            c.egress_allow = base.egress_allow.clone();
            source(c, "egress_allow");
        }
        "isolation" => {
            c.isolation = base.isolation;
            source(c, "isolation");
        }
        "agent_isolation" => {
            c.agent_isolation = base.agent_isolation;
            source(c, "agent_isolation");
        }
        "gvisor_runtime" => {
            c.gvisor_runtime = base.gvisor_runtime.clone();
            source(c, "gvisor_runtime");
        }
        "publish" => {
            c.publish = base.publish;
            source(c, "publish");
        }
        "engine" => {
            c.engine = base.engine;
            source(c, "engine");
        }
        "allow_engine" => {
            c.allow_engine = base.allow_engine;
            source(c, "allow_engine");
        }
        "max_children" => {
            c.max_children = base.max_children;
            source(c, "max_children");
        }
        "cpus" => {
            c.limits.cpus = base.limits.cpus;
            source(c, "cpus");
        }
        "memory" => {
            c.limits.memory = base.limits.memory;
            source(c, "memory");
        }
        "pids" => {
            c.limits.pids = base.limits.pids;
            source(c, "pids");
        }
        "max_output" => {
            c.max_output_bytes = base.max_output_bytes;
            source(c, "max_output");
        }
        "ring_size" => {
            c.ring_bytes = base.ring_bytes;
            source(c, "ring_size");
        }
        "keep_runs" => {
            c.keep_runs = base.keep_runs;
            source(c, "keep_runs");
        }
        "keep_days" => {
            c.keep_days = base.keep_days;
            source(c, "keep_days");
        }
        "layer_size" => {
            c.layer_bytes = base.layer_bytes;
            source(c, "layer_size");
        }
        "layer_days" => {
            c.layer_days = base.layer_days;
            source(c, "layer_days");
        }
        "agent_all_jobs" => {
            c.agent_all_jobs = base.agent_all_jobs;
            source(c, "agent_all_jobs");
        }
        "project_symlinks" => {
            c.project_symlinks = base.project_symlinks;
            source(c, "project_symlinks");
        }
        "build_add_urls" => {
            c.build_add_urls = base.build_add_urls;
            source(c, "build_add_urls");
        }
        "read_only" => {
            c.read_only = base.read_only;
            source(c, "read_only");
        }
        "write" => {
            c.write = base.write;
            source(c, "write");
        }
        "agent_write" => {
            c.agent_write = base.agent_write;
            source(c, "agent_write");
        }
        "apply_max_deletes" => {
            c.apply_max_deletes = base.apply_max_deletes;
            source(c, "apply_max_deletes");
        }
        "apply_protect" => {
            c.apply_protect = base.apply_protect.clone();
            source(c, "apply_protect");
        }
        "state_dir" => {
            c.state_dir = base.state_dir.clone();
            source(c, "state_dir");
        }
        // The project's own directory stays the workspace: the file's
        // directory is where a job may work.
        "workspace" => {
            if let Some(Source::File(f)) = c.sources.get("workspace").cloned() {
                c.workspace = f.parent().map(Path::to_path_buf).unwrap_or_default();
            }
        }
        "image.dockerfile" => {
            c.image_build = None;
            c.image = base.image.clone();
            source(c, "image");
        }
        "safety.default_blocklist" => c.safety.default_blocklist = base.safety.default_blocklist,
        "safety.allow_env" => c.safety.allow_env = base.safety.allow_env.clone(),
        "safety.security_log" => c.safety.security_log = base.safety.security_log.clone(),
        _ => {}
    }
}

/// Whether `path` lies inside `dir` (both resolved: symlinks followed where
/// they exist, `..` taken lexically where they do not).
fn inside(path: &Path, dir: &Path) -> bool {
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| lexical(p));
    real(path).starts_with(real(dir))
}

fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::Layer;
    use super::*;
    use crate::model::Isolation;

    /// A project at `dir` with `berth.toml` holding `text`, loaded with a
    /// user config at `user` (may be missing).
    fn load(dir: &Path, text: &str, user: &Path) -> Config {
        std::fs::write(dir.join("berth.toml"), text).unwrap();
        let user = user.to_string_lossy().into_owned();
        Config::load_with(dir, Layer::default(), |k| {
            (k == crate::trust::USER_CONFIG_ENV).then(|| user.clone())
        })
        .unwrap()
    }

    #[test]
    fn an_untrusted_file_cannot_put_the_projects_jobs_in_one_pod() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("proj");
        std::fs::create_dir_all(&dir).unwrap();
        let c = load(&dir, "network = \"project\"\n", &tmp.path().join("user.toml"));
        let keys: Vec<&str> = c.untrusted.iter().map(|l| l.key).collect();
        assert_eq!(keys, ["network"]);
        assert_eq!(c.network, Network::Isolated);
    }

    #[test]
    fn raising_limits_needs_trust_and_lowering_does_not() {
        let tmp = tempfile::tempdir().unwrap();
        let user = tmp.path().join("user.toml");
        let c = load(
            tmp.path(),
            "memory = \"20g\"\npids = 32768\nmax_output = \"100g\"\nring_size = \"1g\"\nkeep_runs = 100000\ncpus = 0.5\n",
            &user,
        );
        let keys: Vec<&str> = c.untrusted.iter().map(|l| l.key).collect();
        assert_eq!(keys, ["memory", "pids", "max_output", "ring_size", "keep_runs"]);
        let base = load(tmp.path(), "", &user);
        assert_eq!(c.limits.memory, base.limits.memory, "not applied");
        assert_eq!(c.limits.pids, base.limits.pids);
        assert_eq!(
            (c.max_output_bytes, c.ring_bytes, c.keep_runs),
            (base.max_output_bytes, base.ring_bytes, base.keep_runs)
        );
        assert_eq!(c.limits.cpus, Some(0.5), "a lower limit applies untrusted");
        // Reverted values are the user's again, and say so in `berth config`.
        for key in ["memory", "pids", "max_output", "ring_size", "keep_runs"] {
            let from = c.sources.get(key);
            assert!(
                !matches!(from, Some(Source::File(p)) if p.ends_with("berth.toml")),
                "{key}: {from:?}"
            );
        }
    }

    #[test]
    fn an_untrusted_file_cannot_loosen_and_a_trusted_one_can() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("proj");
        std::fs::create_dir_all(&dir).unwrap();
        let user = tmp.path().join("user.toml");
        let text = "runner = \"host\"\nuser = \"root\"\nnetwork = \"bridge\"\nworkspace = \"/usr/local/share\"\n\
                    fallback = true\n[safety]\ndefault_blocklist = false\nallow_env = [\"LD_PRELOAD\"]\n";
        let c = load(&dir, text, &user);
        let keys: Vec<&str> = c.untrusted.iter().map(|l| l.key).collect();
        // fallback = true is the default already: no loosening.
        assert_eq!(
            keys,
            [
                "runner",
                "user",
                "network",
                "workspace",
                "safety.default_blocklist",
                "safety.allow_env"
            ]
        );
        assert_eq!(c.runner, RunnerChoice::Auto);
        assert_eq!(c.user, None);
        assert_eq!(c.network, Network::Isolated);
        assert_eq!(c.workspace, dir);
        assert!(c.safety.default_blocklist && c.safety.allow_env.is_empty());
        let err = c.untrusted[0].refusal().to_string();
        assert!(
            err.contains("runner = \"host\"") && err.contains("berth trust"),
            "{err}"
        );

        let file = std::fs::canonicalize(dir.join("berth.toml")).unwrap();
        crate::trust::record(&user, &file, Some(&crate::trust::digest(text.as_bytes()))).unwrap();
        let c = load(&dir, text, &user);
        assert!(c.untrusted.is_empty(), "{:?}", c.untrusted);
        assert_eq!(c.runner, RunnerChoice::Host);
        assert_eq!(c.user.as_deref(), Some("root"));
        assert!(!c.safety.default_blocklist);

        // One byte changed: untrusted again.
        let c = load(&dir, &format!("{text}\n"), &user);
        assert_eq!(c.untrusted.len(), 6);
    }

    #[test]
    fn tightening_needs_no_trust_and_the_users_own_say_is_not_the_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("proj");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let user = tmp.path().join("user.toml");
        let c = load(
            &dir,
            "runner = \"docker\"\nnetwork = \"none\"\nread_only = true\nfallback = false\nworkspace = \"sub\"\n\
             image = \"x:1\"\n[safety]\nblocked = [{ pattern = \"x\", reason = \"y\" }]\n",
            &user,
        );
        assert!(c.untrusted.is_empty(), "{:?}", c.untrusted);
        assert_eq!(c.workspace, dir.join("sub"));
        // The user's config allows what the project then repeats.
        std::fs::write(&user, "runner = \"host\"\nnetwork = \"bridge\"\n").unwrap();
        let c = load(&dir, "runner = \"host\"\nnetwork = \"bridge\"\n", &user);
        assert!(c.untrusted.is_empty(), "{:?}", c.untrusted);
        assert_eq!(c.runner, RunnerChoice::Host);
        // The user's read_only = true cannot be undone by the project.
        std::fs::write(&user, "read_only = true\n").unwrap();
        let c = load(&dir, "read_only = false\n", &user);
        assert_eq!(
            c.untrusted.iter().map(|l| l.key).collect::<Vec<_>>(),
            ["read_only"]
        );
        assert!(c.read_only);
    }

    #[test]
    fn a_scoped_engine_from_a_project_file_needs_trust() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("proj");
        std::fs::create_dir_all(&dir).unwrap();
        let user = tmp.path().join("user.toml");
        let text = "engine = \"scoped\"\nallow_engine = true\nmax_children = 20\n";
        let c = load(&dir, text, &user);
        assert_eq!(
            c.untrusted.iter().map(|l| l.key).collect::<Vec<_>>(),
            ["engine", "allow_engine", "max_children"]
        );
        assert_eq!(c.engine, EngineAccess::None);
        assert!(!c.allow_engine);
        assert_eq!(c.max_children, crate::config::DEFAULT_MAX_CHILDREN);
        // Fewer children, or none, only tightens.
        let c = load(&dir, "engine = \"none\"\nmax_children = 2\n", &user);
        assert!(c.untrusted.is_empty(), "{:?}", c.untrusted);
        assert_eq!(c.max_children, 2);
        // The user's own config says scoped: the project repeating it is fine.
        std::fs::write(&user, "engine = \"scoped\"\n").unwrap();
        let c = load(&dir, "engine = \"scoped\"\n", &user);
        assert!(c.untrusted.is_empty(), "{:?}", c.untrusted);
        assert_eq!(c.engine, EngineAccess::Scoped);
        let err = Config::load_with(&dir, Layer::default(), |k| {
            (k == "BERTH_ENGINE").then(|| "all".to_string())
        })
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("engine") && err.contains("scoped") && !err.contains('\n'),
            "{err}"
        );
    }

    #[test]
    fn wider_egress_and_engine_publishing_need_trust() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("proj");
        std::fs::create_dir_all(&dir).unwrap();
        let user = tmp.path().join("user.toml");
        let c = load(
            &dir,
            "egress = \"all\"\negress_allow = [\"evil.example\"]\npublish = \"engine\"\n",
            &user,
        );
        let keys: Vec<&str> = c.untrusted.iter().map(|l| l.key).collect();
        assert_eq!(keys, ["egress", "egress_allow", "publish"]);
        assert_eq!(c.egress, Egress::Proxy);
        assert!(!c.egress_allow.iter().any(|h| h == "evil.example"));
        assert_eq!(c.publish, Publish::Berth);
        // Narrower is fine without trust.
        let c = load(&dir, "egress = \"none\"\n", &user);
        assert!(c.untrusted.is_empty(), "{:?}", c.untrusted);
        assert_eq!(c.egress, Egress::None);
    }

    #[test]
    fn a_weaker_isolation_or_another_runtime_needs_trust_a_stronger_one_does_not() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("proj");
        std::fs::create_dir_all(&dir).unwrap();
        let user = tmp.path().join("user.toml");
        std::fs::write(&user, "isolation = \"gvisor\"\n").unwrap();
        let c = load(
            &dir,
            "isolation = \"container\"\ngvisor_runtime = \"runc\"\n",
            &user,
        );
        let keys: Vec<&str> = c.untrusted.iter().map(|l| l.key).collect();
        assert_eq!(keys, ["isolation", "gvisor_runtime"]);
        assert_eq!(
            (c.isolation, c.gvisor_runtime.as_str()),
            (Isolation::Gvisor, "runsc")
        );
        std::fs::write(&user, "").unwrap();
        let c = load(&dir, "isolation = \"gvisor\"\n", &user);
        assert!(c.untrusted.is_empty(), "{:?}", c.untrusted);
        assert_eq!(c.isolation, Isolation::Gvisor);
    }

    #[test]
    fn only_the_users_own_config_lets_a_build_add_urls() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("proj");
        std::fs::create_dir_all(&dir).unwrap();
        let user = tmp.path().join("user.toml");
        let text = "build_add_urls = true\n";
        let c = load(&dir, text, &user);
        assert_eq!(
            c.untrusted.iter().map(|l| l.key).collect::<Vec<_>>(),
            ["build_add_urls"]
        );
        assert!(!c.build_add_urls);
        // Trusted, the file still cannot give it (its Dockerfile is not trusted).
        let file = std::fs::canonicalize(dir.join("berth.toml")).unwrap();
        crate::trust::record(&user, &file, Some(&crate::trust::digest(text.as_bytes()))).unwrap();
        let c = load(&dir, text, &user);
        assert!(c.untrusted.is_empty(), "{:?}", c.untrusted);
        assert!(!c.build_add_urls);
        // The user's own config gives it.
        let mut own = std::fs::read_to_string(&user).unwrap();
        own.insert_str(0, "build_add_urls = true\n");
        std::fs::write(&user, own).unwrap();
        let c = load(&dir, "", &user);
        assert!(c.build_add_urls);
    }

    #[test]
    fn a_workspace_escaping_by_dotdot_or_symlink_is_outside() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("proj");
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink("/home", dir.join("link")).unwrap();
        let user = tmp.path().join("user.toml");
        for ws in ["..", "sub/../..", "link", "/home"] {
            let c = load(&dir, &format!("workspace = \"{ws}\"\n"), &user);
            assert_eq!(
                c.untrusted.iter().map(|l| l.key).collect::<Vec<_>>(),
                ["workspace"],
                "{ws}"
            );
            assert_eq!(c.workspace, dir, "{ws}");
        }
    }
}
