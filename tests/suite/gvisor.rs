//! `isolation = "gvisor"` on the real engine with Debian's `runsc`
//! registered as `runsc` (`scripts/test.sh` registers it; these tests fail loudly
//! when it is not): the job's kernel is gVisor's, and what berth promises
//! of a container job holds under it (ports and readiness through berth's
//! forwarder, complete output, the memory limit, the egress proxy, a kill,
//! nothing left after `down`). A weaker isolation than the project's is
//! refused, as is an unregistered runtime, each in one line.

use berth::JobSpec;

use crate::common::lan::LanHost;
use crate::common::{Daemon, SANDBOX, containers_of, manager_with};

fn gvisor<'a>(rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "--runner",
        "docker",
        "--image",
        SANDBOX,
        "--isolation",
        "gvisor",
    ];
    args.extend_from_slice(rest);
    args
}

#[test]
fn a_gvisor_job_keeps_berths_promises_and_is_killed_within_grace_plus_one_second() {
    let d = Daemon::start();
    // The kernel: gVisor's under gvisor, the host's otherwise.
    let (code, under, err) = d.run_in_ws(&gvisor(&["--", "uname", "-r"]));
    assert_eq!(code, 0, "{err}");
    let (code, plain, err) = d.run_in_ws(&[
        "run", "--runner", "docker", "--image", SANDBOX, "--", "uname", "-r",
    ]);
    assert_eq!(code, 0, "{err}");
    let host = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(plain.trim(), host.trim());
    assert_ne!(under.trim(), host.trim(), "gVisor reports a kernel of its own");
    let last = &d.json(&["ps", "--all"])[1];
    assert_eq!(last["limits"]["isolation"], "gvisor (runsc)", "{last}");
    let (_, card, _) = d.run_in_ws(&["status", last["id"].as_str().unwrap()]);
    assert!(card.contains("gvisor (runsc)"), "{card}");

    // 100,000 lines, every one.
    let (code, out, err) = d.run_in_ws(&gvisor(&["--", "seq", "1", "100000"]));
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 100_000);
    assert_eq!((lines[0], lines[99_999]), ("1", "100000"));

    // The memory limit: the job is killed, 137, and berth says why.
    let (code, _, err) = d.run_in_ws(&gvisor(&[
        "--memory",
        "64m",
        "--",
        "sh",
        "-c",
        "head -c 300m /dev/zero | tail > /dev/null",
    ]));
    assert_eq!(code, 137, "{err}");
    assert!(err.contains("memory limit"), "{err}");

    // A port with readiness, answered on the caller's 127.0.0.1.
    let ws = d.dir.path().join("ws");
    std::fs::write(ws.join("index.html"), "hello from gvisor\n").unwrap();
    let (code, out, err) = d.run_in_ws(&gvisor(&[
        "-d",
        "-p",
        "8080",
        "--ready-http",
        "/",
        "--json",
        "--",
        "httpd",
        "-f",
        "-p",
        "8080",
        "-h",
        ".",
    ]));
    assert_eq!(code, 0, "{err}");
    let started: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(started["ready"]["outcome"], "ready", "{started}");
    let port = started["ready"]["host_port"].as_u64().unwrap() as u16;
    // The first answer may come back empty on a loaded machine (CI saw one
    // beside the whole suite); a server that answers whole within 30 s passes.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let answer = loop {
        match crate::common::try_http_get(port) {
            Some(a) if !a.is_empty() => break a,
            _ if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(200))
            }
            other => break other.unwrap_or_default(),
        }
    };
    assert!(answer.ends_with("\r\n\r\nhello from gvisor\n"), "{answer}");

    // A kill ends it; `down` leaves no container of the instance.
    let id = started["job"]["id"].as_str().unwrap();
    // Within the grace (2 s here) and a second: the bound is the promise.
    let asked = std::time::Instant::now();
    let (code, _, err) = d.run_in_ws(&["kill", id]);
    assert_eq!(code, 0, "{err}");
    assert!(
        asked.elapsed() < std::time::Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(d.json(&["status", id])["status"]["state"], "killed");
    let (code, _, err) = d.run_in_ws(&["down"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(containers_of(&d.instance), 0);
}

#[test]
fn a_weaker_isolation_or_an_unregistered_runtime_is_refused_in_one_line() {
    // The user's own config asks for gVisor.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("user-config.toml"), "isolation = \"gvisor\"\n").unwrap();
    let d = Daemon::start_in(dir, &[], std::process::Stdio::piped());
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "run",
                "--runner",
                "docker",
                "--image",
                SANDBOX,
                "--isolation",
                "container",
                "--",
                "true",
            ],
            "weaker than this project's",
        ),
        (
            &["run", "--runner", "host", "--", "true"],
            "needs a container job",
        ),
        (
            &[
                "run", "--runner", "docker", "--image", SANDBOX, "--engine", "scoped", "--", "true",
            ],
            "scoped engine",
        ),
    ];
    for (args, says) in cases {
        let (code, out, err) = d.run_in_ws(args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // The project's isolation is the default: a job that names none gets gVisor.
    let (code, out, err) = d.run_in_ws(&[
        "run", "--runner", "docker", "--image", SANDBOX, "--", "uname", "-r",
    ]);
    assert_eq!(code, 0, "{err}");
    let host = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_ne!(out.trim(), host.trim());
    drop(d);

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("user-config.toml"),
        "gvisor_runtime = \"no-such-runtime\"\n",
    )
    .unwrap();
    let d = Daemon::start_in(dir, &[], std::process::Stdio::piped());
    let (code, out, err) = d.run_in_ws(&gvisor(&["--", "true"]));
    assert_eq!(code, 2, "{out}{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("no-such-runtime") && err.contains("daemon.json"),
        "{err}"
    );
    assert_eq!(d.json(&["ps", "--all"]).as_array().map_or(0, Vec::len), 0);
    // `doctor` says what to add, and that runsc (the default name) would do.
    let (_, out, _) = d.run_in_ws(&["doctor", "--check"]);
    assert!(out.contains("runtime `no-such-runtime` NOT registered"), "{out}");
    assert!(out.contains("daemon.json") && out.contains("HUP"), "{out}");
}

/// Under gVisor, berth's egress proxy still decides: an allowed host is
/// reached through it, another is denied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_egress_proxy_holds_under_gvisor() {
    let mut allowed = LanHost::new();
    allowed.serve_http(80, "the allowed page");
    let mut other = LanHost::new();
    other.serve_http(80, "the other page");
    let (a, b) = (allowed.addr, other.addr);
    let t = manager_with(|mut c| {
        c.egress_allow = vec![a.to_string()];
        c
    });
    let script = format!(
        "curl -s -m 10 http://{a}/; echo; curl -s -m 10 -o /dev/null -w '%{{http_code}}\\n' http://{b}/"
    );
    let mut spec = JobSpec::shell(script)
        .with_runner(berth::RunnerChoice::Docker)
        .with_image("berth/dev:latest");
    spec.isolation = Some(berth::model::Isolation::Gvisor);
    let job = t.manager.start(spec).await.unwrap();
    let end = job.wait_end().await.unwrap();
    assert_eq!(end.exit_code, Some(0), "{:?}", job.output_lines());
    assert_eq!(job.output_lines().unwrap(), ["the allowed page", "403"]);
    assert_eq!(end.limits.isolation.as_deref(), Some("gvisor (runsc)"));
    t.manager.shutdown().await;
}

/// The project's jobs share one network namespace (`--network project`):
/// under gVisor too, one reaches the other on localhost.
#[test]
fn a_projects_jobs_reach_each_other_on_localhost_under_gvisor() {
    let d = Daemon::start();
    let ws = d.dir.path().join("ws");
    std::fs::write(ws.join("index.html"), "next door\n").unwrap();
    let (code, _, err) = d.run_in_ws(&gvisor(&[
        "-d",
        "--network",
        "project",
        // Ready once it serves, not once it listens: under load the first
        // request to a fresh httpd under gVisor once got an empty reply.
        "--ready-port",
        "8080",
        "--ready-http",
        "/index.html",
        "--",
        "httpd",
        "-f",
        "-p",
        "8080",
        "-h",
        ".",
    ]));
    assert_eq!(code, 0, "{err}");
    // busybox wget fails under gVisor (a known quirk of the pair): curl.
    let (code, out, err) = d.run_in_ws(&[
        "run",
        "--runner",
        "docker",
        "--image",
        "berth/dev:latest",
        "--isolation",
        "gvisor",
        "--network",
        "project",
        "--",
        "curl",
        "-s",
        "-m",
        "10",
        "http://127.0.0.1:8080/index.html",
    ]);
    assert_eq!((code, out.as_str()), (0, "next door\n"), "{err}");
    let (code, _, err) = d.run_in_ws(&["down"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(containers_of(&d.instance), 0);
}

/// A manager SIGKILLed under a gVisor job leaves nothing: its watchdog
/// removes the sandbox (runsc's container) as it would runc's.
#[tokio::test]
async fn a_killed_manager_leaves_no_gvisor_container() {
    let mut d = Daemon::start();
    let instance = d.instance.clone();
    let job = d.json(&gvisor(&["-d", "-p", "8080", "--", "sleep", "600"]));
    assert_eq!(job["job"]["limits"]["isolation"], "gvisor (runsc)", "{job}");
    assert!(containers_of(&instance) > 0, "the gVisor job runs");
    let watchdog = crate::suite::faults::watchdog_of(d.pid()).expect("the daemon's watchdog runs");
    d.child.kill().unwrap();
    d.child.wait().unwrap();
    // The watchdog's first sweep is done once it says so in its log.
    let log = d.config().instance_dir().join("watchdog.log");
    crate::common::eventually(
        std::time::Duration::from_secs(120),
        "the watchdog's sweep",
        || std::fs::read_to_string(&log).is_ok_and(|l| l.contains("is gone")),
    )
    .await;
    assert_eq!(
        containers_of(&instance),
        0,
        "the watchdog ({watchdog}) left containers"
    );
}
