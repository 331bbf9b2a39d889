//! Slots: the cap and its refusal, the queue and its bound, a refused launch, a promoted
//! foreground job keeping its slot, and starts racing from several threads.

use std::time::Duration;

use super::{bench, bench_with, ends, job, kill_by, kind_names, status};
use crate::error::Error;
use crate::manager::{Foreground, ListFilter};
use crate::model::{EndedBy, JobSpec, JobStatus, StartMode};
use crate::output::Stream;
use crate::runner::fake::Script;

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
    assert_eq!(out.result, crate::manager::KillResult::Killed);
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

/// A freed slot belongs to the first job in line, whether or not its task
/// ran yet: the slot is freed before the queued job's task first runs (the
/// test holds the only permit itself and drops it with no await between),
/// and goes at once to the waiter `start` registered, so a start that
/// must not queue finds none to take.
#[tokio::test(start_paused = true)]
async fn a_slot_freed_before_the_queued_task_runs_is_still_the_queued_jobs() {
    let b = bench(1);
    let m = &b.manager;
    let held = m.inner.slots.clone().try_acquire_owned().unwrap();
    let waiting = m.start(job("waiting").with_queue()).await.unwrap();
    drop(held);
    // Handed to the waiter at once: nothing a jumper could take, however
    // its start and the queued task interleave.
    assert_eq!(
        m.inner.slots.available_permits(),
        0,
        "the freed slot is the queued job's"
    );
    let err = m.start(job("jumper")).await.unwrap_err();
    assert!(matches!(err, Error::CapReached { .. }), "{err:?}");
    assert_eq!(b.fake.next_launch().await.id(), &waiting.id);
    assert_eq!(status(m, &waiting.id), JobStatus::Running);
    assert!(b.fake.try_next_launch().is_none());
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

/// The queue is bounded (`max_queued`): a start beyond it is refused with
/// one line naming the bound, leaves no record, id or event, and a place
/// freed in line can be taken again.
#[tokio::test(start_paused = true)]
async fn a_full_queue_refuses_the_next_queued_start() {
    let b = bench_with(1, |mut c| {
        c.max_queued = 2;
        c
    });
    let m = &b.manager;
    let running = m.start(job("serve")).await.unwrap();
    b.fake.next_launch().await;
    let first = m.start(job("one").with_queue()).await.unwrap();
    let second = m.start(job("two").with_queue()).await.unwrap();
    let events_before = m.events(0, 1000).len();
    let err = m.start(job("three").with_queue()).await.unwrap_err();
    assert!(matches!(err, Error::QueueFull { max: 2 }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("2 starts already wait") && text.contains("max_queued") && !text.contains('\n'),
        "{text}"
    );
    assert_eq!((err.code(), err.http_status()), ("queue_full", 409));
    assert_eq!(
        m.list(ListFilter::All).len(),
        3,
        "nothing of the refused start stays"
    );
    assert_eq!(m.events(0, 1000).len(), events_before, "no event for it");
    // A queued job stopped frees its place in line.
    m.kill(&second.id, kill_by(EndedBy::User)).await.unwrap();
    let again = m.start(job("three").with_queue()).await.unwrap();
    assert_eq!(status(m, &again.id), JobStatus::Queued);
    assert_eq!(status(m, &first.id), JobStatus::Queued);
    assert_eq!(status(m, &running.id), JobStatus::Running);
    // The next id follows on: the refusal used none.
    assert_eq!(again.id.as_str(), "job-4");
}
