//! The caller's project: which `berth.toml`, workspace, rules, image and
//! limits apply to a job.
//!
//! One manager (the daemon, or `berth mcp`) serves callers from many
//! directories. A job that names its caller's directory
//! ([`JobSpec::caller_cwd`]) runs under that caller's project, resolved here
//! exactly as a manager started in that directory would resolve it: the
//! `berth.toml` found from there upwards (or the caller's `BERTH_CONFIG`),
//! then the caller's `BERTH_*` variables. What belongs to the whole instance
//! (its store, cap, retention, ring size) stays the running manager's; a
//! project that sets one of those gets a note saying it was not applied, so
//! nothing is silently different. A job without a caller directory (library
//! use) runs under the manager's own configuration.
//!
//! The note is given to the first job of a project that gets it, and again
//! only when it says something else (the project's file changed what it
//! sets): a warning repeated on every run is one people learn to skip.
//!
//! Resolutions are cached by directory, variables and the modification
//! stamps of the config file and the user's own config (where `berth trust`
//! writes), so an edited `berth.toml` or a new trust applies to the next job
//! and unchanged ones cost a `stat` each.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::config::{Config, Layer, Source, find_config_file};
use crate::error::{Error, Result};
use crate::images::DevSettings;
use crate::model::JobSpec;
use crate::safety::Safety;

/// Most `BERTH_*` variables a caller may send, and their longest value.
const MAX_VARS: usize = 64;
const MAX_VALUE: usize = 4096;
/// Most projects kept resolved; the cache starts over when full.
const MAX_CACHED: usize = 64;

/// The settings one job runs under.
#[derive(Debug)]
pub struct Project {
    /// The caller's configuration, with the instance's own values for the
    /// instance-wide keys.
    pub config: Config,
    /// The project's filter and workspace guard (the instance's security log).
    pub safety: Safety,
    /// Instance-wide keys the project sets differently, and devcontainer.json
    /// keys berth does not apply: said, not applied.
    pub note: Option<String>,
    /// The caller's directory, resolved (None for the manager's own project).
    pub caller_dir: Option<PathBuf>,
    /// What the project's trusted devcontainer.json sets for its container
    /// jobs (environment, ports; its user is already in `config.user`).
    pub dev: Option<DevSettings>,
}

/// A file as the cache sees it: path, modification time, size.
type Stamp = (PathBuf, Option<SystemTime>, u64);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    cwd: PathBuf,
    env: BTreeMap<String, String>,
    file: Option<Stamp>,
    /// The user's config: `berth trust` changes it, and with it what applies.
    user: Option<Stamp>,
}

fn stamp(f: PathBuf) -> Stamp {
    let meta = std::fs::metadata(&f).ok();
    let modified = meta.as_ref().and_then(|m| m.modified().ok());
    (f, modified, meta.map_or(0, |m| m.len()))
}

/// A resolved project and the stamps of its workspace's devcontainer files.
type Cached = (Arc<Project>, Vec<Stamp>);

/// The manager's own project and the callers' projects it has resolved.
#[derive(Debug)]
pub(crate) struct Projects {
    own: Arc<Project>,
    /// Each with the stamps of its workspace's devcontainer files, looked
    /// at again on every hit (the workspace is known only once resolved).
    cache: Mutex<HashMap<Key, Cached>>,
    /// Notes already given, with the workspace they were given for.
    noted: Mutex<HashSet<(PathBuf, String)>>,
}

impl Projects {
    pub fn new(config: &Config, safety: &Safety) -> Self {
        Projects {
            own: Arc::new(Project {
                config: config.clone(),
                safety: safety.clone(),
                note: None,
                caller_dir: None,
                dev: None,
            }),
            cache: Mutex::new(HashMap::new()),
            noted: Mutex::new(HashSet::new()),
        }
    }

    /// `project`'s note for a job about to start, unless a job of the same
    /// workspace was already given this very note.
    pub fn note_once(&self, project: &Project) -> Option<String> {
        let note = project.note.clone()?;
        let mut noted = self.noted.lock().unwrap();
        if noted.len() >= MAX_CACHED {
            noted.clear();
        }
        noted
            .insert((project.config.workspace.clone(), note.clone()))
            .then_some(note)
    }

    /// The project `spec` runs under.
    pub fn resolve(&self, spec: &JobSpec) -> Result<Arc<Project>> {
        let Some(cwd) = &spec.caller_cwd else {
            return Ok(self.own.clone());
        };
        check_vars(&spec.caller_env)?;
        let cwd = caller_dir(cwd)?;
        let env = &spec.caller_env;
        let file = match env.get("BERTH_CONFIG").filter(|v| !v.is_empty()) {
            Some(p) => Some(cwd.join(p)),
            None => find_config_file(&cwd),
        };
        let key = Key {
            file: file.map(stamp),
            user: crate::trust::user_config_path(|n| env.get(n).cloned()).map(stamp),
            cwd,
            env: env.clone(),
        };
        if let Some((p, dev)) = self.cache.lock().unwrap().get(&key)
            && *dev == devcontainer_stamps(&p.config.workspace)
        {
            return Ok(p.clone());
        }
        let mut config = Config::load_with(&key.cwd, Layer::default(), |n| env.get(n).cloned())?;
        // A relative workspace is the caller's, not this process's.
        config.workspace = key.cwd.join(&config.workspace);
        if let Ok(real) = std::fs::canonicalize(&config.workspace) {
            config.workspace = real;
        }
        let (config, kept) = instance_wide(&self.own.config, config);
        let kept_note = (!kept.is_empty()).then(|| {
            format!(
                "this project sets {} but the running manager of instance `{}` decides {} for \
                 every client; restart it from this project (`berth down`, then `berth up`) to apply {}",
                kept.join(", "),
                self.own.config.instance,
                if kept.len() == 1 { "it" } else { "them" },
                if kept.len() == 1 { "it" } else { "them" },
            )
        });
        // What the project's devcontainer.json sets: applied when the user
        // trusts the file, else (and what berth never applies) said.
        let (dev, dev_note) = crate::images::devcontainer_settings(&config.workspace, &config.trusted);
        let mut config = config;
        if let Some(d) = &dev {
            dev_user(&mut config, d);
            config.post_create = d.post_create.clone();
        }
        let note = match (kept_note, dev_note) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        let project = Arc::new(Project {
            safety: self.own.safety.for_project(&config)?,
            config,
            note,
            caller_dir: Some(key.cwd.clone()),
            dev,
        });
        let dev = devcontainer_stamps(&project.config.workspace);
        let mut cache = self.cache.lock().unwrap();
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(key, (project.clone(), dev));
        Ok(project)
    }
}

/// A trusted devcontainer.json's `remoteUser` is the container user, unless
/// the user's own say or berth.toml names one (each says more than it).
fn dev_user(config: &mut Config, dev: &DevSettings) {
    let unset = matches!(config.sources.get("user"), None | Some(Source::Default));
    if let Some(user) = dev.user.as_ref().filter(|_| unset) {
        config.user = Some(user.clone());
        config.sources.insert("user", Source::File(dev.file.clone()));
    }
}

/// The devcontainer files of `workspace` as the cache sees them: an edit
/// (a new key berth does not apply) gives the next job a fresh note.
fn devcontainer_stamps(workspace: &Path) -> Vec<Stamp> {
    [".devcontainer/devcontainer.json", ".devcontainer.json"]
        .iter()
        .map(|f| stamp(workspace.join(f)))
        .collect()
}

/// The caller's directory as a real, existing, absolute path.
fn caller_dir(cwd: &Path) -> Result<PathBuf> {
    if !cwd.is_absolute() {
        return Err(Error::InvalidValue {
            what: "caller_cwd",
            input: cwd.display().to_string(),
            message: "must be an absolute path (the caller's working directory)".into(),
        });
    }
    std::fs::canonicalize(cwd)
        .ok()
        .filter(|p| p.is_dir())
        .ok_or_else(|| Error::BadCwd {
            path: cwd.to_path_buf(),
        })
}

/// Refuse a `caller_env` that is too big or names anything but `BERTH_*`.
pub(crate) fn check_vars(env: &BTreeMap<String, String>) -> Result<()> {
    if env.len() > MAX_VARS {
        return Err(Error::InvalidValue {
            what: "caller_env",
            input: format!("{} variables", env.len()),
            message: format!("at most {MAX_VARS} BERTH_* variables"),
        });
    }
    for (k, v) in env {
        if !k.starts_with("BERTH_") || v.len() > MAX_VALUE {
            return Err(Error::InvalidValue {
                what: "caller_env",
                input: k.chars().take(64).collect(),
                message: format!("only BERTH_* variables, values up to {MAX_VALUE} bytes"),
            });
        }
    }
    Ok(())
}

/// `project` with the instance-wide values of `own`, and the keys the
/// project had set to something else.
fn instance_wide(own: &Config, mut project: Config) -> (Config, Vec<&'static str>) {
    let mut kept = Vec::new();
    macro_rules! keep {
        ($($field:ident => $key:literal),* $(,)?) => {$(
            let set = !matches!(project.sources.get($key), None | Some(Source::Default));
            if set && project.$field != own.$field {
                kept.push($key);
            }
            project.$field = own.$field.clone();
            match own.sources.get($key) {
                Some(s) => project.sources.insert($key, s.clone()),
                None => project.sources.remove($key),
            };
        )*};
    }
    keep!(
        instance => "instance",
        state_dir => "state_dir",
        max_jobs => "max_jobs",
        ring_bytes => "ring_size",
        max_output_bytes => "max_output",
        keep_runs => "keep_runs",
        keep_days => "keep_days",
        layer_days => "layer_days",
        layer_bytes => "layer_size",
        recovery => "recovery",
        store_env => "store_env",
        pull_timeout_secs => "pull_timeout",
        engine_patience_secs => "engine_patience",
        max_queued => "max_queued",
        mcp_idle_secs => "mcp_idle",
        daemon_idle_secs => "daemon_idle",
        warm_pool => "warm_pool",
        warm_idle_secs => "warm_idle",
    );
    // The security log is the instance's (one file, one rotation).
    project.safety.security_log = own.safety.security_log.clone();
    (project, kept)
}

/// The caller-side half: the `BERTH_*` variables of this process, for
/// [`JobSpec::caller_env`].
pub fn caller_env() -> BTreeMap<String, String> {
    std::env::vars()
        .filter(|(k, v)| k.starts_with("BERTH_") && !v.is_empty())
        .filter(|(k, _)| !matches!(k.as_str(), "BERTH_SOCKET" | "BERTH_LOG" | "BERTH_ON_TIMEOUT"))
        .take(MAX_VARS)
        .collect()
}

#[cfg(test)]
mod tests;
