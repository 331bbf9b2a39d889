//! The manager's policy under a scripted runner (`runner/fake.rs`): the cap
//! and its refusal, the queue, foreground promotion and the races of a stop
//! with an exit, with another stop or with a launch. No process or container
//! runs; most tests run on tokio's paused clock, so a grace or a budget of
//! seconds passes at once and in a fixed order.

use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use tempfile::TempDir;

use super::{Foreground, KillRequest, ListFilter, Manager};
use crate::config::Config;
use crate::error::Error;
use crate::events::EventKind;
use crate::job::{EndedBy, JobId, JobSpec, JobStatus, OnTimeout, RunnerChoice, StartMode};
use crate::output::Stream;
use crate::runner::fake::{FakeRunner, Script};

const TERM: i32 = Signal::SIGTERM as i32;
const KILL: i32 = Signal::SIGKILL as i32;

/// A manager whose jobs all run on a fake runner, in a directory of its own.
struct Bench {
    manager: Manager,
    fake: Arc<FakeRunner>,
    _dir: TempDir,
}

fn bench(max_jobs: usize) -> Bench {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let config = Config::isolated(dir.path().join("state"), "fake")
        .with_workspace(&workspace)
        .with_max_jobs(max_jobs)
        .with_grace_secs(1.0);
    let manager = Manager::new(config).unwrap();
    let fake = FakeRunner::new();
    assert!(manager.inner.fake.set(fake.clone()).is_ok());
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

#[tokio::test(start_paused = true)]
async fn the_cap_refuses_the_next_start_and_names_the_running_jobs() {
    let b = bench(2);
    let m = &b.manager;
    let serve = m.start(job("serve")).await.unwrap();
    // A foreground job holds a slot as well.
    let build = m
        .start(JobSpec {
            background: false,
            ..job("build")
        })
        .await
        .unwrap();
    let first = b.fake.next_launch().await;
    assert_eq!(first.id(), &serve.id);
    assert_eq!(b.fake.next_launch().await.id(), &build.id);

    let err = m.start(job("third")).await.unwrap_err();
    match &err {
        Error::CapReached { max, running } => {
            assert_eq!(*max, 2);
            assert_eq!(running, &format!("{} `serve`, {} `build`", serve.id, build.id));
        }
        other => panic!("expected the cap, got {other:?}"),
    }
    assert!(err.to_string().contains("2 running"), "{err}");
    // The refusal left nothing: no record, no launch, no event.
    assert_eq!(m.list(ListFilter::All).len(), 2);
    assert!(b.fake.try_next_launch().is_none());
    assert!(
        m.events(0, 100_000)
            .iter()
            .all(|e| e.job == serve.id || e.job == build.id)
    );

    // A slot frees when a job ends, and the next start takes it.
    first.exit(0);
    assert_eq!(
        serve.wait_end().await.unwrap().status,
        JobStatus::Exited { code: 0 }
    );
    let next = m.start(job("third")).await.unwrap();
    assert_eq!(b.fake.next_launch().await.id(), &next.id);
    assert_eq!(status(m, &next.id), JobStatus::Running);
}

#[tokio::test(start_paused = true)]
async fn a_refused_launch_leaves_no_record_and_frees_its_slot() {
    let b = bench(1);
    let m = &b.manager;
    b.fake.script(
        "missing",
        Script {
            fail_launch: true,
            ..Default::default()
        },
    );
    let err = m.start(job("missing")).await.unwrap_err();
    assert!(matches!(err, Error::Spawn { .. }), "{err:?}");
    assert!(m.list(ListFilter::All).is_empty());
    let ok = m.start(job("serve")).await.unwrap();
    assert_eq!(status(m, &ok.id), JobStatus::Running);
}

#[tokio::test(start_paused = true)]
async fn the_queue_starts_waiting_jobs_in_order_as_slots_free() {
    let b = bench(1);
    let m = &b.manager;
    let a = m.start(job("a")).await.unwrap();
    let a_job = b.fake.next_launch().await;
    let queued: Vec<_> = {
        let mut v = Vec::new();
        for name in ["b", "c", "d"] {
            v.push(m.start(job(name).with_queue()).await.unwrap());
        }
        v
    };
    let (qb, qc, qd) = (&queued[0], &queued[1], &queued[2]);
    for (n, h) in queued.iter().enumerate() {
        let info = h.info().unwrap();
        assert_eq!(info.status, JobStatus::Queued);
        assert_eq!(info.queue_position, Some(n + 1));
    }

    // A stop while queued ends the job without a launch; the line moves up.
    let out = m.kill(&qc.id, kill_by(EndedBy::User)).await.unwrap();
    assert_eq!(out.result, "killed");
    assert!(matches!(
        status(m, &qc.id),
        JobStatus::Killed {
            ended_by: EndedBy::User,
            ..
        }
    ));
    assert_eq!(kind_names(m, &qc.id), ["queued", "ended"]);
    assert_eq!(qd.info().unwrap().queue_position, Some(2));

    a_job.exit(0);
    let b_job = b.fake.next_launch().await;
    assert_eq!(b_job.id(), &qb.id);
    assert_eq!(a.wait_end().await.unwrap().status, JobStatus::Exited { code: 0 });
    assert_eq!(status(m, &qb.id), JobStatus::Running);
    assert_eq!(qd.info().unwrap().queue_position, Some(1));
    assert!(b.fake.try_next_launch().is_none());

    b_job.exit(3);
    let d_job = b.fake.next_launch().await;
    assert_eq!(d_job.id(), &qd.id);
    d_job.exit(0);
    assert_eq!(qd.wait_end().await.unwrap().status, JobStatus::Exited { code: 0 });
    assert_eq!(status(m, &qb.id), JobStatus::Exited { code: 3 });
    assert_eq!(kind_names(m, &qd.id), ["queued", "started", "ended"]);
    assert_eq!(b.fake.most_alive(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_foreground_budget_promotes_and_the_job_keeps_running_with_its_output() {
    let b = bench(1);
    let m = &b.manager;
    b.fake.script(
        "compile",
        Script {
            lines: vec!["compiling".into()],
            ..Default::default()
        },
    );
    let spec = JobSpec {
        background: false,
        timeout: Some(2.0),
        ..job("compile")
    };
    let began = tokio::time::Instant::now();
    let Foreground::Promoted { info } = m.run_foreground(spec).await.unwrap() else {
        panic!("a job that does not end within its budget is promoted");
    };
    assert!(began.elapsed() >= Duration::from_secs(2));
    assert_eq!(info.status, JobStatus::Running);
    assert_eq!(info.start_mode, StartMode::Promoted(EndedBy::System));
    assert_eq!(
        info.promotion_reason.as_deref(),
        Some("auto background (2s budget exceeded)")
    );

    // It runs on, still holding its slot, and its output keeps coming.
    let id = info.id.clone();
    let fake_job = b.fake.next_launch().await;
    assert!(matches!(
        m.start(job("other")).await,
        Err(Error::CapReached { .. })
    ));
    fake_job.emit(Stream::Stdout, "linked");
    fake_job.emit(Stream::Stderr, "warning: unused");
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(status(m, &id), JobStatus::Running);
    fake_job.exit(0);
    let end = m.wait_end(&id).await.unwrap();
    assert_eq!(end.status, JobStatus::Exited { code: 0 });
    let lines = m.logs(&id, &Default::default()).unwrap().lines;
    let texts: Vec<_> = lines.iter().map(|l| (l.stream, l.text.as_str())).collect();
    assert_eq!(
        texts,
        [
            (Stream::Stdout, "compiling"),
            (Stream::Stdout, "linked"),
            (Stream::Stderr, "warning: unused")
        ]
    );
    assert_eq!(kind_names(m, &id), ["started", "promoted", "ended"]);
    assert!(fake_job.signals().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_foreground_budget_with_on_timeout_kill_ends_the_job_as_timed_out() {
    let b = bench(1);
    let m = &b.manager;
    let spec = JobSpec {
        background: false,
        timeout: Some(5.0),
        on_timeout: OnTimeout::Kill,
        ..job("hang")
    };
    let Foreground::Finished { info } = m.run_foreground(spec).await.unwrap() else {
        panic!("on_timeout = kill ends the job");
    };
    assert_eq!(info.status, JobStatus::TimedOut);
    assert_eq!(b.fake.next_launch().await.signals(), [TERM]);
    assert_eq!(
        ends(m, &info.id),
        [("timed_out".to_string(), Some(EndedBy::System), Some(124))]
    );
}

#[tokio::test(start_paused = true)]
async fn a_kill_racing_an_exit_records_one_end() {
    let b = bench(2);
    let m = &b.manager;

    // The exit is in before the supervisor sees the stop: it ended on its own.
    let h = m.start(job("quick")).await.unwrap();
    let quick = b.fake.next_launch().await;
    quick.exit(0);
    let out = m.kill(&h.id, kill_by(EndedBy::User)).await.unwrap();
    assert_eq!(out.result, "already_finished");
    assert_eq!(out.status, JobStatus::Exited { code: 0 });
    assert_eq!(out.ended_by, Some(EndedBy::System));
    assert!(quick.signals().is_empty());
    assert_eq!(
        ends(m, &h.id),
        [("success".to_string(), Some(EndedBy::System), Some(0))]
    );

    // The stop is first and the job exits within the grace: killed, by the user.
    b.fake.script(
        "stubborn",
        Script {
            ignore_signals: true,
            ..Default::default()
        },
    );
    let h = m.start(job("stubborn")).await.unwrap();
    let stubborn = b.fake.next_launch().await;
    let kill = tokio::spawn({
        let m = m.clone();
        let id = h.id.clone();
        async move { m.kill(&id, kill_by(EndedBy::User)).await }
    });
    stubborn.signalled(1).await;
    stubborn.exit(0);
    let out = kill.await.unwrap().unwrap();
    assert_eq!(out.result, "killed");
    assert_eq!(out.ended_by, Some(EndedBy::User));
    assert_eq!(
        out.status,
        JobStatus::Killed {
            signal: None,
            ended_by: EndedBy::User,
            reason: "killed by user".into()
        }
    );
    assert_eq!(stubborn.signals(), [TERM]);
    assert_eq!(
        ends(m, &h.id),
        [("killed".to_string(), Some(EndedBy::User), None)]
    );

    // A kill after the end answers from the record and changes nothing.
    let again = m.kill(&h.id, kill_by(EndedBy::Agent)).await.unwrap();
    assert_eq!(again.result, "already_finished");
    assert_eq!(again.ended_by, Some(EndedBy::User));
    assert_eq!(ends(m, &h.id).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_kill_returns_only_once_a_slow_death_is_over() {
    let b = bench(1);
    let m = &b.manager;
    b.fake.script(
        "slow",
        Script {
            ignore_signals: true,
            kill_delay: Duration::from_secs(3),
            lines: vec!["working".into()],
            ..Default::default()
        },
    );
    let h = m.start(job("slow")).await.unwrap();
    let slow = b.fake.next_launch().await;
    let began = tokio::time::Instant::now();
    let out = m.kill(&h.id, kill_by(EndedBy::Agent)).await.unwrap();
    // The grace (1s), then SIGKILL, then the 3s the job takes to die.
    assert!(began.elapsed() >= Duration::from_secs(4), "{:?}", began.elapsed());
    assert!(slow.ended());
    assert_eq!(slow.signals(), [TERM, KILL]);
    assert_eq!(
        out.status,
        JobStatus::Killed {
            signal: Some(KILL),
            ended_by: EndedBy::Agent,
            reason: "killed by agent".into()
        }
    );
    assert_eq!(h.output_lines().unwrap(), ["working"]);
    // The slot is free only now.
    m.start(job("next")).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn two_concurrent_kills_stop_the_job_once() {
    let b = bench(1);
    let m = &b.manager;
    b.fake.script(
        "stubborn",
        Script {
            ignore_signals: true,
            kill_delay: Duration::from_secs(2),
            ..Default::default()
        },
    );
    let h = m.start(job("stubborn")).await.unwrap();
    let stubborn = b.fake.next_launch().await;
    let (user, agent) = tokio::join!(
        m.kill(&h.id, kill_by(EndedBy::User)),
        m.kill(&h.id, kill_by(EndedBy::Agent)),
    );
    let (user, agent) = (user.unwrap(), agent.unwrap());
    // The first stop is carried out; the second waits for the same end.
    assert_eq!(user.result, "killed");
    assert_eq!(agent.result, "killed");
    assert_eq!(user.status, agent.status);
    assert!(matches!(
        user.status,
        JobStatus::Killed {
            ended_by: EndedBy::User,
            ..
        }
    ));
    assert_eq!(stubborn.signals(), [TERM, KILL]);
    assert_eq!(
        ends(m, &h.id),
        [("killed".to_string(), Some(EndedBy::User), Some(128 + KILL))]
    );
}

#[tokio::test(start_paused = true)]
async fn a_stop_during_the_launch_ends_the_job_once_it_runs() {
    let b = bench(1);
    let m = &b.manager;
    b.fake.script(
        "slow-start",
        Script {
            launch_delay: Duration::from_secs(5),
            ..Default::default()
        },
    );
    let start = tokio::spawn({
        let m = m.clone();
        async move { m.start(job("slow-start")).await }
    });
    let launching = b.fake.next_launch().await;
    let id = launching.id().clone();
    assert_eq!(status(m, &id), JobStatus::Starting);
    let out = m.kill(&id, kill_by(EndedBy::Agent)).await.unwrap();
    assert_eq!(start.await.unwrap().unwrap().id, id);
    assert_eq!(out.result, "killed");
    assert_eq!(
        out.status,
        JobStatus::Killed {
            signal: Some(TERM),
            ended_by: EndedBy::Agent,
            reason: "killed by agent".into()
        }
    );
    assert_eq!(launching.signals(), [TERM]);
    assert_eq!(kind_names(m, &id), ["started", "ended"]);
}

#[tokio::test(start_paused = true)]
async fn shutdown_stops_running_and_queued_jobs_as_the_system() {
    let b = bench(1);
    let m = &b.manager;
    b.fake.script(
        "stubborn",
        Script {
            ignore_signals: true,
            ..Default::default()
        },
    );
    let running = m.start(job("stubborn")).await.unwrap();
    let queued = m.start(job("later").with_queue()).await.unwrap();
    let stubborn = b.fake.next_launch().await;
    m.shutdown().await;
    assert_eq!(stubborn.signals(), [TERM, KILL]);
    for h in [&running, &queued] {
        assert!(
            matches!(h.info().unwrap().status, JobStatus::Killed { ended_by: EndedBy::System, ref reason, .. } if reason == "shutdown"),
            "{:?}",
            h.info().unwrap().status
        );
        assert_eq!(ends(m, &h.id).len(), 1);
    }
    assert!(
        b.fake.try_next_launch().is_none(),
        "a queued job never launches after shutdown"
    );
    assert!(matches!(m.start(job("late")).await, Err(Error::ShuttingDown)));
}

/// Real threads, no paused clock: starts race for the registry from several
/// worker threads at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_starts_never_exceed_the_cap() {
    const CAP: usize = 3;
    let b = bench(CAP);
    let m = &b.manager;

    // Without a queue: exactly CAP starts win, the rest are refused.
    let starts: Vec<_> = (0..16)
        .map(|_| {
            let m = m.clone();
            tokio::spawn(async move { m.start(job("hold")).await })
        })
        .collect();
    let mut won = Vec::new();
    for s in starts {
        match s.await.unwrap() {
            Ok(h) => won.push(h),
            Err(Error::CapReached { max: CAP, .. }) => {}
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!(won.len(), CAP);
    assert_eq!(m.list(ListFilter::All).len(), CAP);
    let mut held = Vec::new();
    for _ in 0..CAP {
        held.push(b.fake.next_launch().await);
    }

    // With a queue: every start is accepted and runs in turn, never more than CAP at once.
    const QUEUED: usize = 12;
    let starts: Vec<_> = (0..QUEUED)
        .map(|_| {
            let m = m.clone();
            tokio::spawn(async move { m.start(job("work").with_queue()).await })
        })
        .collect();
    let mut accepted = Vec::new();
    for s in starts {
        accepted.push(s.await.unwrap().unwrap());
    }
    for j in held {
        j.exit(0);
    }
    // Each queued job ends a few scheduling turns after it runs, from its own task.
    let mut enders = Vec::new();
    for n in 0..QUEUED {
        let j = b.fake.next_launch().await;
        let running = m
            .list(ListFilter::Running)
            .into_iter()
            .filter(|i| matches!(i.status, JobStatus::Starting | JobStatus::Running))
            .count();
        assert!(running <= CAP, "{running} jobs hold slots with a cap of {CAP}");
        enders.push(tokio::spawn(async move {
            for _ in 0..n % 4 {
                tokio::task::yield_now().await;
            }
            j.exit(0);
        }));
    }
    for e in enders {
        e.await.unwrap();
    }
    for h in &accepted {
        assert_eq!(h.wait_end().await.unwrap().status, JobStatus::Exited { code: 0 });
        assert_eq!(ends(m, &h.id).len(), 1);
    }
    assert!(b.fake.most_alive() <= CAP, "{} ran at once", b.fake.most_alive());
    assert_eq!(b.fake.most_alive(), CAP, "the held jobs filled every slot");
}
