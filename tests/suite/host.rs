//! The manager with the host runner: lifecycle, kill, cap and queue,
//! promotion, shutdown, and what a user can rely on about ended jobs.

use std::time::{Duration, Instant};

use berth::{
    EndedBy, Error, EventKind, Foreground, JobId, JobSpec, JobStatus, KillRequest, ListFilter, RunnerChoice,
    StartMode,
};
use pretty_assertions::assert_eq;

use crate::common::{eventually, manager, manager_with, my_zombies, processes_with, unique_sleep};

fn host(spec: JobSpec) -> JobSpec {
    spec.with_runner(RunnerChoice::Host)
}

#[tokio::test]
async fn exit_code_and_signal_are_reported_exactly() {
    let t = manager();
    let job = t.manager.start(host(JobSpec::shell("exit 7"))).await.unwrap();
    let info = job.wait_end().await.unwrap();
    assert_eq!(info.status, JobStatus::Exited { code: 7 });
    assert_eq!(info.exit_code, Some(7));
    // It ended by itself: the system, not a client, ended it.
    assert_eq!(info.ended_by, Some(EndedBy::System));

    let job = t
        .manager
        .start(host(JobSpec::shell("kill -SEGV $$")))
        .await
        .unwrap();
    let info = job.wait_end().await.unwrap();
    assert_eq!(info.status, JobStatus::Signaled { signal: 11 });
    assert_eq!(info.exit_code, Some(139));
}

#[tokio::test]
async fn argv_mode_interprets_nothing() {
    let t = manager();
    let job = t
        .manager
        .start(host(JobSpec::argv(["echo", "$HOME", ";", "`id`", "|", "*"])))
        .await
        .unwrap();
    job.wait_end().await.unwrap();
    let page = job.logs(&Default::default()).unwrap();
    assert_eq!(page.lines[0].text, "$HOME ; `id` | *");
}

#[tokio::test]
async fn stdin_is_never_left_open_and_cwd_env_apply() {
    let t = manager();
    std::fs::create_dir_all(t.workspace().join("sub")).unwrap();
    // `cat` with no input must see EOF at once, not hang.
    let mut spec = host(JobSpec::shell("cat; pwd; echo \"$GREETING\""));
    spec.cwd = Some("sub".into());
    spec.env.insert("GREETING".into(), "hello".into());
    let job = t.manager.start(spec).await.unwrap();
    let info = tokio::time::timeout(Duration::from_secs(5), job.wait_end())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(info.status, JobStatus::Exited { code: 0 });
    let texts: Vec<String> = job.output_lines().unwrap();
    let sub = t.workspace().join("sub").canonicalize().unwrap();
    assert_eq!(texts, vec![sub.display().to_string(), "hello".to_string()]);

    let job = t
        .manager
        .start(host(JobSpec::argv(["cat"]).with_input("line one\nline two")))
        .await
        .unwrap();
    job.wait_end().await.unwrap();
    let texts: Vec<String> = job.output_lines().unwrap();
    assert_eq!(texts, vec!["line one", "line two"]);
}

#[tokio::test]
async fn kill_stops_the_group_and_records_who() {
    let t = manager();
    let token = unique_sleep();
    let job = t
        .manager
        .start(host(
            JobSpec::shell(format!("sleep {token} & sleep {token}; echo never")).background(),
        ))
        .await
        .unwrap();
    eventually(Duration::from_secs(5), "both sleeps running", || {
        processes_with(&token).len() == 2
    })
    .await;
    let out = t
        .manager
        .kill(
            &job.id,
            KillRequest {
                ended_by: Some(EndedBy::User),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(out.result, berth::manager::KillResult::Killed);
    assert_eq!(out.ended_by, Some(EndedBy::User));
    assert_eq!(
        out.status,
        JobStatus::Killed {
            signal: Some(15),
            ended_by: EndedBy::User,
            reason: "killed by user".into()
        }
    );
    assert_eq!(processes_with(&token), Vec::<u32>::new());
    assert_eq!(my_zombies(), Vec::<u32>::new());
    // A second kill is not an error.
    let again = job.kill().await.unwrap();
    assert_eq!(again.result, berth::manager::KillResult::AlreadyFinished);
    let ended: Vec<_> = t
        .manager
        .events(0, 100)
        .into_iter()
        .filter(|e| e.job == job.id && matches!(e.kind, EventKind::Ended { .. }))
        .collect();
    assert_eq!(ended.len(), 1);
    match &ended[0].kind {
        EventKind::Ended {
            status,
            ended_by,
            start_mode,
            ..
        } => {
            assert_eq!(status, "killed");
            assert_eq!(*ended_by, Some(EndedBy::User));
            assert_eq!(*start_mode, StartMode::Background);
        }
        _ => unreachable!(),
    }
}

/// The bound is the feature: a job that ignores SIGTERM is SIGKILLed once
/// the 0.5 s grace is over (137), within 1.5 s more for a loaded machine.
#[tokio::test]
async fn a_term_ignoring_job_is_killed_within_two_seconds_of_a_half_second_grace() {
    let t = manager_with(|c| c.with_grace_secs(0.5));
    let job = t
        .manager
        .start(
            host(JobSpec::shell(
                "trap '' TERM; echo armed; while :; do sleep 0.05; done",
            ))
            .background(),
        )
        .await
        .unwrap();
    job.wait(&[berth::ReadyCondition::log("armed")], Duration::from_secs(5))
        .await
        .unwrap();
    let started = Instant::now();
    let out = job.kill().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.exit_code, Some(137));
    assert_eq!(out.ended_by, Some(EndedBy::Agent));
}

#[tokio::test]
async fn unknown_ids_are_typed_errors() {
    let t = manager();
    let id = JobId::from("job-999");
    assert!(matches!(t.manager.info(&id), Err(Error::UnknownJob(_))));
    assert!(matches!(
        t.manager.kill(&id, Default::default()).await,
        Err(Error::UnknownJob(_))
    ));
    assert!(matches!(
        t.manager.logs(&id, &Default::default()),
        Err(Error::UnknownJob(_))
    ));
    assert!(matches!(
        t.manager.wait(&id, &[], Duration::from_millis(10)).await,
        Err(Error::UnknownJob(_))
    ));
    assert!(matches!(
        t.manager.background(&JobId::from("nope"), EndedBy::User),
        Err(Error::UnknownJob(_))
    ));
}

#[tokio::test]
async fn refused_starts_leave_no_record() {
    let t = manager();
    let err = t
        .manager
        .start(host(JobSpec::argv(["no-such-binary-xyz"])))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::CommandNotFound { .. }), "{err}");
    assert_eq!(err.exit_code(), 127);
    let err = t
        .manager
        .start(host(JobSpec::argv(["true"]).with_watch("(x")))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidRegex { .. }), "{err}");
    assert_eq!(t.manager.list(ListFilter::All), vec![]);
}

#[tokio::test]
async fn cap_refuses_a_fourth_job_naming_the_running_ones() {
    let t = manager();
    let token = unique_sleep();
    let mut ids = Vec::new();
    for _ in 0..3 {
        let job = t
            .manager
            .start(host(JobSpec::argv(["sleep", &token]).background()))
            .await
            .unwrap();
        ids.push(job.id.clone());
    }
    let err = t
        .manager
        .start(host(JobSpec::argv(["sleep", &token]).background()))
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::CapReached { max: 3, .. }), "{msg}");
    for id in &ids {
        assert!(msg.contains(id.as_str()), "{msg}");
    }
    assert!(msg.contains("--queue"), "{msg}");
    // A foreground run counts too: it would hold a slot, and keep it if promoted.
    let err = t
        .manager
        .run_foreground(host(JobSpec::argv(["true"])))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::CapReached { max: 3, .. }), "{err}");

    // With queue: waits as queued, starts when a slot frees.
    let queued = t
        .manager
        .start(host(JobSpec::argv(["sleep", &token]).background().with_queue()))
        .await
        .unwrap();
    assert_eq!(queued.info().unwrap().status, JobStatus::Queued);
    t.manager.kill(&ids[0], Default::default()).await.unwrap();
    eventually(Duration::from_secs(5), "queued job to start", || {
        queued.info().unwrap().status == JobStatus::Running
    })
    .await;
    assert_eq!(t.manager.list(ListFilter::Running).len(), 3);
    t.manager.shutdown().await;
    assert_eq!(processes_with(&token), Vec::<u32>::new());
}

#[tokio::test]
async fn a_foreground_budget_promotes_to_background_without_losing_the_job() {
    let t = manager();
    let mut spec = host(JobSpec::shell("echo working; sleep 30"));
    spec.timeout = Some(0.3);
    // Promoted, with its 30 s job still running: the run returned at its
    // budget, not at the job's end.
    let out = t.manager.run_foreground(spec).await.unwrap();
    let Foreground::Promoted { info } = out else {
        panic!("not promoted: {out:?}")
    };
    assert_eq!(info.status, JobStatus::Running);
    assert_eq!(info.start_mode, StartMode::Promoted(EndedBy::System));
    assert!(info.promotion_reason.unwrap().contains("budget"));
    let promoted = t.manager.events(0, 100).into_iter().any(|e| {
        e.job == info.id
            && matches!(
                e.kind,
                EventKind::Promoted {
                    by: EndedBy::System,
                    ..
                }
            )
    });
    assert!(promoted);
    t.manager.shutdown().await;
    assert_eq!(
        t.manager.info(&info.id).unwrap().status,
        JobStatus::Killed {
            signal: Some(15),
            ended_by: EndedBy::System,
            reason: "shutdown".into()
        }
    );
}

#[tokio::test]
async fn background_call_releases_a_blocked_foreground_caller() {
    let t = manager();
    let m = t.manager.clone();
    let runner = tokio::spawn(async move { m.run_foreground(host(JobSpec::argv(["sleep", "30"]))).await });
    eventually(Duration::from_secs(5), "foreground job running", || {
        t.manager.list(ListFilter::Running).len() == 1
    })
    .await;
    let id = t.manager.list(ListFilter::Running)[0].id.clone();
    t.manager.background(&id, EndedBy::User).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(2), runner)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let Foreground::Promoted { info } = out else {
        panic!("{out:?}")
    };
    assert_eq!(info.start_mode, StartMode::Promoted(EndedBy::User));
    assert_eq!(
        info.promotion_reason.as_deref(),
        Some("moved to background by user")
    );
    // Promoting twice is refused clearly.
    assert!(matches!(
        t.manager.background(&id, EndedBy::User),
        Err(Error::NotForeground { .. })
    ));
}

#[tokio::test]
async fn shutdown_stops_everything_within_grace_plus_one_second() {
    let t = manager_with(|c| c.with_grace_secs(1.0).with_max_jobs(5));
    let token = unique_sleep();
    for cmd in [
        format!("sleep {token}"),
        format!("trap '' TERM; sleep {token}"),
        format!("sleep {token} & sleep {token}"),
    ] {
        t.manager
            .start(host(JobSpec::shell(cmd).background()))
            .await
            .unwrap();
    }
    eventually(Duration::from_secs(5), "4 sleeps", || {
        processes_with(&token).len() == 4
    })
    .await;
    let started = Instant::now();
    t.manager.shutdown().await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(processes_with(&token), Vec::<u32>::new());
    for info in t.manager.list(ListFilter::All) {
        assert_eq!(info.ended_by, Some(EndedBy::System));
        assert_eq!(info.reason.as_deref(), Some("shutdown"));
    }
    let err = t.manager.start(host(JobSpec::argv(["true"]))).await.unwrap_err();
    assert!(matches!(err, Error::ShuttingDown));
}

#[tokio::test]
async fn dropping_the_manager_kills_its_jobs() {
    let t = manager();
    let token = unique_sleep();
    t.manager
        .start(host(JobSpec::argv(["sleep", &token]).background()))
        .await
        .unwrap();
    eventually(Duration::from_secs(5), "sleep running", || {
        processes_with(&token).len() == 1
    })
    .await;
    drop(t.manager);
    eventually(Duration::from_secs(5), "sleep gone", || {
        processes_with(&token).is_empty()
    })
    .await;
}

#[tokio::test]
async fn ports_are_picked_and_passed_to_the_job() {
    let t = manager();
    let job = t
        .manager
        .start(host(JobSpec::shell("echo \"$PORT $BERTH_PORT_3000\"")).with_port(3000))
        .await
        .unwrap();
    let info = job.wait_end().await.unwrap();
    assert_eq!(info.ports.len(), 1);
    let m = &info.ports[0];
    assert_eq!((m.port, m.host_ip.as_str()), (3000, "127.0.0.1"));
    let line = &job.logs(&Default::default()).unwrap().lines[0].text;
    assert_eq!(line, &format!("{0} {0}", m.host_port));
}

#[tokio::test]
async fn watchers_turn_lines_into_events() {
    let t = manager();
    let job = t
        .manager
        .start(host(
            JobSpec::shell("echo compiling; echo 'error: boom' >&2; echo done").with_watch("^error"),
        ))
        .await
        .unwrap();
    job.wait_end().await.unwrap();
    let hits: Vec<_> = t
        .manager
        .events(0, 100)
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::WatchHit {
                line_seq,
                stream,
                line,
                pattern,
            } => Some((e.job, line_seq, stream, line, pattern)),
            _ => None,
        })
        .collect();
    // Seq follows arrival order across the two pipes, so look it up.
    let seq = job
        .logs(&Default::default())
        .unwrap()
        .lines
        .iter()
        .find(|l| l.text == "error: boom")
        .unwrap()
        .seq;
    assert_eq!(
        hits,
        vec![(
            job.id.clone(),
            seq,
            berth::Stream::Stderr,
            "error: boom".to_string(),
            "^error".to_string()
        )]
    );
}
