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
            let _ = revert(config, baseline, l.key);
        }
        return;
    }
    for l in &found {
        let _ = revert(config, baseline, l.key);
    }
    config.untrusted = found;
}

/// Whether a project's value gives a job more than the baseline's, and the
/// value as the file says it.
type Looser = fn(&Config, &Config) -> Option<String>;

/// Each key a project file may loosen in the config itself, in the order a
/// refusal lists them: its value when `c` gives a job more than `b` (the
/// baseline). A table rather than a branch per key, so that a new key is
/// one line here and one in [`PUT_BACK`].
const LOOSER: &[(&str, Looser)] = &[
    ("runner", |c, b| {
        runner_loose(c.runner, b.runner).then(|| quoted(&format!("{:?}", c.runner).to_lowercase()))
    }),
    ("allow_host", |c, b| on(c.allow_host, b.allow_host)),
    ("fallback", |c, b| on(c.fallback, b.fallback)),
    ("user", |c, b| {
        (c.user != b.user && !own_user(c)).then(|| quoted(c.user.as_deref().unwrap_or("")))
    }),
    ("network", |c, b| {
        (rank(c.network) > rank(b.network)).then(|| quoted(&c.network.to_string()))
    }),
    ("egress", |c, b| {
        (reach(c.egress) > reach(b.egress)).then(|| quoted(c.egress.as_str()))
    }),
    // A weaker kernel boundary than yours, or another runtime for gVisor.
    ("isolation", |c, b| {
        (c.isolation < b.isolation).then(|| quoted(c.isolation.as_str()))
    }),
    ("agent_isolation", |c, b| {
        (c.agent_isolation < b.agent_isolation).then(|| quoted(c.agent_isolation.as_str()))
    }),
    ("gvisor_runtime", |c, b| {
        (c.gvisor_runtime != b.gvisor_runtime).then(|| quoted(&c.gvisor_runtime))
    }),
    ("egress_allow", |c, b| added(&c.egress_allow, &b.egress_allow)),
    ("publish", |c, b| {
        (c.publish == Publish::Engine && b.publish != Publish::Engine).then(|| quoted(c.publish.as_str()))
    }),
    ("engine", |c, b| {
        (c.engine == EngineAccess::Scoped && b.engine != EngineAccess::Scoped)
            .then(|| quoted(c.engine.as_str()))
    }),
    ("allow_engine", |c, b| on(c.allow_engine, b.allow_engine)),
    ("max_children", |c, b| {
        (c.max_children > b.max_children).then(|| c.max_children.to_string())
    }),
    // Limits and retention raised above the user's say: a job that writes
    // the project file must not get itself 20 GiB or 32,768 processes on a
    // shared machine. Lowering any of them needs no trust.
    ("cpus", |c, b| {
        above(c.limits.cpus, b.limits.cpus).then(|| or_none(c.limits.cpus.map(|v| v.to_string())))
    }),
    ("memory", |c, b| {
        let mem = |l: &Config| l.limits.memory.map(|v| v as f64);
        above(mem(c), mem(b)).then(|| or_none(c.limits.memory.map(super::jobs::size_text)))
    }),
    ("pids", |c, b| {
        let pids = |l: &Config| l.limits.pids.map(|v| v as f64);
        above(pids(c), pids(b)).then(|| or_none(c.limits.pids.map(|v| v.to_string())))
    }),
    ("max_output", |c, b| {
        (c.max_output_bytes > b.max_output_bytes).then(|| super::jobs::size_text(c.max_output_bytes))
    }),
    ("ring_size", |c, b| {
        (c.ring_bytes > b.ring_bytes).then(|| super::jobs::size_text(c.ring_bytes as u64))
    }),
    ("keep_runs", |c, b| {
        (c.keep_runs > b.keep_runs).then(|| c.keep_runs.to_string())
    }),
    ("keep_days", |c, b| {
        (c.keep_days > b.keep_days).then(|| c.keep_days.to_string())
    }),
    ("layer_size", |c, b| {
        (c.layer_bytes > b.layer_bytes).then(|| super::jobs::size_text(c.layer_bytes))
    }),
    ("layer_days", |c, b| {
        (c.layer_days > b.layer_days).then(|| c.layer_days.to_string())
    }),
    // Writing the checkout itself is looser than a layer, a layer looser
    // than nothing (`WriteMode`'s order).
    ("write", |c, b| {
        (c.write > b.write).then(|| quoted(c.write.as_str()))
    }),
    ("agent_write", |c, b| {
        (c.agent_write > b.agent_write).then(|| quoted(c.agent_write.as_str()))
    }),
    ("apply_max_deletes", |c, b| {
        (c.apply_max_deletes > b.apply_max_deletes).then(|| c.apply_max_deletes.to_string())
    }),
    ("apply_protect", |c, b| {
        let dropped = b.apply_protect.iter().any(|p| !c.apply_protect.contains(p));
        dropped.then(|| list(c.apply_protect.iter()))
    }),
    ("agent_all_jobs", |c, b| on(c.agent_all_jobs, b.agent_all_jobs)),
    ("project_symlinks", |c, b| {
        on(c.project_symlinks, b.project_symlinks)
    }),
    ("build_add_urls", |c, b| on(c.build_add_urls, b.build_add_urls)),
    ("read_only", |c, b| {
        (!c.read_only && b.read_only).then(|| "false".into())
    }),
    ("state_dir", |c, b| {
        (c.state_dir != b.state_dir).then(|| quoted(&c.state_dir.display().to_string()))
    }),
];

/// What a project file setting `key` (a `berth config` name:
/// `safety.allow_env`) needs, for the manual's reference: `None` when it
/// never loosens. Read from [`LOOSER`] and [`USERS_OWN`], so the manual
/// cannot miss a key added there.
pub(super) fn loosening(key: &str) -> Option<&'static str> {
    if USERS_OWN.contains(&key) {
        return Some("never applied from a project file, trusted or not: your own config only");
    }
    if LOOSER.iter().any(|(k, _)| *k == key) {
        return Some("yes, when looser than yours");
    }
    // The ones [`loosenings`] checks by hand, beside the table.
    match key {
        "workspace" => Some("yes, outside the file's directory"),
        "image" => Some("`[image] dockerfile` (a build runs the project's `RUN` steps)"),
        "safety.default_blocklist" => Some("yes, `false`"),
        "safety.allow_env" => Some("yes, names added"),
        "safety.security_log" => Some("yes, another file"),
        _ => None,
    }
}

fn quoted(s: &str) -> String {
    format!("\"{s}\"")
}

/// `[“a”, “b”]`, as a list is written in the file.
fn list<'a>(items: impl Iterator<Item = &'a String>) -> String {
    format!("[{}]", items.map(|v| quoted(v)).collect::<Vec<_>>().join(", "))
}

/// A switch the file turns on that the baseline leaves off.
fn on(c: bool, b: bool) -> Option<String> {
    (c && !b).then(|| "true".into())
}

/// A limit above the baseline's (none is no limit: the highest).
fn above(a: Option<f64>, b: Option<f64>) -> bool {
    a.unwrap_or(f64::INFINITY) > b.unwrap_or(f64::INFINITY)
}

fn or_none(v: Option<String>) -> String {
    v.unwrap_or_else(|| "none".into())
}

/// Entries of `c` that `b` does not have, as a list; none: not looser.
fn added(c: &[String], b: &[String]) -> Option<String> {
    let more: Vec<&String> = c.iter().filter(|h| !b.contains(h)).collect();
    (!more.is_empty()).then(|| list(more.into_iter()))
}

/// `runner = "host"` over the baseline's, `auto` where it said `docker`,
/// or `swarm` (the workspace copied to other machines, no egress proxy).
fn runner_loose(c: RunnerChoice, b: RunnerChoice) -> bool {
    match c {
        RunnerChoice::Host => b != RunnerChoice::Host,
        RunnerChoice::Swarm => b != RunnerChoice::Swarm,
        RunnerChoice::Auto => b == RunnerChoice::Docker,
        RunnerChoice::Docker => false,
    }
}

/// The file names the caller's own user (and the caller is not root): no
/// other uid's files, so not a loosening.
fn own_user(c: &Config) -> bool {
    c.user.as_deref() == Some(caller_user().as_str()) && !nix::unistd::getuid().is_root()
}

fn rank(n: Network) -> u8 {
    match n {
        Network::None => 0,
        Network::Isolated => 1,
        // The project's jobs reach each other: looser than isolated.
        Network::Project => 2,
        Network::Bridge => 3,
    }
}

fn reach(e: Egress) -> u8 {
    match e {
        Egress::None => 0,
        Egress::Proxy => 1,
        Egress::All => 2,
    }
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
    for (key, looser) in LOOSER {
        if from_file(key)
            && let Some(value) = looser(c, base)
        {
            add(key, value);
        }
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
        if let Some(more) = added(&s.allow_env, &base.safety.allow_env) {
            add("safety.allow_env", more);
        }
        if s.security_log.is_some() && c.safety.security_log != base.safety.security_log {
            add("safety.security_log", "(another file)".into());
        }
    }
    out
}

/// Put one field of a config back to the baseline's value.
type PutBack = fn(&mut Config, &Config);

/// Each key [`revert`] puts back by copying the baseline's value (its
/// source follows): the keys of [`LOOSER`].
const PUT_BACK: &[(&str, PutBack)] = &[
    ("runner", |c, b| c.runner = b.runner),
    ("fallback", |c, b| c.fallback = b.fallback),
    ("allow_host", |c, b| c.allow_host = b.allow_host),
    ("user", |c, b| c.user = b.user.clone()),
    ("network", |c, b| c.network = b.network),
    ("egress", |c, b| c.egress = b.egress),
    ("egress_allow", |c, b| c.egress_allow = b.egress_allow.clone()),
    ("isolation", |c, b| c.isolation = b.isolation),
    ("agent_isolation", |c, b| c.agent_isolation = b.agent_isolation),
    ("gvisor_runtime", |c, b| {
        c.gvisor_runtime = b.gvisor_runtime.clone()
    }),
    ("publish", |c, b| c.publish = b.publish),
    ("engine", |c, b| c.engine = b.engine),
    ("allow_engine", |c, b| c.allow_engine = b.allow_engine),
    ("max_children", |c, b| c.max_children = b.max_children),
    ("cpus", |c, b| c.limits.cpus = b.limits.cpus),
    ("memory", |c, b| c.limits.memory = b.limits.memory),
    ("pids", |c, b| c.limits.pids = b.limits.pids),
    ("max_output", |c, b| c.max_output_bytes = b.max_output_bytes),
    ("ring_size", |c, b| c.ring_bytes = b.ring_bytes),
    ("keep_runs", |c, b| c.keep_runs = b.keep_runs),
    ("keep_days", |c, b| c.keep_days = b.keep_days),
    ("layer_size", |c, b| c.layer_bytes = b.layer_bytes),
    ("layer_days", |c, b| c.layer_days = b.layer_days),
    ("agent_all_jobs", |c, b| c.agent_all_jobs = b.agent_all_jobs),
    ("project_symlinks", |c, b| c.project_symlinks = b.project_symlinks),
    ("build_add_urls", |c, b| c.build_add_urls = b.build_add_urls),
    ("read_only", |c, b| c.read_only = b.read_only),
    ("write", |c, b| c.write = b.write),
    ("agent_write", |c, b| c.agent_write = b.agent_write),
    ("apply_max_deletes", |c, b| {
        c.apply_max_deletes = b.apply_max_deletes
    }),
    ("apply_protect", |c, b| c.apply_protect = b.apply_protect.clone()),
    ("state_dir", |c, b| c.state_dir = b.state_dir.clone()),
];

/// Put `key` back to the baseline's value and source.
/// Returns whether it knew the key: every key [`loosenings`] can name must
/// have a way back (a test holds each), or an untrusted file's value would
/// be kept silently.
fn revert(c: &mut Config, base: &Config, key: &str) -> bool {
    let source = |c: &mut Config, k: &'static str| match base.sources.get(k) {
        Some(s) => {
            c.sources.insert(k, s.clone());
        }
        None => {
            c.sources.remove(k);
        }
    };
    if let Some((k, put_back)) = PUT_BACK.iter().find(|(k, _)| *k == key) {
        put_back(c, base);
        source(c, k);
        return true;
    }
    match key {
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
        _ => {
            tracing::error!(
                key,
                "no way back for a loosening; it stays refused for agents but is kept"
            );
            return false;
        }
    }
    true
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
mod tests;
