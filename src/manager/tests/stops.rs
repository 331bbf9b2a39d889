//! Stops: a kill racing an exit, a second kill, a slow death, a launch or
//! shutdown, and a foreground budget that ends its job. Each ends the job
//! exactly once, recorded with who ended it.

use std::time::Duration;

use super::{KILL, TERM, bench, ends, job, kill_by, kind_names, status};
use crate::error::Error;
use crate::manager::Foreground;
use crate::model::{EndedBy, JobSpec, JobStatus, OnTimeout};
use crate::runner::Exit;
use crate::runner::fake::Script;

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

    // The exit is in before the supervisor sees the stop: it ended on its
    // own. Many times over, as a supervisor that picked between the two at
    // random would record some of them as killed.
    for _ in 0..20 {
        let h = m.start(job("quick")).await.unwrap();
        let quick = b.fake.next_launch().await;
        quick.exit(0);
        let out = m.kill(&h.id, kill_by(EndedBy::User)).await.unwrap();
        assert_eq!(out.result, crate::manager::KillResult::AlreadyFinished);
        assert_eq!(out.status, JobStatus::Exited { code: 0 });
        assert_eq!(out.ended_by, Some(EndedBy::System));
        assert!(quick.signals().is_empty());
        assert_eq!(
            ends(m, &h.id),
            [("success".to_string(), Some(EndedBy::System), Some(0))]
        );
    }

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
    assert_eq!(out.result, crate::manager::KillResult::Killed);
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
    assert_eq!(again.result, crate::manager::KillResult::AlreadyFinished);
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
    assert_eq!(user.result, crate::manager::KillResult::Killed);
    assert_eq!(agent.result, crate::manager::KillResult::Killed);
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
    assert_eq!(out.result, crate::manager::KillResult::Killed);
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

#[tokio::test(start_paused = true)]
async fn each_way_of_ending_is_recorded_with_who_ended_it() {
    let b = bench(8);
    let m = &b.manager;
    let cases = [
        (Exit::Code(3), "failed", JobStatus::Exited { code: 3 }),
        (Exit::Signal(11), "signaled", JobStatus::Signaled { signal: 11 }),
        (
            Exit::Oom,
            "killed",
            JobStatus::Killed {
                signal: Some(KILL),
                ended_by: EndedBy::System,
                reason: "oom".into(),
            },
        ),
        (
            Exit::Lost("engine gone".into()),
            "lost",
            JobStatus::Lost {
                reason: "engine gone".into(),
            },
        ),
    ];
    for (exit, name, expected) in cases {
        let h = m.start(job("crashy")).await.unwrap();
        b.fake.next_launch().await.end_with(exit);
        let info = h.wait_end().await.unwrap();
        assert_eq!(info.status, expected);
        assert!(info.status.is_failure(), "{name} counts as a failure");
        assert_eq!(info.ended_by, Some(EndedBy::System));
        assert_eq!(
            ends(m, &h.id),
            [(name.to_string(), Some(EndedBy::System), expected.exit_code())]
        );
    }

    // Keep-alive expiry: the system stops it, politely, when the time is up.
    let began = tokio::time::Instant::now();
    let h = m
        .start(JobSpec {
            keep_alive: Some(3.0),
            ..job("repl")
        })
        .await
        .unwrap();
    let repl = b.fake.next_launch().await;
    let info = h.wait_end().await.unwrap();
    assert!(began.elapsed() >= Duration::from_secs(3));
    assert_eq!(repl.signals(), [TERM]);
    assert_eq!(
        info.status,
        JobStatus::Killed {
            signal: Some(TERM),
            ended_by: EndedBy::System,
            reason: "keep_alive expired (3s)".into()
        }
    );
    assert!(!info.status.is_failure());
}

#[tokio::test(start_paused = true)]
async fn a_supervisor_that_panics_leaves_no_job_stranded() {
    let b = bench(1);
    let m = &b.manager;
    b.fake.script(
        "buggy",
        Script {
            panic_at_exit: true,
            ..Script::default()
        },
    );
    let h = m.start(job("buggy")).await.unwrap();
    let buggy = b.fake.next_launch().await;
    buggy.exit(0);
    // Recorded lost, with the reason, instead of `running` forever.
    let info = tokio::time::timeout(Duration::from_secs(60), h.wait_end())
        .await
        .expect("the job's end is recorded")
        .unwrap();
    let JobStatus::Lost { reason } = &info.status else {
        panic!("recorded {:?}", info.status);
    };
    assert!(reason.contains("scripted panic at exit"), "{reason}");
    assert_eq!(kind_names(m, &h.id).last(), Some(&"ended"));
    // Its slot is free again, and the manager still serves.
    let next = m.start(job("quick")).await.unwrap();
    b.fake.next_launch().await.exit(0);
    assert_eq!(
        next.wait_end().await.unwrap().status,
        JobStatus::Exited { code: 0 }
    );
    m.shutdown().await;
}
