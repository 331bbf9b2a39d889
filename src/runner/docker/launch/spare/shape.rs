//! Which jobs a spare fits, and the shape a spare and the job that takes
//! it must agree on.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::super::super::{pod, remote};
use super::super::Job;
use super::WAITER;
use crate::model::{JobSpec, WriteMode};

/// The shape a spare for this job would have; `None` when the job must
/// start cold (see the module docs).
pub(in super::super) fn shape(job: &Job<'_>) -> Option<String> {
    (job.engine.spares.wanted() && fits(job, job.spec)).then(|| key(job))
}

/// `spec` may take a spare (or have one made) in `job`'s sandbox.
pub(super) fn fits(job: &Job<'_>, spec: &JobSpec) -> bool {
    let project = job.project;
    let decision = project.decide(spec);
    let argv = spec.effective_argv();
    job.scope.is_none()
        && spec.input.is_none()
        && spec.mounts.is_empty()
        && project.layer.is_none()
        && spec.write != Some(WriteMode::Layer)
        && remote::remote_host(&job.engine.endpoint).is_none()
        && (!decision.engine_publishes || spec.ports.is_empty())
        && pod::key_of(spec, &decision, project.workspace, (true, false)).is_none()
        && spec.env.iter().all(|(k, v)| exportable(k) && !v.contains('\0'))
        && !argv.iter().any(|a| a.contains('\0'))
}

/// A name POSIX `sh` can export.
pub(super) fn exportable(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What a spare and the job that takes it must agree on: everything the
/// container is made with that the job's script cannot set.
pub(super) fn key(job: &Job<'_>) -> String {
    let (spec, project) = (job.spec, job.project);
    let limits = (
        spec.limits.cpus.or(project.defaults.cpus),
        spec.limits.memory.or(project.defaults.memory),
        spec.limits.pids.or(project.defaults.pids),
    );
    let workspace = std::fs::canonicalize(project.workspace).unwrap_or(project.workspace.to_path_buf());
    format!(
        "{}\n{}\n{}\n{limits:?}\n{:?}\n{:?}\n{}\n{:?}\n{:x}",
        job.image,
        project.user,
        workspace.display(),
        project.decide(&normal(spec)),
        spec.write.unwrap_or_default(),
        spec.read_only || project.read_only,
        job.runtime,
        protected_print(job),
    )
}

/// The protected files as they are now (`protect.rs`): a spare's copies
/// were made of these, so a change since means its copies are stale.
fn protected_print(job: &Job<'_>) -> u64 {
    let mut h = DefaultHasher::new();
    if job.spec.write.unwrap_or_default() != WriteMode::Direct {
        return 0;
    }
    let ws = job.project.workspace;
    let extra = job.project.protect.iter().filter_map(|p| p.strip_prefix(ws).ok());
    let mut budget = 0;
    for rel in super::super::super::protect::PROTECTED
        .iter()
        .map(Path::new)
        .chain(extra)
    {
        print(&ws.join(rel), &mut h, &mut budget);
    }
    h.finish()
}

fn print(path: &Path, h: &mut DefaultHasher, budget: &mut usize) {
    *budget += 1;
    // Past what a protected directory may hold it is not copied at all.
    if *budget > 4 * super::super::super::protect::MAX_FILES {
        return;
    }
    path.hash(h);
    let Ok(m) = std::fs::symlink_metadata(path) else {
        return 0u8.hash(h);
    };
    (
        m.ino(),
        m.size(),
        m.mode(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    )
        .hash(h);
    if m.is_dir()
        && let Ok(entries) = std::fs::read_dir(path)
    {
        let mut names: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        names.sort();
        for n in names {
            print(&n, h, budget);
        }
    }
}

/// The spec a spare is made from: `spec`'s shape, [`WAITER`] as its
/// command, stdin open for the script.
pub(super) fn normal(spec: &JobSpec) -> JobSpec {
    JobSpec {
        argv: vec!["/bin/sh".into(), "-c".into(), WAITER.into()],
        shell: None,
        env: Default::default(),
        ports: Vec::new(),
        input: Some(String::new()),
        keep_alive: None,
        ready: Vec::new(),
        watch: Vec::new(),
        owner: None,
        label: None,
        client_ref: None,
        ..spec.clone()
    }
}
