//! Readiness on host jobs: log (also lines printed before the wait), port,
//! http, early return when the job dies, and the timeout.

use std::time::Duration;

use berth::{JobSpec, ReadyCondition, RunnerChoice, WaitOutcome};

use crate::common::manager;

fn host(spec: JobSpec) -> JobSpec {
    spec.with_runner(RunnerChoice::Host).background()
}

/// A python HTTP server on $PORT after `delay` seconds, logging when it binds.
fn late_server(delay: f64) -> JobSpec {
    host(JobSpec::shell(format!(
        "sleep {delay}; echo binding now; exec python3 -m http.server \"$PORT\" --bind 127.0.0.1"
    )))
    .with_port(8000)
}

#[tokio::test]
async fn log_condition_matches_lines_printed_before_the_wait() {
    let t = manager();
    let job = t
        .manager
        .start(host(JobSpec::shell("echo listening on 42; sleep 30")))
        .await
        .unwrap();
    job.wait(&[ReadyCondition::log("listening")], Duration::from_secs(5))
        .await
        .unwrap();
    // Ask again after the line is long printed: still ready, same line.
    let out = job
        .wait(&[ReadyCondition::log(r"on \d+")], Duration::from_secs(1))
        .await
        .unwrap();
    match out {
        WaitOutcome::Ready { matched_line, .. } => {
            assert_eq!(matched_line.as_deref(), Some("listening on 42"))
        }
        other => panic!("{other:?}"),
    }
    job.kill().await.unwrap();
}

#[tokio::test]
async fn port_is_not_ready_before_the_server_binds() {
    let t = manager();
    let job = t.manager.start(late_server(1.5)).await.unwrap();
    let port = job.host_port(8000).unwrap();
    let out = job
        .wait(&[ReadyCondition::port(8000)], Duration::from_secs(15))
        .await
        .unwrap();
    let WaitOutcome::Ready {
        elapsed_ms,
        host_port,
        ..
    } = out
    else {
        panic!("{out:?}")
    };
    assert!(
        elapsed_ms >= 1_400,
        "ready after {elapsed_ms} ms, before the bind"
    );
    assert_eq!(host_port, Some(port));
    // The log line proves the bind happened before readiness was reported.
    let logs = job.logs(&Default::default()).unwrap();
    assert!(logs.lines.iter().any(|l| l.text == "binding now"));
    std::net::TcpStream::connect(("127.0.0.1", port)).expect("server accepts after ready");
    job.kill().await.unwrap();
}

#[tokio::test]
async fn http_condition_needs_a_real_answer() {
    let t = manager();
    let job = t.manager.start(late_server(0.5)).await.unwrap();
    let out = job
        .wait(
            &[ReadyCondition::http("/"), ReadyCondition::log("binding")],
            Duration::from_secs(15),
        )
        .await
        .unwrap();
    let WaitOutcome::Ready { url, .. } = out else {
        panic!("{out:?}")
    };
    let url = url.unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    // A wrong expected status never becomes ready.
    let bad = berth::ready::HttpCheck {
        path: "/missing".into(),
        status: Some(200),
        port: None,
    };
    let out = job
        .wait(&[ReadyCondition::Http(bad)], Duration::from_millis(300))
        .await
        .unwrap();
    let WaitOutcome::TimedOut { pending, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(pending, vec!["http /missing"]);
    job.kill().await.unwrap();
}

#[tokio::test]
async fn a_dying_job_ends_the_wait_early_with_its_code() {
    let t = manager();
    let job = t
        .manager
        .start(host(JobSpec::shell("echo crashing; exit 3")))
        .await
        .unwrap();
    // Its exit ends the wait (an `Exited` outcome), not the 30 s timeout.
    let out = job
        .wait(&[ReadyCondition::port(1)], Duration::from_secs(30))
        .await
        .unwrap();
    match out {
        WaitOutcome::Exited {
            exit_code, status, ..
        } => {
            assert_eq!(exit_code, Some(3));
            assert_eq!(status, "failed");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_timeout_names_what_is_still_pending() {
    let t = manager();
    let job = t
        .manager
        .start(host(JobSpec::argv(["sleep", "30"])))
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let out = job
        .wait(
            &[ReadyCondition::log("never"), ReadyCondition::port(9)],
            Duration::from_millis(400),
        )
        .await
        .unwrap();
    // Not before its timeout; that it ended at the timeout and not at the
    // job's end (30 s) is the `TimedOut` outcome.
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(400), "{elapsed:?}");
    let WaitOutcome::TimedOut { pending, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(pending, vec!["log /never/", "port 9"]);
    job.kill().await.unwrap();
}

#[tokio::test]
async fn bad_conditions_are_refused() {
    let t = manager();
    let job = t
        .manager
        .start(host(JobSpec::argv(["sleep", "30"])))
        .await
        .unwrap();
    let err = job
        .wait(&[ReadyCondition::log("(")], Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(matches!(err, berth::Error::InvalidRegex { .. }));
    let err = job
        .wait(&[ReadyCondition::http("/")], Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("needs a port"), "{err}");
    job.kill().await.unwrap();
}

#[tokio::test]
async fn wait_for_port_works_for_ports_no_job_owns() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let out = berth::ready::wait_for_port("127.0.0.1", port, Duration::from_secs(1))
        .await
        .unwrap();
    assert!(out.is_ready());
}

/// Python block-buffers its output when it is a pipe: a server's banner
/// would reach berth only when the job ends. Jobs get `PYTHONUNBUFFERED=1`
/// (unless they set it), so `--ready-log` sees the banner at once, on the
/// host and in a container; a job that sets it keeps its own value.
#[tokio::test]
async fn a_python_banner_is_seen_while_the_job_runs() {
    let t = manager();
    let banner = "import time; print('Serving HTTP on 0.0.0.0 port 8000'); time.sleep(120)";
    let specs = [
        host(JobSpec::argv(["python3", "-c", banner])),
        JobSpec::argv(["python3", "-c", banner])
            .with_runner(RunnerChoice::Docker)
            .with_image("berth/dev:latest")
            .background(),
    ];
    for spec in specs {
        let job = t.manager.start(spec).await.unwrap();
        let out = job
            .wait(&[ReadyCondition::log("Serving HTTP")], Duration::from_secs(20))
            .await
            .unwrap();
        assert!(matches!(out, WaitOutcome::Ready { .. }), "{out:?}");
        job.kill().await.unwrap();
    }
    // The job's own value wins.
    let mut own = host(JobSpec::shell(
        "echo \"unbuffered=[$PYTHONUNBUFFERED]\"; sleep 30",
    ));
    own.env.insert("PYTHONUNBUFFERED".into(), String::new());
    let job = t.manager.start(own).await.unwrap();
    let out = job
        .wait(&[ReadyCondition::log(r"unbuffered=\[")], Duration::from_secs(10))
        .await
        .unwrap();
    match out {
        WaitOutcome::Ready { matched_line, .. } => {
            assert_eq!(matched_line.as_deref(), Some("unbuffered=[]"))
        }
        other => panic!("{other:?}"),
    }
}
