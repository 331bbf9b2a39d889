//! The manager's policy under a scripted runner (`runner/fake.rs`): the cap
//! and its refusal, the queue and foreground promotion (`slots.rs`), and the
//! races of a stop with an exit, with another stop, with a launch or with
//! shutdown (`stops.rs`), and the defaults a start gets from its caller's
//! project (`defaults.rs`), and reads of the store kept off the async workers
//! (`reads.rs`). No process or container runs; most tests run on
//! tokio's paused clock, so a grace or a budget of seconds passes at once and
//! in a fixed order. This file holds the bench they share.

mod defaults;
mod reads;
mod slots;
mod stops;

use std::sync::Arc;

use nix::sys::signal::Signal;
use tempfile::TempDir;

use super::{KillRequest, Manager};
use crate::config::Config;
use crate::events::EventKind;
use crate::model::{EndedBy, JobId, JobSpec, JobStatus, RunnerChoice};
use crate::runner::fake::FakeRunner;

const TERM: i32 = Signal::SIGTERM as i32;
const KILL: i32 = Signal::SIGKILL as i32;

/// A manager whose jobs all run on a fake runner, in a directory of its own.
struct Bench {
    manager: Manager,
    fake: Arc<FakeRunner>,
    _dir: TempDir,
}

fn bench(max_jobs: usize) -> Bench {
    bench_with(max_jobs, |c| c)
}

/// [`bench`] with more of the config changed by `f`.
fn bench_with(max_jobs: usize, f: impl FnOnce(Config) -> Config) -> Bench {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let config = Config::isolated(dir.path().join("state"), "fake")
        .with_workspace(&workspace)
        .with_max_jobs(max_jobs)
        .with_grace_secs(1.0);
    let manager = Manager::new(f(config)).unwrap();
    let fake = FakeRunner::new();
    assert!(manager.use_fake_runner(fake.clone()));
    Bench {
        manager,
        fake,
        _dir: dir,
    }
}

/// A background job running `program` (its script is the fake runner's).
fn job(program: &str) -> JobSpec {
    JobSpec::argv([program])
        .with_runner(RunnerChoice::Host)
        .background()
}

fn kill_by(ended_by: EndedBy) -> KillRequest {
    KillRequest {
        ended_by: Some(ended_by),
        ..Default::default()
    }
}

/// The `ended` events of job `id`, as (status, ended_by, exit code).
fn ends(m: &Manager, id: &JobId) -> Vec<(String, Option<EndedBy>, Option<i32>)> {
    kinds(m, id)
        .into_iter()
        .filter_map(|k| match k {
            EventKind::Ended {
                status,
                ended_by,
                exit_code,
                ..
            } => Some((status, ended_by, exit_code)),
            _ => None,
        })
        .collect()
}

/// The names of job `id`'s events, in order.
fn kind_names(m: &Manager, id: &JobId) -> Vec<&'static str> {
    kinds(m, id).iter().map(EventKind::name).collect()
}

fn kinds(m: &Manager, id: &JobId) -> Vec<EventKind> {
    m.events(0, 100_000)
        .into_iter()
        .filter(|e| &e.job == id)
        .map(|e| e.kind)
        .collect()
}

fn status(m: &Manager, id: &JobId) -> JobStatus {
    m.info(id).unwrap().status
}
