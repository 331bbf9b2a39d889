//! Which values of a project file loosen the sandbox, and what happens to
//! them when the user has not trusted the file.
//!
//! The baseline is what the user's own say gives (defaults ← the user's
//! config); a project value loosens when it gives a job more than that.
//! [`ROWS`] is the list, one row per loosening (how it is seen, how it is
//! put back); the manual's reference (`berth config --reference`) is
//! generated from it, and a test fails on a key of the key table that is
//! neither a row nor in `NEVER_LOOSENS`. A few ([`USERS_OWN`]:
//! `build_add_urls`, `fallback`, …) are never the file's to give, trusted
//! or not: the project's Dockerfile, which trust does not cover, would
//! use them.
//!
//! A loosening that only the `BERTH_*` variables or flags set again is the
//! user's say, not the file's: only values whose source is still the file
//! count. Untrusted ones are put back to the baseline (nothing loose can
//! leak into a job that skips admission) and listed, so a start is refused
//! with one line naming the key and `berth trust`.

use std::path::{Component, Path, PathBuf};

use super::SafetyLayer;
use super::jobs::size_text;
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

/// What a loosening sees beside the two configs: the project file's own
/// directory (resolved) and its `[safety]` table.
struct FileSide<'a> {
    dir: &'a Path,
    safety: Option<&'a SafetyLayer>,
}

/// Whether a project's value gives a job more than the baseline's, and the
/// value as the file says it.
type Looser = fn(&Config, &Config, &FileSide) -> Option<String>;

/// Put one field of a config back to the baseline's value.
type PutBack = fn(&mut Config, &Config);

/// One loosening: how to see it and how to undo it, in one row, so that a
/// key cannot be found looser without a way back (and a key of the key
/// table that is in no row and not in `NEVER_LOOSENS` fails a test).
struct Row {
    /// The name a refusal and `berth config` use.
    key: &'static str,
    /// Only a value whose source is still the file counts: the source key
    /// that must name it (`None`: the file's `[safety]` table, read as such).
    set_by: Option<&'static str>,
    /// The source key put back to the baseline's with the value.
    source: Option<&'static str>,
    /// What the manual's reference says of it.
    says: &'static str,
    looser: Looser,
    back: PutBack,
}

/// A key of the config (`"max_output" => max_output_bytes`: its name and
/// its field) whose value and source go back together.
macro_rules! row {
    ($key:literal => $($field:ident).+, $looser:expr) => {
        Row {
            key: $key,
            set_by: Some($key),
            source: Some($key),
            says: "yes, when looser than yours",
            looser: $looser,
            back: |c, b| c.$($field).+ = Clone::clone(&b.$($field).+),
        }
    };
}

/// Every loosening a project file can make, in the order a refusal lists
/// them.
const ROWS: &[Row] = &[
    row!("runner" => runner, |c, b, _| {
        let name = format!("{:?}", c.runner).to_lowercase();
        runner_loose(c.runner, b.runner).then(|| quoted(&name))
    }),
    row!("allow_host" => allow_host, |c, b, _| on(c.allow_host, b.allow_host)),
    row!("fallback" => fallback, |c, b, _| on(c.fallback, b.fallback)),
    row!("user" => user, |c, b, _|
        (c.user != b.user && !own_user(c)).then(|| quoted(c.user.as_deref().unwrap_or("")))),
    row!("network" => network, |c, b, _|
        (rank(c.network) > rank(b.network)).then(|| quoted(&c.network.to_string()))),
    row!("egress" => egress, |c, b, _|
        (reach(c.egress) > reach(b.egress)).then(|| quoted(c.egress.as_str()))),
    // A weaker kernel boundary than yours, or another runtime for gVisor.
    row!("isolation" => isolation, |c, b, _|
        (c.isolation < b.isolation).then(|| quoted(c.isolation.as_str()))),
    row!("agent_isolation" => agent_isolation, |c, b, _|
        (c.agent_isolation < b.agent_isolation).then(|| quoted(c.agent_isolation.as_str()))),
    row!("gvisor_runtime" => gvisor_runtime, |c, b, _|
        (c.gvisor_runtime != b.gvisor_runtime).then(|| quoted(&c.gvisor_runtime))),
    row!("egress_allow" => egress_allow, |c, b, _| added(&c.egress_allow, &b.egress_allow)),
    row!("publish" => publish, |c, b, _| {
        let engine = |p| p == Publish::Engine;
        (engine(c.publish) && !engine(b.publish)).then(|| quoted(c.publish.as_str()))
    }),
    row!("engine" => engine, |c, b, _| {
        let scoped = |e| e == EngineAccess::Scoped;
        (scoped(c.engine) && !scoped(b.engine)).then(|| quoted(c.engine.as_str()))
    }),
    row!("allow_engine" => allow_engine, |c, b, _| on(c.allow_engine, b.allow_engine)),
    row!("max_children" => max_children, |c, b, _|
        (c.max_children > b.max_children).then(|| c.max_children.to_string())),
    // Limits and retention raised above the user's say: a job that writes
    // the project file must not get itself 20 GiB or 32,768 processes on a
    // shared machine. Lowering any of them needs no trust.
    row!("cpus" => limits.cpus, |c, b, _|
        above(c.limits.cpus, b.limits.cpus).then(|| or_none(c.limits.cpus.map(|v| v.to_string())))),
    row!("memory" => limits.memory, |c, b, _| {
        let mem = |l: &Config| l.limits.memory.map(|v| v as f64);
        above(mem(c), mem(b)).then(|| or_none(c.limits.memory.map(size_text)))
    }),
    row!("pids" => limits.pids, |c, b, _| {
        let pids = |l: &Config| l.limits.pids.map(|v| v as f64);
        above(pids(c), pids(b)).then(|| or_none(c.limits.pids.map(|v| v.to_string())))
    }),
    row!("max_output" => max_output_bytes, |c, b, _|
        (c.max_output_bytes > b.max_output_bytes).then(|| size_text(c.max_output_bytes))),
    row!("ring_size" => ring_bytes, |c, b, _|
        (c.ring_bytes > b.ring_bytes).then(|| size_text(c.ring_bytes as u64))),
    row!("keep_runs" => keep_runs, |c, b, _|
        (c.keep_runs > b.keep_runs).then(|| c.keep_runs.to_string())),
    row!("keep_days" => keep_days, |c, b, _|
        (c.keep_days > b.keep_days).then(|| c.keep_days.to_string())),
    row!("layer_size" => layer_bytes, |c, b, _|
        (c.layer_bytes > b.layer_bytes).then(|| size_text(c.layer_bytes))),
    row!("layer_days" => layer_days, |c, b, _|
        (c.layer_days > b.layer_days).then(|| c.layer_days.to_string())),
    // Writing the checkout itself is looser than a layer, a layer looser
    // than nothing (`WriteMode`'s order).
    row!("write" => write, |c, b, _| (c.write > b.write).then(|| quoted(c.write.as_str()))),
    row!("agent_write" => agent_write, |c, b, _|
        (c.agent_write > b.agent_write).then(|| quoted(c.agent_write.as_str()))),
    row!("apply_max_deletes" => apply_max_deletes, |c, b, _|
        (c.apply_max_deletes > b.apply_max_deletes).then(|| c.apply_max_deletes.to_string())),
    row!("apply_protect" => apply_protect, |c, b, _| {
        let dropped = b.apply_protect.iter().any(|p| !c.apply_protect.contains(p));
        dropped.then(|| list(c.apply_protect.iter()))
    }),
    row!("agent_all_jobs" => agent_all_jobs, |c, b, _| on(c.agent_all_jobs, b.agent_all_jobs)),
    row!("project_symlinks" => project_symlinks, |c, b, _|
        on(c.project_symlinks, b.project_symlinks)),
    row!("build_add_urls" => build_add_urls, |c, b, _| on(c.build_add_urls, b.build_add_urls)),
    row!("read_only" => read_only, |c, b, _| (!c.read_only && b.read_only).then(|| "false".into())),
    row!("state_dir" => state_dir, |c, b, _|
        (c.state_dir != b.state_dir).then(|| quoted(&c.state_dir.display().to_string()))),
    // The project's own directory stays the workspace: the file's
    // directory is where a job may work.
    Row {
        key: "workspace",
        set_by: Some("workspace"),
        source: None,
        says: "yes, outside the file's directory",
        looser: |c, _, f| {
            let outside = !inside(&c.workspace, f.dir);
            outside.then(|| quoted(&c.workspace.display().to_string()))
        },
        back: |c, _| {
            if let Some(Source::File(f)) = c.sources.get("workspace").cloned() {
                c.workspace = f.parent().map(Path::to_path_buf).unwrap_or_default();
            }
        },
    },
    Row {
        key: "image.dockerfile",
        set_by: Some("image"),
        source: Some("image"),
        says: "`[image] dockerfile` (a build runs the project's `RUN` steps)",
        looser: |c, _, _| c.image_build.is_some().then(|| "(a project image build)".into()),
        back: |c, b| {
            c.image_build = None;
            c.image = b.image.clone();
        },
    },
    Row {
        key: "safety.default_blocklist",
        set_by: None,
        source: None,
        says: "yes, `false`",
        looser: |_, b, f| {
            let off = f.safety.is_some_and(|s| s.default_blocklist == Some(false));
            (off && b.safety.default_blocklist).then(|| "false".into())
        },
        back: |c, b| c.safety.default_blocklist = b.safety.default_blocklist,
    },
    Row {
        key: "safety.allow_env",
        set_by: None,
        source: None,
        says: "yes, names added",
        looser: |_, b, f| f.safety.and_then(|s| added(&s.allow_env, &b.safety.allow_env)),
        back: |c, b| c.safety.allow_env = b.safety.allow_env.clone(),
    },
    Row {
        key: "safety.security_log",
        set_by: None,
        source: None,
        says: "yes, another file",
        looser: |c, b, f| {
            let other = f.safety.is_some_and(|s| s.security_log.is_some());
            let moved = c.safety.security_log != b.safety.security_log;
            (other && moved).then(|| "(another file)".into())
        },
        back: |c, b| c.safety.security_log = b.safety.security_log.clone(),
    },
];

/// Keys of the key table a project file sets freely: none gives a job
/// more than the user's say. A key in neither this list nor [`ROWS`] fails
/// `every_key_is_a_loosening_or_said_not_to_be`.
#[cfg(test)]
const NEVER_LOOSENS: &[&str] = &[
    // Names and the manager's own pacing: they give no job more reach.
    "instance",
    "max_jobs",
    "max_queued",
    "daemon_idle",
    "warm_pool",
    "warm_idle",
    "mcp_idle",
    // A job's own clock: a longer one only lets it run until it ends.
    "timeout",
    "grace",
    // Where the image comes from is the image key's (a row), how long a
    // pull may take is only patience.
    "pull",
    "pull_timeout",
    "engine_patience",
    // Commands a caller runs as jobs: each one is admitted like any other.
    "test_command",
    "build_command",
    "recovery",
    // Whether the manager keeps a job's environment in its own records.
    "store_env",
];

/// What a project file setting `key` (a `berth config` name:
/// `safety.allow_env`) needs, for the manual's reference: `None` when it
/// never loosens. Read from [`ROWS`] and [`USERS_OWN`], so the manual
/// cannot miss a key added there.
pub(super) fn loosening(key: &str) -> Option<&'static str> {
    if USERS_OWN.contains(&key) {
        return Some("never applied from a project file, trusted or not: your own config only");
    }
    ROWS.iter()
        .find(|r| r.key == key || r.set_by == Some(key))
        .map(|r| r.says)
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
    let side = FileSide {
        dir: file_real.parent().unwrap_or(Path::new("/")),
        safety,
    };
    ROWS.iter()
        .filter(|r| r.set_by.is_none_or(from_file))
        .filter_map(|r| {
            (r.looser)(c, base, &side).map(|value| Loosening {
                file: file_real.to_path_buf(),
                key: r.key,
                value,
            })
        })
        .collect()
}

/// Put `key` back to the baseline's value (and source, where the row says).
fn revert(c: &mut Config, base: &Config, key: &str) {
    // Every key [`loosenings`] names is a row's: it has a way back.
    let Some(r) = ROWS.iter().find(|r| r.key == key) else {
        return;
    };
    (r.back)(c, base);
    if let Some(k) = r.source {
        match base.sources.get(k) {
            Some(s) => {
                c.sources.insert(k, s.clone());
            }
            None => {
                c.sources.remove(k);
            }
        }
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
mod tests;
