//! Container jobs through the manager, against the real engine (the suite
//! fails loudly when no engine answers: these tests never skip). Each test
//! uses its own instance; the labelled-container sweep in scripts/test.sh
//! checks that none of them leaves a container behind.

use std::time::{Duration, Instant};

use berth::{EndedBy, Error, JobSpec, JobStatus, ReadyCondition, RunnerChoice, WaitOutcome};
use pretty_assertions::assert_eq;

use crate::common::{berth, containers_of, eventually, http_get, manager};

const IMAGE: &str = "berth/sandbox:latest";

fn docker(spec: JobSpec) -> JobSpec {
    spec.with_runner(RunnerChoice::Docker).with_image(IMAGE)
}

/// `docker inspect` as JSON, or None when the container does not exist.
fn inspect(id: &str) -> Option<serde_json::Value> {
    let o = std::process::Command::new("docker")
        .args(["inspect", id])
        .output()
        .expect("docker CLI");
    if !o.status.success() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    Some(v[0].clone())
}

#[tokio::test]
async fn an_httpd_job_is_reachable_on_its_mapped_port_and_hardened() {
    let t = manager();
    let mut spec = docker(JobSpec::argv(["httpd", "-f", "-v", "-p", "8080", "-h", "/www"]))
        .with_port(8080)
        .background();
    spec.limits.cpus = Some(0.5);
    spec.limits.memory = Some(64 << 20);
    let job = t.manager.start(spec).await.unwrap();
    let out = job
        .wait(&[ReadyCondition::http("/")], Duration::from_secs(30))
        .await
        .unwrap();
    assert!(out.is_ready(), "{out:?}");
    let port = job.host_port(8080).unwrap();
    let page = http_get(port);
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("hello from berth"));

    let info = job.info().unwrap();
    let cid = info.container_id.clone().unwrap();
    let c = inspect(&cid).expect("container exists while running");
    let host = &c["HostConfig"];
    assert_eq!(host["NanoCpus"], 500_000_000);
    assert_eq!(host["Memory"], 64 << 20);
    assert_eq!(host["MemorySwap"], 64 << 20);
    assert!(host["PidsLimit"].as_i64().unwrap() > 0);
    assert_eq!(host["CapDrop"], serde_json::json!(["ALL"]));
    assert!(host["SecurityOpt"].to_string().contains("no-new-privileges"));
    assert_eq!(host["Privileged"], false);
    assert_eq!(host["Init"], true);
    // berth forwards the port: the engine publishes nothing, and berth's
    // listener is on 127.0.0.1 only (not on this machine's other addresses).
    assert!(
        host["PortBindings"].as_object().is_none_or(|b| b.is_empty()),
        "{}",
        host["PortBindings"]
    );
    for addr in crate::common::global_addresses() {
        let elsewhere = std::net::SocketAddr::new(addr, port);
        assert!(
            std::net::TcpStream::connect_timeout(&elsewhere, Duration::from_secs(2)).is_err(),
            "{elsewhere} answers"
        );
    }
    let labels = &c["Config"]["Labels"];
    assert_eq!(labels["berth.managed"], "true");
    assert_eq!(labels["berth.instance"], t.manager.config().instance.as_str());
    assert_eq!(labels["berth.job"], job.id.as_str());
    assert!(
        labels["berth.owner"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{}:", std::process::id()))
    );
    assert_eq!(info.limits.cpus, Some(0.5));
    assert_eq!(info.limits.memory, Some(64 << 20));

    let killed = job.kill().await.unwrap();
    assert_eq!(killed.result, berth::manager::KillResult::Killed);
    // Answered first, removed right after (in the background).
    eventually(Duration::from_secs(10), "stop removes the container", || {
        inspect(&cid).is_none()
    })
    .await;
    let again = job.kill().await.unwrap();
    assert_eq!(again.result, berth::manager::KillResult::AlreadyFinished);
}

#[tokio::test]
async fn a_late_binding_server_is_never_ready_before_it_binds() {
    let t = manager();
    let spec = docker(JobSpec::shell(
        "sleep 2; echo binding; exec httpd -f -p 8080 -h /www",
    ))
    .with_port(8080)
    .background();
    let job = t.manager.start(spec).await.unwrap();
    let started = Instant::now();
    // The engine's proxy accepts on the host port at once; berth must not be fooled.
    let out = job
        .wait(&[ReadyCondition::port(8080)], Duration::from_secs(30))
        .await
        .unwrap();
    assert!(out.is_ready(), "{out:?}");
    assert!(
        started.elapsed() >= Duration::from_millis(1800),
        "ready after {:?}",
        started.elapsed()
    );
    // The line printed before the bind travels through the engine's attach
    // stream, which can trail the bind itself: it comes, not necessarily first.
    let printed = job
        .wait(&[ReadyCondition::log("^binding$")], Duration::from_secs(10))
        .await
        .unwrap();
    assert!(printed.is_ready(), "{printed:?}");
    assert!(http_get(job.host_port(8080).unwrap()).starts_with("HTTP/1.1 200"));
    job.kill().await.unwrap();
}

#[tokio::test]
async fn a_fast_exit_loses_no_output() {
    let t = manager();
    let job = t
        .manager
        .start(docker(JobSpec::shell("seq 1 1000; exit 3")))
        .await
        .unwrap();
    let info = job.wait_end().await.unwrap();
    assert_eq!(info.status, JobStatus::Exited { code: 3 });
    let lines = job.logs(&Default::default()).unwrap().lines;
    let texts: Vec<String> = lines.iter().map(|l| l.text.clone()).collect();
    assert_eq!(texts, (1..=1000).map(|i| i.to_string()).collect::<Vec<_>>());
    assert_eq!(lines.last().unwrap().seq, 1000);
    // Answered once drained; the container goes right after.
    let cid = info.container_id.clone().unwrap();
    eventually(Duration::from_secs(10), "removed after draining", || {
        inspect(&cid).is_none()
    })
    .await;

    let job = t
        .manager
        .start(docker(JobSpec::argv(["printf", r"x\ny"])))
        .await
        .unwrap();
    job.wait_end().await.unwrap();
    let texts: Vec<String> = job.output_lines().unwrap();
    assert_eq!(texts, vec!["x", "y"]);
}

/// A job is answered before its container is removed; whichever way the
/// manager ends right after (a clean shutdown, or its last handle dropped
/// while the removal may not have run yet), no container stays.
#[tokio::test]
async fn a_quick_jobs_container_is_gone_after_shutdown_or_drop() {
    for clean in [true, false] {
        let t = manager();
        let instance = t.manager.config().instance.clone();
        let job = t
            .manager
            .start(docker(JobSpec::argv(["echo", "quick"])))
            .await
            .unwrap();
        let info = job.wait_end().await.unwrap();
        assert_eq!(info.exit_code, Some(0));
        assert_eq!(job.output_lines().unwrap(), ["quick"]);
        if clean {
            t.manager.shutdown().await;
        }
        drop(job);
        drop(t);
        assert_eq!(containers_of(&instance), 0, "clean shutdown: {clean}");
    }
}

/// The last handle dropped with several containers running (a test or a
/// CLI run ending): every one of them is removed (in parallel) before the
/// drop returns.
#[tokio::test]
async fn dropping_the_manager_removes_every_running_container() {
    let t = manager();
    let instance = t.manager.config().instance.clone();
    for _ in 0..3 {
        t.manager
            .start(docker(JobSpec::argv(["sleep", "300"])).background())
            .await
            .unwrap();
    }
    assert_eq!(containers_of(&instance), 3);
    drop(t);
    assert_eq!(containers_of(&instance), 0);
}

#[tokio::test]
async fn out_of_memory_is_a_kill_by_the_system() {
    let t = manager();
    // The allocation waits until the job runs and the test says go: the
    // engine watches a container for OOM kills from a moment after its
    // start, and an allocation in that first moment (seen under load in
    // CI) goes unreported by the engine itself, as in any use of Docker.
    let mut spec = docker(JobSpec::shell(
        "echo waiting; while [ ! -e go ]; do sleep 0.05; done; \
         exec dd if=/dev/zero of=/dev/null bs=256M count=1",
    ));
    spec.limits.memory = Some(16 << 20);
    let job = t.manager.start(spec).await.unwrap();
    eventually(Duration::from_secs(20), "the job waiting", || {
        t.manager.snippet(&job.id).is_ok_and(|s| s.contains("waiting"))
    })
    .await;
    std::fs::write(t.workspace().join("go"), "").unwrap();
    let info = job.wait_end().await.unwrap();
    match &info.status {
        JobStatus::Killed { ended_by, reason, .. } => {
            let ended_by = *ended_by;
            assert_eq!(ended_by, EndedBy::System);
            assert_eq!(reason, "oom");
        }
        other => panic!("{other:?}"),
    }
    assert!(info.status.is_failure());
}

#[tokio::test]
async fn a_missing_image_is_a_clear_error_and_starts_nothing() {
    let t = manager();
    let err = t
        .manager
        .start(
            JobSpec::argv(["true"])
                .with_runner(RunnerChoice::Docker)
                .with_image("berth/no-such-image:1"),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ImageMissing { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("berth/no-such-image:1") && msg.contains("berth images build"),
        "{msg}"
    );
    assert_eq!(t.manager.list(berth::ListFilter::All), vec![]);
}

#[test]
fn an_unreachable_engine_is_named_and_auto_falls_back_to_host() {
    let dir = tempfile::tempdir().unwrap();
    let o = berth(dir.path())
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .args(["run", "--runner", "docker", "--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0));
    assert!(err.contains("unix:///nonexistent/docker.sock"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let o = berth(dir.path())
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .args(["run", "--runner", "auto", "--json", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn the_foreground_cli_runs_a_limited_container() {
    let dir = tempfile::tempdir().unwrap();
    let o = berth(dir.path())
        .args([
            "run",
            "--runner",
            "docker",
            "--image",
            IMAGE,
            "--cpus",
            "0.5",
            "--memory",
            "64m",
            "-p",
            "8080",
            "--",
            "sh",
            "-c",
            "echo in a box; echo port=$PORT; exit 5",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(5), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(out, "in a box\nport=8080\n");
}

/// testcontainers as an independent oracle: a fixture it starts is found
/// ready by berth's readiness and reached by a berth host job.
#[tokio::test]
async fn berth_readiness_agrees_with_a_testcontainers_fixture() {
    use testcontainers::core::{IntoContainerPort, WaitFor};
    use testcontainers::runners::AsyncRunner;
    use testcontainers::{GenericImage, ImageExt};

    let fixture = GenericImage::new("berth/sandbox", "latest")
        .with_exposed_port(80.tcp())
        .with_wait_for(WaitFor::Nothing)
        .with_cmd(["httpd", "-f", "-p", "80", "-h", "/www"])
        .start()
        .await
        .expect("testcontainers starts the fixture");
    let port = fixture.get_host_port_ipv4(80).await.unwrap();
    let out = berth::ready::wait_for_port("127.0.0.1", port, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(out.is_ready(), "{out:?}");

    let t = manager();
    let probe = format!(
        "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{port}/').read().decode().strip())"
    );
    let job = t
        .manager
        .start(JobSpec::argv(["python3", "-c", &probe]).with_runner(RunnerChoice::Host))
        .await
        .unwrap();
    let info = job.wait_end().await.unwrap();
    assert_eq!(info.exit_code, Some(0));
    let texts: Vec<String> = job.output_lines().unwrap();
    assert_eq!(texts, vec!["hello from berth"]);
    let waited = job.wait(&[], Duration::from_secs(1)).await.unwrap();
    assert!(matches!(waited, WaitOutcome::Exited { .. }), "{waited:?}");
}
