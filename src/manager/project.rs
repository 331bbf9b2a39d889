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
        // What the project's devcontainer.json sets and berth does not apply.
        let dev_note = crate::images::devcontainer_note(&config.workspace);
        let note = match (kept_note, dev_note) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        let project = Arc::new(Project {
            safety: self.own.safety.for_project(&config)?,
            config,
            note,
            caller_dir: Some(key.cwd.clone()),
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
mod tests {
    use super::*;

    fn projects(dir: &Path) -> Projects {
        let config = Config::isolated(dir.join("state"), "t").with_max_jobs(3);
        let safety = Safety::from_config(&config).unwrap();
        Projects::new(&config, &safety)
    }

    fn spec_in(cwd: &Path) -> JobSpec {
        let mut s = JobSpec::shell("true");
        s.caller_cwd = Some(cwd.to_path_buf());
        s
    }

    #[test]
    fn a_callers_berth_toml_applies_and_instance_keys_stay_the_managers() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws2");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::write(
            ws.join("berth.toml"),
            "image = \"custom:1\"\nmax_jobs = 9\n[[safety.blocked]]\npattern = \"terraform destroy\"\nreason = \"prod\"\n",
        )
        .unwrap();
        let p = projects(dir.path()).resolve(&spec_in(&ws.join("sub"))).unwrap();
        assert_eq!(p.config.workspace, ws.canonicalize().unwrap());
        assert_eq!(p.config.image, "custom:1");
        assert_eq!(p.config.max_jobs, 3, "the cap is the instance's");
        assert!(p.note.as_deref().unwrap().contains("max_jobs"), "{:?}", p.note);
        let blocked = p
            .safety
            .check(&JobSpec::shell("terraform destroy"), &p.config.workspace, "t");
        assert!(blocked.is_err());
    }

    #[test]
    fn the_note_is_given_once_and_again_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let projects = projects(dir.path());
        let file = dir.path().join("berth.toml");
        std::fs::write(&file, "max_jobs = 9\n").unwrap();
        let p = projects.resolve(&spec_in(dir.path())).unwrap();
        assert!(projects.note_once(&p).unwrap().contains("max_jobs"));
        let p = projects.resolve(&spec_in(dir.path())).unwrap();
        assert_eq!(projects.note_once(&p), None, "not on every run");
        // The file now sets another instance-wide key: a new note.
        std::fs::write(&file, "max_jobs = 9\nring_size = 100\n").unwrap();
        let p = projects.resolve(&spec_in(dir.path())).unwrap();
        assert!(
            projects.note_once(&p).unwrap().contains("ring_size"),
            "{:?}",
            p.note
        );
    }

    #[test]
    fn devcontainer_keys_berth_does_not_apply_are_noted_not_applied() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(".devcontainer.json"),
            r#"{"image": "python:3", "remoteUser": "root", "containerEnv": {"X": "1"}}"#,
        )
        .unwrap();
        let projects = projects(dir.path());
        let p = projects.resolve(&spec_in(dir.path())).unwrap();
        let note = projects.note_once(&p).unwrap();
        assert!(
            note.contains("sets containerEnv, remoteUser, which berth does not apply"),
            "{note}"
        );
        assert_eq!(p.config.user, None, "remoteUser never becomes the job's user");
        // An edit to the file is seen by the next job, with a new note.
        std::fs::write(
            dir.path().join(".devcontainer.json"),
            r#"{"image": "python:3", "forwardPorts": [8000], "postCreateCommand": "make"}"#,
        )
        .unwrap();
        let p = projects.resolve(&spec_in(dir.path())).unwrap();
        let note = projects.note_once(&p).unwrap();
        assert!(
            note.contains("sets forwardPorts, postCreateCommand, which berth does not apply"),
            "{note}"
        );
    }

    #[test]
    fn no_berth_toml_means_the_callers_directory_is_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let p = projects(dir.path()).resolve(&spec_in(dir.path())).unwrap();
        assert_eq!(p.config.workspace, dir.path().canonicalize().unwrap());
        assert!(p.note.is_none());
    }

    #[test]
    fn an_edited_berth_toml_applies_to_the_next_job() {
        let dir = tempfile::tempdir().unwrap();
        let projects = projects(dir.path());
        let file = dir.path().join("berth.toml");
        std::fs::write(&file, "image = \"a:1\"\n").unwrap();
        assert_eq!(
            projects.resolve(&spec_in(dir.path())).unwrap().config.image,
            "a:1"
        );
        std::fs::write(&file, "image = \"bb:22\"\n").unwrap();
        assert_eq!(
            projects.resolve(&spec_in(dir.path())).unwrap().config.image,
            "bb:22"
        );
    }

    #[test]
    fn bad_caller_context_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let projects = projects(dir.path());
        let mut s = spec_in(Path::new("relative"));
        assert!(projects.resolve(&s).is_err());
        s = spec_in(&dir.path().join("missing"));
        assert!(matches!(projects.resolve(&s), Err(Error::BadCwd { .. })));
        s = spec_in(dir.path());
        s.caller_env.insert("LD_PRELOAD".into(), "x".into());
        assert!(projects.resolve(&s).is_err());
        s = spec_in(dir.path());
        std::fs::write(dir.path().join("berth.toml"), "nonsense = 1\n").unwrap();
        let refused = projects.resolve(&s).unwrap().config.project_refusal.clone();
        assert!(refused.is_some_and(|r| r.contains("nonsense")));
    }
}
