//! The scoped engine (`--engine scoped`) against the real engine: a Python
//! project's testcontainers suite passes inside a container job and leaves
//! nothing behind; hostile requests through the job's socket are refused
//! and logged; a SIGKILLed daemon's children go with the watchdog; the cap
//! counts the job once and its children count against its child limit.
//! Requests written byte for byte against the engine's own parsing are
//! `differential.rs`; random creates are `fuzz.rs`.

use std::process::Command;
use std::time::Duration;

use crate::common::{Daemon, eventually};

mod bodies;
mod differential;
mod fuzz;
mod py;
mod raw;
mod setup;

use py::*;
use setup::*;

#[tokio::test]
async fn a_testcontainers_suite_passes_under_berth_test_engine_scoped_and_leaves_nothing() {
    let d = Daemon::start();
    let ws = d.dir.path().join("ws");
    let wheels = ws.join("wheels");
    std::fs::create_dir_all(&wheels).unwrap();
    for w in std::fs::read_dir(wheelhouse()).unwrap().flatten() {
        if w.path().extension().is_some_and(|e| e == "whl") {
            std::fs::copy(w.path(), wheels.join(w.file_name())).unwrap();
        }
    }
    project(
        &ws,
        &[
            (
                "berth.toml",
                "test_command = \"sh run.sh\"\nrunner = \"docker\"\n",
            ),
            ("run.sh", RUN_SUITE),
            ("test_web.py", SUITE),
        ],
    );
    let (code, out, err) = berth_in(&d, &[], &["test", "--engine", "scoped"]);
    assert_eq!(code, 0, "berth test failed:\n{out}\n{err}");
    assert!(out.contains("2 passed"), "{out}");
    // The children went before the job was answered; its own container follows.
    assert_eq!(children_of(&d.instance), 0, "a child of the job remains");
    eventually(Duration::from_secs(10), "no container of the job remains", || {
        crate::common::job_containers_of(&d.instance) == 0 && children_of(&d.instance) == 0
    })
    .await;
    let jobs = d.json(&["ps", "--all"]);
    let job = &jobs.as_array().unwrap()[0];
    let children = job["children"]
        .as_array()
        .expect("the job's children on its record");
    assert_eq!(children.len(), 2, "{job}");
    assert!(children.iter().all(|c| c["state"] == "removed"), "{job}");
    assert_eq!(children[1]["name"], "left", "the name the suite gave");
    assert_eq!(children[0]["image"], "berth/sandbox:latest");
    let name = children[0]["name"].as_str().unwrap();
    // The child's output stays with the job: httpd's access line for the GET.
    let id = job["id"].as_str().unwrap();
    let (code, logs, err) = d.run(&["logs", id, "--child", name]);
    assert_eq!(code, 0, "{err}");
    assert!(logs.contains("response:200"), "{logs}");
    let (_, table, _) = d.run(&["ps", "--all"]);
    assert!(
        table.contains(&format!("└ child {name} removed berth/sandbox:latest")),
        "{table}"
    );
}

/// What a test library does beyond create and start goes through: exec and
/// attach (connections handed over), archives, waits, networks and volumes
/// of the job's own, under the names the job gave them.
#[tokio::test]
async fn docker_py_exec_attach_archives_networks_and_volumes_work_through_the_socket() {
    let d = Daemon::start();
    let ws = d.dir.path().join("ws");
    let wheels = ws.join("wheels");
    std::fs::create_dir_all(&wheels).unwrap();
    for w in std::fs::read_dir(wheelhouse()).unwrap().flatten() {
        if w.path().extension().is_some_and(|e| e == "whl") {
            std::fs::copy(w.path(), wheels.join(w.file_name())).unwrap();
        }
    }
    let run = "set -e\npython3 -m pip install --quiet --no-index --find-links wheels --target .deps docker\nPYTHONPATH=.deps python3 calls.py\n";
    project(&ws, &[("calls.py", CALLS_PY), ("run.sh", run)]);
    let (code, out, err) = berth_in(&d, &[], &["run", "--engine", "scoped", "--", "sh", "run.sh"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| panic!("{out}\n{err}"));
    let got: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(
        got,
        serde_json::json!({
            "api": "1.41", "networks": ["testnet"], "exec": "hi from exec\n", "put": true, "get": 7,
            "wait": 0, "attach": "attached\n", "volume": "data", "names": ["box", "sandbox-2"], "nope": 404
        })
    );
    assert_eq!(children_of(&d.instance), 0);
}

#[tokio::test]
async fn hostile_requests_through_the_socket_are_refused_and_logged() {
    let d = Daemon::start();
    let ws = d.dir.path().join("ws");
    project(&ws, &[("engine.py", ENGINE_PY), ("hostile.py", HOSTILE_PY)]);
    // A container the job did not make (this test's own), to probe for.
    let other = Command::new("docker")
        .args([
            "create",
            "--label",
            "berth-test=scoped-other",
            "berth/sandbox:latest",
            "sleep",
            "60",
        ])
        .output()
        .expect("docker CLI");
    assert!(other.status.success(), "{other:?}");
    let other = String::from_utf8_lossy(&other.stdout).trim().to_string();
    let (code, out, err) = berth_in(
        &d,
        &[],
        &[
            "run",
            "--engine",
            "scoped",
            "-e",
            &format!("OTHER={other}"),
            "--",
            "python3",
            "hostile.py",
        ],
    );
    let _ = Command::new("docker").args(["rm", "-f", &other]).output();
    assert_eq!(code, 0, "{out}\n{err}");
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| panic!("{out}\n{err}"));
    let got: serde_json::Value = serde_json::from_str(line).unwrap();
    for refused in [
        "privileged",
        "cap_sys_admin",
        "bind_root",
        "bind_engine_socket",
        "network_host",
        "pid_host",
    ] {
        assert_eq!(got[refused], 403, "{refused}: {got}");
    }
    // Another container is "no such" to the job: it learns nothing of it.
    assert_eq!(got["inspect_other"], 404, "{got}");
    assert_eq!(got["kill_other"], 404, "{got}");
    assert_eq!(
        got["list"],
        serde_json::json!([]),
        "the job lists only its own children"
    );
    // Each refusal is a security-log record naming the endpoint and the field.
    let log = d.config().instance_dir().join("security.log");
    let records = || -> Vec<serde_json::Value> {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .filter(|r: &serde_json::Value| r["kind"] == "engine")
            .collect()
    };
    eventually(
        Duration::from_secs(5),
        "eight records in the security log",
        || records().len() >= 8,
    )
    .await;
    let records = records();
    for field in [
        "HostConfig.Privileged",
        "HostConfig.CapAdd",
        "HostConfig.Binds",
        "HostConfig.NetworkMode",
        "HostConfig.PidMode",
        "container",
    ] {
        let r = records
            .iter()
            .find(|r| r["field"] == field)
            .unwrap_or_else(|| panic!("no record for {field}: {records:?}"));
        assert_eq!(r["blocked"], true);
        assert!(r["endpoint"].as_str().unwrap().contains("/containers/"), "{r}");
    }
    let binds = records
        .iter()
        .filter(|r| r["field"] == "HostConfig.Binds")
        .count();
    assert_eq!(binds, 2, "the bind of / and of the engine's socket: {records:?}");
    assert_eq!(
        records.iter().filter(|r| r["field"] == "container").count(),
        2,
        "inspect and kill"
    );
}

#[tokio::test]
async fn a_killed_daemons_children_are_removed_by_the_watchdog_within_5s() {
    let mut d = Daemon::start();
    let ws = d.dir.path().join("ws");
    project(&ws, &[("engine.py", ENGINE_PY), ("two.py", TWO_CHILDREN_PY)]);
    let (code, out, err) = berth_in(
        &d,
        &[],
        &[
            "run", "-d", "--json", "--engine", "scoped", "--", "python3", "two.py",
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let id = serde_json::from_str::<serde_json::Value>(&out).unwrap()["job"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, _, err) = d.run(&["wait", &id, "--log", "two children up", "--timeout", "60"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(children_of(&d.instance), 2);
    let jobs = d.json(&["ps"]);
    assert_eq!(jobs[0]["children"].as_array().map(Vec::len), Some(2), "{jobs}");

    d.child.kill().unwrap(); // SIGKILL: no teardown runs in the daemon
    d.child.wait().unwrap();
    let killed = std::time::Instant::now();
    eventually(
        Duration::from_secs(5),
        "the watchdog removes both children",
        || children_of(&d.instance) == 0,
    )
    .await;
    eprintln!("children removed {:?} after the kill", killed.elapsed());
    eventually(Duration::from_secs(10), "and the job's container", || {
        containers_of(&d.instance) == 0
    })
    .await;
}

#[tokio::test]
async fn a_scoped_job_is_one_job_of_the_cap_and_its_children_count_against_its_child_limit() {
    let d = Daemon::start_with(&[("BERTH_MAX_JOBS", "1")]);
    let ws = d.dir.path().join("ws");
    project(&ws, &[("engine.py", ENGINE_PY), ("limit.py", LIMIT_PY)]);
    let env = [("BERTH_MAX_CHILDREN", "2"), ("BERTH_MEMORY", "1g")];
    let (code, out, err) = berth_in(
        &d,
        &env,
        &[
            "run", "-d", "--json", "--engine", "scoped", "--", "python3", "limit.py",
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let id = serde_json::from_str::<serde_json::Value>(&out).unwrap()["job"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, _, err) = d.run(&["wait", &id, "--log", "RESULT", "--timeout", "60"]);
    assert_eq!(code, 0, "{err}");
    let logs = d.json(&["logs", &id]);
    let line = logs["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|l| l["text"].as_str().and_then(|t| t.strip_prefix("RESULT ")))
        .unwrap()
        .to_string();
    let got: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(got["one"], 204, "{got}");
    assert_eq!(got["two"], 204, "{got}");
    // The third is over the child limit: refused, saying which limit.
    assert_eq!(got["three"][0], 403, "{got}");
    assert!(
        got["three"][1]["message"]
            .as_str()
            .unwrap()
            .contains("max_children"),
        "{got}"
    );
    // A child asking for more than the job's memory is refused; one asking
    // nothing gets the default, within the job's budget.
    assert_eq!(got["too_much_memory"][0], 403, "{got}");
    assert!(
        got["too_much_memory"][1]["message"]
            .as_str()
            .unwrap()
            .contains("HostConfig.Memory"),
        "{got}"
    );
    assert_eq!(got["memory_of_one"], 512u64 << 20, "{got}");
    // The cap of 1 counts the job once, not its children: it runs, and a
    // second job is refused at the cap, naming the running one.
    let jobs = d.json(&["ps"]);
    assert_eq!(jobs.as_array().unwrap().len(), 1);
    assert_eq!(jobs[0]["children"].as_array().map(Vec::len), Some(2), "{jobs}");
    let (code, _, err) = berth_in(&d, &[], &["run", "-d", "--", "true"]);
    assert_ne!(code, 0);
    assert!(err.contains("limit reached") && err.contains(&id), "{err}");
    let (code, _, err) = d.run(&["kill", &id]);
    assert_eq!(code, 0, "{err}");
    // Killed, its children went with it.
    assert_eq!(children_of(&d.instance), 0);
}
