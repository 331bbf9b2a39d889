//! Engine-level tests of the Docker runner. They talk to the real engine and
//! the locally built `berth/sandbox:latest`; with no engine (or no image) they
//! fail with a message saying how to get one, never skip. Each test uses its
//! own instance name and removes its containers on the way out, also when it
//! fails (the fixture's `Drop`).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use bollard::query_parameters::ListContainersOptions;
use nix::sys::signal::Signal;
use pretty_assertions::assert_eq;

use super::*;
use crate::events::EventLog;
use crate::model::{AppliedLimits, Limits, PortSpec};
use crate::output::{LogQuery, Stream};
use crate::runner::Exit;
use crate::watch::Watchers;

mod engine_errors;
mod pauses;
mod removal;

/// Upper bound for any single job in these tests; nothing here should come close.
const JOB_LIMIT: Duration = Duration::from_secs(30);

struct Fixture {
    engine: Engine,
    instance: String,
    dir: tempfile::TempDir,
    workspace: PathBuf,
    /// Who the jobs run as (`Config::container_user`).
    user: String,
}

/// The owner a root test process gives its workspaces: a root caller's jobs
/// run as the workspace's owner, as a user's would (and as nobody when root
/// owns it, which could not write there).
pub const TEST_OWNER: u32 = 4242;

impl Fixture {
    async fn new(tag: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let instance = format!(
            "test-{}-{}-{tag}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let workspace = dir.path().join("ws");
        std::fs::create_dir_all(&workspace).unwrap();
        if nix::unistd::getuid().is_root() {
            std::os::unix::fs::chown(&workspace, Some(TEST_OWNER), Some(TEST_OWNER)).unwrap();
        }
        let config = Config::isolated(dir.path().join("state"), &instance).with_workspace(&workspace);
        let user = config.container_user();
        let engine = Engine::new(&config);
        if let Err(e) = engine.resolve(RunnerChoice::Docker).await {
            panic!(
                "these tests need a Docker engine and none answers: {e}\n\
                 start one (e.g. `sudo systemctl start docker`) or point DOCKER_HOST at one"
            );
        }
        let docker = engine.client().await.unwrap();
        if docker.inspect_image(DEFAULT_TEST_IMAGE).await.is_err() {
            panic!(
                "image {DEFAULT_TEST_IMAGE} is missing: build it with `images/build.sh` (or `berth images build`)"
            );
        }
        Fixture {
            engine,
            instance,
            dir,
            workspace,
            user,
        }
    }

    fn output(&self, id: &JobId) -> Arc<JobOutput> {
        JobOutput::create(
            id.clone(),
            &self.dir.path().join("jobs").join(id.as_str()),
            1 << 20,
            Watchers::default(),
            EventLog::new(),
            crate::store::Store::open(&self.dir.path().join("berth.db")).unwrap(),
            1,
        )
        .unwrap()
    }

    async fn launch(&self, n: u64, spec: &JobSpec) -> Result<(Launched, Arc<JobOutput>)> {
        let id = JobId::from_number(n);
        let output = self.output(&id);
        let launched = self.engine.launch(&id, spec, &self.workspace, &output).await?;
        Ok((launched, output))
    }

    async fn docker(&self) -> &DockerClient {
        self.engine.client().await.unwrap()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // Runs inside the test's runtime: use a thread with its own runtime
        // and connection, as `remove_blocking` does.
        let instance = self.instance.clone();
        let config = Config::isolated(self.dir.path().join("state"), &instance);
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(Engine::new(&config).remove_labelled(&instance))
        })
        .join();
    }
}

const DEFAULT_TEST_IMAGE: &str = crate::config::DEFAULT_IMAGE;

async fn ended(launched: Launched) -> Exit {
    tokio::time::timeout(JOB_LIMIT, launched.exit)
        .await
        .expect("the job should end (exit future resolved) within the test limit")
}

fn texts(out: &JobOutput) -> Vec<String> {
    out.read(&LogQuery {
        since: Some(1),
        ..Default::default()
    })
    .unwrap()
    .lines
    .into_iter()
    .map(|l| l.text)
    .collect()
}

async fn inspect_status(docker: &DockerClient, id: &str) -> Option<u16> {
    match docker.inspect_container(id).await {
        Ok(_) => None,
        Err(e) => e.engine_status(),
    }
}

#[tokio::test]
async fn create_applies_limits_hardening_labels_and_loopback_ports() {
    let fx = Fixture::new("limits").await;
    let mut spec = JobSpec::argv(["sleep", "60"]).with_port(8080);
    spec.limits = Limits {
        cpus: Some(0.5),
        memory: Some(64 << 20),
        pids: Some(100),
    };
    let (launched, _out) = fx.launch(1, &spec).await.unwrap();
    let cid = launched.container_id.clone().unwrap();
    let i = fx.docker().await.inspect_container(&cid).await.unwrap();
    let hc = i.host_config.unwrap();
    assert_eq!(hc.nano_cpus, Some(500_000_000));
    assert_eq!(hc.memory, Some(64 << 20));
    assert_eq!(hc.memory_swap, Some(64 << 20));
    assert_eq!(hc.pids_limit, Some(100));
    assert_eq!(hc.init, Some(true));
    assert_eq!(hc.privileged, Some(false));
    assert_eq!(hc.auto_remove, Some(false));
    assert_eq!(hc.cap_drop, Some(vec!["ALL".to_string()]));
    assert_eq!(hc.security_opt, Some(vec!["no-new-privileges".to_string()]));
    // berth forwards the port: the engine publishes nothing, and the host
    // port listens on 127.0.0.1 only.
    assert!(
        hc.port_bindings.as_ref().is_none_or(|b| b.is_empty()),
        "{:?}",
        hc.port_bindings
    );
    let host_port = launched.ports[0].host_port;
    assert!(
        std::net::TcpListener::bind(("127.0.0.1", host_port)).is_err(),
        "berth listens on {host_port}"
    );
    // The job's own /etc files, read-only.
    let mounts: Vec<(String, Option<bool>)> = hc
        .mounts
        .unwrap()
        .into_iter()
        .filter(|m| m.target.as_deref().is_some_and(|t| t.starts_with("/etc/")))
        .map(|m| (m.target.unwrap(), m.read_only))
        .collect();
    assert_eq!(
        mounts,
        [
            ("/etc/hosts".to_string(), Some(true)),
            ("/etc/hostname".to_string(), Some(true)),
            ("/etc/resolv.conf".to_string(), Some(true))
        ]
    );
    let config = i.config.unwrap();
    assert_eq!(config.hostname.as_deref(), Some("job-1"));
    assert!(config.env.unwrap().contains(&"HOSTNAME=job-1".to_string()));
    let labels = config.labels.unwrap();
    assert_eq!(labels[LABEL_MANAGED], "true");
    assert_eq!(labels[LABEL_INSTANCE], fx.instance);
    assert_eq!(labels[LABEL_JOB], "job-1");
    assert_eq!(labels[LABEL_OWNER], fx.engine.owner());
    assert_eq!(labels[LABEL_STATE], fx.engine.state());
    assert!(fx.engine.owner().starts_with(&format!("{}:", std::process::id())));
    assert_eq!(
        i.name.as_deref(),
        Some(format!("/berth-{}-{}-job-1", fx.instance, &fx.engine.state()[..8]).as_str())
    );

    assert_eq!(
        launched.limits,
        AppliedLimits {
            cpus: Some(0.5),
            memory: Some(64 << 20),
            pids: Some(100),
            not_enforced: vec![],
            user: Some(fx.user.clone()),
            // The default: the first network of the instance's pool.
            network: Some(format!("{}-0", fx.engine.network_name())),
            egress: Some("proxy".into()),
            isolation: Some("container".into()),
            warm: false,
        }
    );
    assert_eq!(launched.ports.len(), 1);
    assert_eq!(launched.ports[0].port, 8080);
    assert_eq!(launched.ports[0].host_ip, "127.0.0.1");
    assert_ne!(
        launched.ports[0].host_port, 0,
        "the engine-chosen port is read back"
    );
    assert!(launched.internal_ip.is_some(), "the container's own IP is filled");
    assert!(
        launched.pid.is_some(),
        "the container's main process pid is read back"
    );

    let control = launched.control.clone();
    control.kill().await;
    assert_eq!(ended(launched).await, Exit::Signal(9));
    control.cleanup();
    fx.engine.settle_removals(JOB_LIMIT).await;
    assert_eq!(inspect_status(fx.docker().await, &cid).await, Some(404));
}

#[tokio::test]
async fn a_thousand_lines_arrive_in_order_with_the_exact_exit_code() {
    let fx = Fixture::new("lines").await;
    let (launched, out) = fx.launch(1, &JobSpec::shell("seq 1 1000; exit 3")).await.unwrap();
    let control = launched.control.clone();
    assert_eq!(ended(launched).await, Exit::Code(3));
    // The contract: once `exit` resolved, every line is in and the streams are closed.
    assert!(out.progress().closed);
    let expected: Vec<String> = (1..=1000).map(|i| i.to_string()).collect();
    assert_eq!(texts(&out), expected);
    control.cleanup();
}

#[tokio::test]
async fn a_final_line_without_newline_is_delivered() {
    let fx = Fixture::new("partial").await;
    let (launched, out) = fx.launch(1, &JobSpec::argv(["printf", "x\\ny"])).await.unwrap();
    assert_eq!(ended(launched).await, Exit::Code(0));
    assert_eq!(texts(&out), vec!["x", "y"]);
}

#[tokio::test]
async fn stdout_and_stderr_stay_apart_and_stdin_is_closed() {
    let fx = Fixture::new("streams").await;
    // `cat` would hang forever on an open stdin; without input it must see EOF.
    let (launched, out) = fx
        .launch(1, &JobSpec::shell("cat; echo out; echo err >&2"))
        .await
        .unwrap();
    assert_eq!(ended(launched).await, Exit::Code(0));
    let page = out.read(&LogQuery::default()).unwrap();
    let streams: Vec<(Stream, &str)> = page.lines.iter().map(|l| (l.stream, l.text.as_str())).collect();
    assert!(streams.contains(&(Stream::Stdout, "out")), "{streams:?}");
    assert!(streams.contains(&(Stream::Stderr, "err")), "{streams:?}");
}

#[tokio::test]
async fn input_is_fed_to_stdin_then_closed() {
    let fx = Fixture::new("input").await;
    let spec = JobSpec::argv(["cat"]).with_input("alpha\nbeta\n");
    let (launched, out) = fx.launch(1, &spec).await.unwrap();
    assert_eq!(ended(launched).await, Exit::Code(0));
    assert_eq!(texts(&out), vec!["alpha", "beta"]);
}

#[tokio::test]
async fn the_job_runs_in_its_cwd_inside_the_mounted_workspace() {
    let fx = Fixture::new("cwd").await;
    let sub = fx.workspace.join("sub dir");
    std::fs::create_dir_all(&sub).unwrap();
    if nix::unistd::getuid().is_root() {
        std::os::unix::fs::chown(&sub, Some(TEST_OWNER), Some(TEST_OWNER)).unwrap();
    }
    let id = JobId::from_number(1);
    let output = fx.output(&id);
    let spec = JobSpec::shell("pwd; echo written > out.txt; echo \"$PORT $BERTH_PORT_3000 $GREETING\"");
    let mut spec = spec.with_port(3000);
    spec.env.insert("GREETING".into(), "hi".into());
    let launched = fx.engine.launch(&id, &spec, &sub, &output).await.unwrap();
    assert_eq!(ended(launched).await, Exit::Code(0));
    let real = std::fs::canonicalize(&sub).unwrap();
    assert_eq!(
        texts(&output),
        vec![real.display().to_string(), "3000 3000 hi".to_string()]
    );
    assert_eq!(std::fs::read_to_string(sub.join("out.txt")).unwrap(), "written\n");
}

#[tokio::test]
async fn a_missing_image_is_a_clear_error_within_thirty_seconds() {
    let fx = Fixture::new("noimage").await;
    let image = format!("berth/no-such-image-{}:latest", fx.instance);
    let err = match fx.launch(1, &JobSpec::argv(["true"]).with_image(&image)).await {
        Err(e) => e,
        Ok(_) => panic!("a missing image must not launch"),
    };
    match &err {
        Error::ImageMissing { image: named, .. } => assert_eq!(named, &image),
        other => panic!("expected ImageMissing, got {other:?}"),
    }
    assert!(err.to_string().contains("berth images build"), "{err}");

    // A non-berth image is pulled; a registry that does not exist fails
    // with the engine's reason, naming the registry, and never hangs: the
    // bound is the feature (30 s: a name lookup that fails, with room).
    let started = Instant::now();
    let err = fx
        .launch(
            2,
            &JobSpec::argv(["true"]).with_image("registry.invalid/berth-missing:latest"),
        )
        .await
        .err()
        .expect("must not launch");
    assert!(matches!(err, Error::PullFailed { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("registry.invalid") && !msg.contains("images build"),
        "{msg}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
}

/// One HTTP GET over a plain socket; returns the whole answer.
fn http_get(addr: std::net::SocketAddr) -> std::io::Result<String> {
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(b"GET /index.html HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let mut body = String::new();
    s.read_to_string(&mut body)?;
    Ok(body)
}

#[tokio::test]
async fn an_httpd_is_reachable_on_its_published_port_and_its_own_ip() {
    let fx = Fixture::new("httpd").await;
    let spec = JobSpec::argv(["httpd", "-f", "-p", "8080", "-h", "/www"]).with_port(8080);
    let (launched, _out) = fx.launch(1, &spec).await.unwrap();
    let host_port = launched.ports[0].host_port;
    let ip = launched.internal_ip.expect("internal ip");
    let published = std::net::SocketAddr::from(([127, 0, 0, 1], host_port));
    let deadline = Instant::now() + Duration::from_secs(10);
    let body = loop {
        match tokio::task::spawn_blocking(move || http_get(published))
            .await
            .unwrap()
        {
            Ok(b) if b.contains("hello from berth") => break b,
            other if Instant::now() > deadline => panic!("httpd not reachable on {published}: {other:?}"),
            _ => tokio::time::sleep(Duration::from_millis(25)).await,
        }
    };
    assert!(body.starts_with("HTTP/1."), "{body}");
    let direct = tokio::task::spawn_blocking(move || http_get(std::net::SocketAddr::new(ip, 8080)))
        .await
        .unwrap()
        .expect("the container's own address answers");
    assert!(direct.contains("hello from berth"));

    let control = launched.control.clone();
    let t = Instant::now();
    control.signal(Signal::SIGTERM as i32).await;
    assert_eq!(ended(launched).await, Exit::Signal(15));
    eprintln!("httpd stop (SIGTERM → exit drained) took {:?}", t.elapsed());
    control.cleanup();
}

#[tokio::test]
async fn sigterm_ends_a_container_job_and_remove_leaves_nothing() {
    let fx = Fixture::new("signal").await;
    let (launched, _out) = fx
        .launch(1, &JobSpec::shell("sleep 1000 & sleep 1000"))
        .await
        .unwrap();
    let cid = launched.container_id.clone().unwrap();
    let control = launched.control.clone();
    let t = Instant::now();
    control.signal(Signal::SIGTERM as i32).await;
    let exit = ended(launched).await;
    eprintln!(
        "stop with Init=true (SIGTERM → exit drained) took {:?}",
        t.elapsed()
    );
    // Ended by the SIGTERM itself (the init passed it on), not by a later
    // SIGKILL.
    assert_eq!(exit, Exit::Signal(15));
    // Signalling an exited container is not an error.
    control.signal(Signal::SIGTERM as i32).await;
    control.cleanup();
    fx.engine.settle_removals(JOB_LIMIT).await;
    assert_eq!(inspect_status(fx.docker().await, &cid).await, Some(404));
    // Removing twice is fine too.
    control.cleanup();
    fx.engine.settle_removals(JOB_LIMIT).await;
    assert!(fx.engine.removals.unconfirmed().is_empty());
}

#[tokio::test]
async fn remove_blocking_works_from_inside_a_runtime() {
    let fx = Fixture::new("blocking").await;
    let (launched, _out) = fx.launch(1, &JobSpec::argv(["sleep", "1000"])).await.unwrap();
    let cid = launched.container_id.clone().unwrap();
    // This test runs on a current-thread runtime: blocking it must not
    // deadlock, and the container is gone when it returns.
    launched.control.kill_now();
    assert_eq!(inspect_status(fx.docker().await, &cid).await, Some(404));
    // The job's end is still reported (the engine killed it on removal).
    let exit = ended(launched).await;
    assert!(
        matches!(exit, Exit::Code(137) | Exit::Lost(_)),
        "unexpected exit after removal: {exit:?}"
    );
}

#[tokio::test]
async fn fast_exits_are_never_missed() {
    let fx = Fixture::new("fast").await;
    let runs = (1..=8).map(|n| {
        let fx = &fx;
        async move {
            let (launched, out) = fx.launch(n, &JobSpec::argv(["echo", "done"])).await.unwrap();
            let control = launched.control.clone();
            let exit = ended(launched).await;
            control.cleanup();
            (exit, texts(&out))
        }
    });
    for (exit, lines) in futures_util::future::join_all(runs).await {
        assert_eq!(exit, Exit::Code(0));
        assert_eq!(lines, vec!["done"]);
    }
}

#[tokio::test]
async fn an_asked_host_port_that_is_taken_is_refused_not_replaced() {
    let mut fx = Fixture::new("port").await;
    let pause = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = pause.local_addr().unwrap().port();
    let mut spec = JobSpec::argv(["sleep", "60"]);
    spec.ports.push(PortSpec {
        port: 80,
        host_port: Some(taken),
        proto: crate::model::Proto::Tcp,
    });
    // Seen before asking the engine, or only by the engine: either way the
    // caller's port is not silently another one.
    for (n, precheck) in [(1, true), (2, false)] {
        fx.engine.precheck_ports = precheck;
        let err = fx.launch(n, &spec).await.err().expect("refused");
        assert!(
            matches!(err, Error::PortInUse { port, job_port: 80 } if port == taken),
            "precheck {precheck}: {err}"
        );
    }
    drop(pause);
}

#[tokio::test]
async fn an_oom_kill_is_reported_as_such() {
    let fx = Fixture::new("oom").await;
    let mut spec = JobSpec::argv(["dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"]);
    spec.limits.memory = Some(16 << 20);
    let (launched, _out) = fx.launch(1, &spec).await.unwrap();
    assert_eq!(ended(launched).await, Exit::Oom);
}

#[tokio::test]
async fn usage_reports_cpu_and_memory() {
    let fx = Fixture::new("usage").await;
    let mut spec = JobSpec::shell("while :; do :; done");
    spec.limits.cpus = Some(0.5);
    let (launched, _out) = fx.launch(1, &spec).await.unwrap();
    let cid = launched.container_id.clone().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let usage = fx.engine.usage(&cid).await.expect("usage of a running container");
    eprintln!("usage of a busy loop limited to 0.5 CPU: {usage:?}");
    assert!(usage.cpu_percent > 10.0 && usage.cpu_percent < 90.0, "{usage:?}");
    assert!(usage.memory_bytes > 0, "{usage:?}");
    launched.control.kill().await;
    ended(launched).await;
    launched_gone(&fx, &cid).await;
}

async fn launched_gone(fx: &Fixture, cid: &str) {
    remove_container(fx.docker().await, cid).await;
    assert!(fx.engine.usage(cid).await.is_none());
}

#[tokio::test]
async fn remove_labelled_removes_only_this_instance() {
    let fx = Fixture::new("labelled").await;
    let other = Fixture::new("labelled-other").await;
    let (a, _) = fx.launch(1, &JobSpec::argv(["sleep", "1000"])).await.unwrap();
    let (b, _) = fx.launch(2, &JobSpec::argv(["sleep", "1000"])).await.unwrap();
    let (c, _) = other.launch(1, &JobSpec::argv(["sleep", "1000"])).await.unwrap();
    assert_eq!(fx.engine.remove_labelled(&fx.instance).await, 2);
    // Their exit futures still resolve: removal ends the job.
    ended(a).await;
    ended(b).await;
    let filters = std::collections::HashMap::from([(
        "label".to_string(),
        vec![format!("{LABEL_INSTANCE}={}", fx.instance)],
    )]);
    let left = fx
        .docker()
        .await
        .list_containers(ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
    let cid = c.container_id.clone().unwrap();
    assert_eq!(
        inspect_status(other.docker().await, &cid).await,
        None,
        "the other instance's job survives"
    );
    c.control.kill().await;
    ended(c).await;
}

#[tokio::test]
async fn auto_resolves_to_docker_when_the_engine_answers() {
    let fx = Fixture::new("resolve").await;
    assert_eq!(
        fx.engine.resolve(RunnerChoice::Auto).await.unwrap(),
        RunnerKind::Docker
    );
    assert_eq!(
        fx.engine.resolve(RunnerChoice::Host).await.unwrap(),
        RunnerKind::Host
    );
}

/// The bound is the feature: a dead engine costs each resolve at most one
/// ping's timeout (1.5 s), so two of them end within 4 s.
#[tokio::test]
async fn an_unreachable_engine_is_a_clear_error_and_auto_falls_back_within_four_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = Engine::new(&Config::isolated(dir.path(), "unreachable"));
    // Set on the engine, not in the environment: other tests run in parallel.
    engine.endpoint = Endpoint::plain("unix:///nonexistent/docker.sock");
    let t = Instant::now();
    assert_eq!(
        engine.resolve(RunnerChoice::Auto).await.unwrap(),
        RunnerKind::Host
    );
    let err = engine.resolve(RunnerChoice::Docker).await.unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(4), "took {:?}", t.elapsed());
    assert!(matches!(err, Error::EngineUnavailable { .. }), "{err:?}");
    assert!(
        err.to_string().contains("unix:///nonexistent/docker.sock"),
        "{err}"
    );
    assert_eq!(engine.remove_labelled("unreachable").await, 0);
}

#[tokio::test]
async fn containers_of_another_state_dir_are_never_removed_or_adopted() {
    let fx = Fixture::new("owner").await;
    // Same instance name, another state dir: a twin manager's job.
    let twin_dir = tempfile::tempdir().unwrap();
    let twin = Engine::new(
        &Config::isolated(twin_dir.path().join("state"), &fx.instance).with_workspace(&fx.workspace),
    );
    assert_ne!(twin.state(), fx.engine.state());
    let id = JobId::from_number(1);
    let out = fx.output(&id);
    let launched = twin
        .launch(&id, &JobSpec::argv(["sleep", "1000"]), &fx.workspace, &out)
        .await
        .unwrap();
    let cid = launched.container_id.clone().unwrap();

    assert!(!fx.engine.remove_container_blocking(&cid), "not ours: refused");
    assert_eq!(fx.engine.remove_labelled(&fx.instance).await, 0);
    let adoption = Adoption {
        container_id: cid.clone(),
        stored: (0, 0),
        ports: vec![],
        limits: AppliedLimits::default(),
        allow: crate::net::Allowlist::default(),
        on_denial: std::sync::Arc::new(|_| {}),
    };
    let err = fx
        .engine
        .adopt(&id, &fx.output(&JobId::from_number(2)), adoption)
        .await
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("another berth instance or state dir"),
        "{err}"
    );
    assert_eq!(inspect_status(fx.docker().await, &cid).await, None, "still there");

    // Its own manager may.
    assert!(twin.remove_container_blocking(&cid));
    assert_eq!(inspect_status(fx.docker().await, &cid).await, Some(404));
    ended(launched).await;
    twin.remove_labelled(&fx.instance).await;
}
