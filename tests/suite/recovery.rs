//! Crashes and restarts: a SIGKILLed daemon leaves nothing running (the crash
//! watchdog cleans up), and a restarted one still knows its jobs, their
//! output and their ids.

use std::time::{Duration, Instant};

use crate::common::{Daemon, containers_of, eventually, job_containers_of, processes_with, unique_sleep};

#[tokio::test]
async fn a_killed_daemon_leaves_nothing_behind_and_a_new_one_remembers() {
    let mut d = Daemon::start();
    let token = unique_sleep();
    let mut ids = Vec::new();
    for (runner, cmd) in [
        ("docker", format!("echo container one; sleep {token}")),
        ("docker", format!("echo container two; sleep {token}")),
        ("host", format!("echo host; sleep {token} & sleep {token}")),
    ] {
        let v = d.json(&["run", "-d", "--runner", runner, "--shell", "--", &cmd]);
        ids.push(v["job"]["id"].as_str().unwrap().to_string());
    }
    eventually(Duration::from_secs(15), "all four sleeps", || {
        processes_with(&token).len() == 4
    })
    .await;
    assert_eq!(containers_of(&d.instance), 2);
    for id in &ids {
        let (code, _, _) = d.run(&["wait", id, "--log", "container|host", "--timeout", "10"]);
        assert_eq!(code, 0);
    }

    d.child.kill().unwrap(); // SIGKILL: no teardown runs in the daemon
    d.child.wait().unwrap();
    let killed_at = Instant::now();
    eventually(
        Duration::from_secs(5),
        "the watchdog removes containers and processes",
        || containers_of(&d.instance) == 0 && processes_with(&token).is_empty(),
    )
    .await;
    eprintln!("cleaned up {:?} after the kill", killed_at.elapsed());

    // A new daemon for the instance: the records, their output and the ids survive.
    let mut again = d
        .cli()
        .arg("daemon")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    eventually(Duration::from_secs(10), "new daemon", || d.answers()).await;
    let all = d.json(&["ps", "--all"]);
    let all = all.as_array().unwrap();
    assert_eq!(all.len(), 3, "{all:?}");
    for job in all {
        assert_eq!(job["status"]["state"], "lost", "{job}");
        assert_eq!(job["ended_by"], "system");
    }
    let logs = d.json(&["logs", &ids[2], "--since", "1"]);
    assert_eq!(logs["lines"][0]["text"], "host");
    let v = d.json(&["run", "-d", "--runner", "host", "--", "true"]);
    assert_eq!(v["job"]["id"], "job-4", "ids are never reused");
    let events = d.json(&["events"]);
    let seqs: Vec<u64> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    let mut sorted = seqs.clone();
    sorted.dedup();
    assert_eq!(seqs, sorted, "event seqs stay unique across the restart");
    // Every end has exactly one `ended` event, a crash's included.
    for id in &ids {
        let ended: Vec<_> = events["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "ended" && e["job"] == id.as_str())
            .collect();
        assert_eq!(ended.len(), 1, "{id}: {ended:?}");
        assert_eq!(ended[0]["ended_by"], "system");
        assert_eq!(ended[0]["status"], "lost");
    }
    again.kill().unwrap();
    again.wait().unwrap();
}

/// A container job is answered before its container is removed: `berth
/// down` right after still leaves none (shutdown awaits the removal), and
/// neither does a daemon killed right after answering (the removal may still
/// be under way; the watchdog removes whatever carries the dead owner).
#[tokio::test]
async fn no_container_outlives_a_quick_job_at_down_or_crash() {
    let quick = [
        "run",
        "--runner",
        "docker",
        "--image",
        "berth/sandbox:latest",
        "--",
        "echo",
        "quick",
    ];
    let d = Daemon::start();
    let (code, out, err) = d.run(&quick);
    assert_eq!((code, out.as_str()), (0, "quick\n"), "{err}");
    let (code, _, err) = d.run(&["down"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(containers_of(&d.instance), 0, "down waited for the removal");

    let mut d = Daemon::start();
    let (code, out, err) = d.run(&quick);
    assert_eq!((code, out.as_str()), (0, "quick\n"), "{err}");
    d.child.kill().unwrap(); // SIGKILL: no teardown runs in the daemon
    d.child.wait().unwrap();
    // Once the watchdog says it is done, nothing of the daemon is left: not
    // the job's container, nor a pause container whose creation the daemon
    // had sent just before dying (it lands after the first sweep, so a count
    // of zero at some moment proves nothing).
    let report = watchdog_report(&d).await;
    assert_eq!(containers_of(&d.instance), 0, "{report}");
}

/// A request the daemon sent just before it was killed can reach the engine
/// after the watchdog's first sweep: here the test plays that request,
/// creating a container with the dead daemon's labels once the first sweep
/// removed its job. The watchdog's later sweeps remove it too.
#[tokio::test]
async fn a_container_landing_after_the_watchdogs_first_sweep_is_removed_too() {
    let mut d = Daemon::start();
    let v = d.json(&[
        "run",
        "-d",
        "--runner",
        "docker",
        "--image",
        "berth/sandbox:latest",
        "--",
        "sleep",
        "300",
    ]);
    let cid = v["job"]["container_id"]
        .as_str()
        .expect("a container id")
        .to_string();
    let o = std::process::Command::new("docker")
        .args(["inspect", "-f", "{{json .Config.Labels}}", &cid])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let labels: std::collections::BTreeMap<String, String> = serde_json::from_slice(&o.stdout).unwrap();
    assert!(labels.contains_key("berth.owner"), "{labels:?}");

    d.child.kill().unwrap(); // SIGKILL: no teardown runs in the daemon
    d.child.wait().unwrap();
    let log = d.config().instance_dir().join("watchdog.log");
    eventually(Duration::from_secs(10), "the first sweep", || {
        std::fs::read_to_string(&log).is_ok_and(|s| s.contains("sweeping again"))
    })
    .await;
    assert_eq!(containers_of(&d.instance), 0);
    let mut late = std::process::Command::new("docker");
    late.arg("create");
    for (k, v) in labels.iter().filter(|(k, _)| k.as_str() != "berth.job") {
        late.args(["--label", &format!("{k}={v}")]);
    }
    let o = late.args(["berth/sandbox:latest", "true"]).output().unwrap();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(containers_of(&d.instance), 1);

    let report = watchdog_report(&d).await;
    assert_eq!(containers_of(&d.instance), 0, "{report}");
    assert!(report.contains("1 more later"), "{report}");
}

#[tokio::test]
async fn adopt_mode_follows_a_container_across_a_daemon_crash() {
    let mut d = Daemon::start_with(&[("BERTH_RECOVERY", "adopt")]);
    let v = d.json(&[
        "run",
        "-d",
        "--runner",
        "docker",
        "--shell",
        "--",
        "seq 1 1000000 | while read i; do echo $i; sleep 0.05; done",
    ]);
    let id = v["job"]["id"].as_str().unwrap().to_string();
    let (code, _, _) = d.run(&["wait", &id, "--log", "^20$", "--timeout", "20"]);
    assert_eq!(code, 0);
    d.child.kill().unwrap();
    d.child.wait().unwrap();

    // A new manager takes over within the watchdog's adopt window.
    let again = adopt(&d).await;
    let info = d.json(&["status", &id]);
    assert_eq!(info["status"]["state"], "running", "{info}");
    assert_eq!(info["recovered"], true, "a taken-over job says so: {info}");
    let before = info["last_seq"].as_u64().unwrap();
    let (code, _, err) = d.run(&[
        "wait",
        &id,
        "--log",
        &format!("^{}$", before + 40),
        "--timeout",
        "20",
    ]);
    assert_eq!(code, 0, "the counter goes on after the crash: {err}");

    let page = d.json(&["logs", &id, "--since", "1", "--limit", "100000"]);
    let lines = page["lines"].as_array().unwrap();
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["seq"].as_u64().unwrap(), i as u64 + 1, "contiguous seq");
        assert_eq!(
            l["text"].as_str().unwrap(),
            (i + 1).to_string(),
            "no gap, no duplicate"
        );
    }
    assert!(lines.len() as u64 >= before + 40);
    // It started once: the adoption is on its record, not a second `started`.
    let events = d.json(&["events"]);
    let starts = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["job"] == id.as_str() && e["kind"] == "started")
        .count();
    assert_eq!(starts, 1, "{events}");
    let k = d.json(&["kill", &id]);
    assert_eq!(k["result"], "killed");
    nothing_left_after_the_last_watchdog(&d, again).await;
}

/// A container keeps the label of the manager that started it (labels
/// cannot change), so one that a second manager adopted names a dead owner.
/// When the adopter crashes too, its watchdog removes it all the same:
/// nothing outlives the last manager.
#[tokio::test]
async fn an_adopted_container_goes_when_its_adopter_crashes_too() {
    let mut d = Daemon::start_with(&[("BERTH_RECOVERY", "adopt")]);
    let v = d.json(&[
        "run",
        "-d",
        "--runner",
        "docker",
        "--image",
        crate::common::SANDBOX,
        "--",
        "sleep",
        "300",
    ]);
    let id = v["job"]["id"].as_str().unwrap().to_string();
    assert_eq!(d.json(&["status", &id])["status"]["state"], "running");
    d.child.kill().unwrap();
    d.child.wait().unwrap();

    let again = adopt(&d).await;
    let info = d.json(&["status", &id]);
    assert_eq!(info["recovered"], true, "adopted: {info}");
    assert_eq!(info["status"]["state"], "running", "{info}");
    assert_eq!(job_containers_of(&d.instance), 1);

    // The adopter dies too, with the adopted job still running.
    nothing_left_after_the_last_watchdog(&d, again).await;
}

/// Recovery mode `adopt` follows a dead daemon's containers, but not those
/// an MCP session owned: the session died with its daemon, so its job is
/// reaped (recorded lost, saying so, its container removed) instead of
/// running on with no live session able to end it.
#[tokio::test]
async fn adopt_mode_reaps_a_dead_sessions_container_instead_of_adopting_it() {
    let mut d = Daemon::start_with(&[("BERTH_RECOVERY", "adopt")]);
    let client = berth::api::client::Client::new(&d.config());
    let mut spec = berth::JobSpec::argv(["sleep", "300"])
        .with_runner(berth::RunnerChoice::Docker)
        .background();
    spec.image = Some("berth/sandbox:latest".into());
    spec.owner = Some("mcp:a-session-of-the-dead-daemon".into());
    let owned = client.create(&spec).await.unwrap().info.id;
    // And one nobody owns, which adopt mode follows on.
    spec.owner = None;
    let free = client.create(&spec).await.unwrap().info.id;
    // Two jobs, and the session's pod pause (its job is in the session's pod).
    assert_eq!(job_containers_of(&d.instance), 2);
    assert_eq!(containers_of(&d.instance), 3);
    d.child.kill().unwrap();
    d.child.wait().unwrap();

    let again = adopt(&d).await;
    let info = d.json(&["status", owned.as_str()]);
    assert_eq!(info["status"]["state"], "lost", "{info}");
    let reason = info["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("mcp:a-session-of-the-dead-daemon"), "{info}");
    let info = d.json(&["status", free.as_str()]);
    assert_eq!(info["status"]["state"], "running", "{info}");
    assert_eq!(info["recovered"], true, "{info}");
    eventually(
        Duration::from_secs(20),
        "the owned job's container removed",
        || job_containers_of(&d.instance) == 1,
    )
    .await;

    d.run(&["kill", free.as_str()]);
    nothing_left_after_the_last_watchdog(&d, again).await;
}

/// A daemon started by hand in a test, SIGKILLed when dropped: when the
/// test says so, or when it ends however it ends (its watchdog then removes
/// what it ran, so a failed test leaves nothing on the engine).
struct KillOnDrop(std::process::Child);

/// A new daemon for `d`'s instance in recovery mode `adopt` (its output is
/// not ours), once it answers.
async fn adopt(d: &Daemon) -> KillOnDrop {
    restarted(d, "adopt").await
}

/// A new daemon for `d`'s instance in recovery mode `recovery`, once it answers.
async fn restarted(d: &Daemon, recovery: &str) -> KillOnDrop {
    let again = KillOnDrop(
        d.cli()
            .arg("daemon")
            .env("BERTH_RECOVERY", recovery)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    eventually(Duration::from_secs(10), "new daemon", || d.answers()).await;
    again
}

/// A network the test made, removed by its id when dropped.
struct ProbeNet(String);

impl Drop for ProbeNet {
    fn drop(&mut self) {
        let o = std::process::Command::new("docker")
            .args(["network", "rm", &self.0])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() || err.contains("No such network") || std::thread::panicking(),
            "the probe network was not removed: {err}"
        );
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The crash watchdog's log once it reported its cleanup (it exits then:
/// its later sweeps are done).
async fn watchdog_report(d: &Daemon) -> String {
    let log = d.config().instance_dir().join("watchdog.log");
    // Its ~12 s of late sweeps take much longer on an engine the whole
    // suite loads (CI once passed 40 s).
    eventually(Duration::from_secs(150), "the watchdog's report", || {
        std::fs::read_to_string(&log).is_ok_and(|s| s.contains("died;"))
    })
    .await;
    std::fs::read_to_string(&log).unwrap()
}

/// SIGKILL the adopting daemon too; once its watchdog process ended (its
/// late sweeps done), no container and no network of the instance is left
/// on the engine. Waited on by the watchdog's process, not by a line of its
/// log: a watchdog that wrongly stood down must fail the leftovers check
/// below, with its log, not time out. (Ending the test earlier removed the
/// state dir under the watchdog, which then took the crash for a clean exit
/// and left the dead daemon's pool network behind.)
async fn nothing_left_after_the_last_watchdog(d: &Daemon, adopter: KillOnDrop) {
    let log = d.config().instance_dir().join("watchdog.log");
    let mut watchdog = None;
    eventually(Duration::from_secs(10), "the adopter's watchdog runs", || {
        watchdog = super::faults::watchdog_of(adopter.0.id());
        watchdog.is_some()
    })
    .await;
    let watchdog = watchdog.unwrap();
    drop(adopter);
    // Its first sweep settles the store and the engine, then ~12 s of late
    // sweeps: on a busy engine (the whole suite at once) that took over 60 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(150);
    // Gone, or a zombie nobody reaped yet (its parent, the daemon, is dead).
    let alive = || {
        std::fs::read_to_string(format!("/proc/{watchdog}/stat")).is_ok_and(|s| {
            s.rsplit_once(") ")
                .is_some_and(|(_, rest)| !rest.starts_with('Z'))
        })
    };
    while alive() {
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            std::time::Instant::now() < deadline,
            "the last watchdog never ended: {log}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let report = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(containers_of(&d.instance), 0, "{report}");
    let o = std::process::Command::new("docker")
        .args(["network", "ls", "-q", "--filter"])
        .arg(format!("label=berth.instance={}", d.instance))
        .output()
        .unwrap();
    let networks = String::from_utf8_lossy(&o.stdout).lines().count();
    assert_eq!(networks, 0, "networks left: {report}");
}

/// berth's forwarder of a job's port lives in its manager: it dies with a
/// SIGKILLed daemon, and a new daemon that adopts the job listens on the
/// recorded host port again, so the job answers where it did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopt_mode_forwards_an_adopted_jobs_port_again() {
    let mut d = Daemon::start_with(&[("BERTH_RECOVERY", "adopt")]);
    let v = d.json(&[
        "run",
        "-d",
        "--runner",
        "docker",
        "--image",
        crate::common::SANDBOX,
        "-p",
        "8080",
        "--ready-http",
        "/",
        "--",
        "httpd",
        "-f",
        "-p",
        "8080",
        "-h",
        "/www",
    ]);
    let id = v["job"]["id"].as_str().unwrap().to_string();
    let port = v["job"]["ports"][0]["host_port"].as_u64().unwrap() as u16;
    assert!(crate::common::http_get(port).contains("hello from berth"));
    d.child.kill().unwrap();
    d.child.wait().unwrap();
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the forwarder died with its daemon"
    );

    let again = adopt(&d).await;
    let info = d.json(&["status", &id]);
    assert_eq!(info["recovered"], true, "{info}");
    assert_eq!(info["ports"][0]["host_port"], port, "{info}");
    // Waits, not bounds: beside the whole suite a re-forward took longer.
    eventually(
        Duration::from_secs(60),
        "the adopted job answers on its port again",
        || crate::common::try_http_get(port).is_some_and(|p| p.contains("hello from berth")),
    )
    .await;
    let k = d.json(&["kill", &id]);
    assert_eq!(k["result"], "killed");
    eventually(Duration::from_secs(60), "its port closes with it", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
    })
    .await;
    nothing_left_after_the_last_watchdog(&d, again).await;
}

/// A daemon restarted at once after a SIGKILL: the dead one's watchdog
/// keeps sweeping for ~12 s, and an unused network of the instance may be
/// the new manager's, between its create and a container's start (a scoped
/// child's, a pool network). The watchdog leaves networks alone once
/// another manager serves the instance.
#[tokio::test]
async fn a_dead_managers_watchdog_leaves_the_new_managers_networks() {
    let mut d = Daemon::start();
    let v = d.json(&[
        "run",
        "-d",
        "--runner",
        "docker",
        "--image",
        "berth/sandbox:latest",
        "--",
        "sleep",
        "300",
    ]);
    assert!(v["job"]["container_id"].is_string(), "{v}");
    d.child.kill().unwrap();
    d.child.wait().unwrap();
    // The watchdog cleans only while the pid file still names its manager:
    // a new manager that wrote its own first settles the dead one itself,
    // and the watchdog says nothing. So the new one starts once the
    // watchdog's first sweep is done (CI saw the other order twice), and
    // serves while its late sweeps run.
    let log = d.config().instance_dir().join("watchdog.log");
    eventually(Duration::from_secs(60), "the watchdog's first sweep", || {
        std::fs::read_to_string(&log).is_ok_and(|s| s.contains("is gone:"))
    })
    .await;
    let again = restarted(&d, "reap").await;
    let state = berth::runner::docker::state_hash(&d.config().state_dir);
    let name = format!("{}-probe-net", d.instance);
    let o = std::process::Command::new("docker")
        .args(["network", "create", "--internal"])
        .args(["--label", "berth.managed=true"])
        .args(["--label", &format!("berth.instance={}", d.instance)])
        .args(["--label", &format!("berth.state={state}")])
        .arg(&name)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    // Removed by its id whatever happens (a name can be ambiguous on this
    // engine, and a leftover of the suite's fails CI).
    let probe = ProbeNet(String::from_utf8_lossy(&o.stdout).trim().to_string());
    let report = watchdog_report(&d).await;
    let kept = std::process::Command::new("docker")
        .args(["network", "inspect", &probe.0])
        .output()
        .unwrap();
    assert!(
        kept.status.success(),
        "the watchdog removed the new manager's network: {report}"
    );
    drop(probe);
    drop(again);
}
