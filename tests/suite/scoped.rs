//! The scoped engine (`--engine scoped`) against the real engine: a Python
//! project's testcontainers suite passes inside a container job and leaves
//! nothing behind; hostile requests through the job's socket are refused
//! and logged; a SIGKILLed daemon's children go with the watchdog; the cap
//! counts the job once and its children count against its child limit.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use crate::common::{Daemon, TEST_OWNER, eventually};

/// The image the jobs run in (python3, pip, pytest, curl).
const DEV: &str = "berth/dev:latest";

/// Containers of `instance` that are some job's children (any state).
fn children_of(instance: &str) -> usize {
    let o = Command::new("docker")
        .args(["ps", "-aq", "--filter"])
        .arg(format!("label=berth.instance={instance}"))
        .args(["--filter", "label=berth.parent"])
        .output()
        .expect("docker CLI");
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stdout).lines().count()
}

/// Containers of `instance` (any state): jobs', children, holders.
fn containers_of(instance: &str) -> usize {
    crate::common::containers_of(instance)
}

/// A wheelhouse with testcontainers for the dev image's Python, made once
/// per target dir with `pip download` on this machine (the jobs install
/// from it: a container may have no registry access).
fn wheelhouse() -> PathBuf {
    static MADE: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(dir) = made.as_ref() {
        return dir.clone();
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("testcontainers-wheels");
    let ready = dir.join(".complete");
    if !ready.exists() {
        let version = Command::new("docker")
            .args(["run", "--rm", DEV, "python3", "-c"])
            .arg("import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')")
            .output()
            .expect("docker CLI");
        assert!(version.status.success(), "{version:?}");
        let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
        let arch = String::from_utf8_lossy(&Command::new("uname").arg("-m").output().unwrap().stdout)
            .trim()
            .to_string();
        std::fs::create_dir_all(&dir).unwrap();
        let o = Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                "--quiet",
                "testcontainers",
                "--only-binary=:all:",
                "-d",
            ])
            .arg(&dir)
            .args(["--python-version", &version])
            .args(["--platform", &format!("manylinux2014_{arch}")])
            .args(["--platform", &format!("manylinux_2_28_{arch}")])
            .args(["--platform", "any"])
            .output()
            .expect("pip");
        assert!(
            o.status.success(),
            "pip download: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::fs::write(&ready, "").unwrap();
    }
    *made = Some(dir.clone());
    dir
}

/// The project's files in `ws`, owned by the user its jobs run as.
fn project(ws: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        std::fs::write(ws.join(name), text).unwrap();
    }
    chown_tree(ws);
}

fn chown_tree(p: &Path) {
    if !nix::unistd::getuid().is_root() {
        return;
    }
    let _ = std::os::unix::fs::chown(p, Some(TEST_OWNER), Some(TEST_OWNER));
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap().flatten() {
            chown_tree(&e.path());
        }
    }
}

/// A `berth` verb of `d`'s, run in its workspace as a container job's caller.
fn berth_in(d: &Daemon, env: &[(&str, &str)], args: &[&str]) -> (i32, String, String) {
    let mut cmd = d.cli();
    cmd.current_dir(d.dir.path().join("ws"))
        .env("BERTH_RUNNER", "docker")
        .env("BERTH_IMAGE", DEV)
        .env("BERTH_TIMEOUT", "300");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.args(args).output().expect("run berth");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const SUITE: &str = r#"import urllib.request, time

from testcontainers.core.container import DockerContainer


def test_a_page_from_a_container():
    web = DockerContainer("berth/sandbox:latest").with_command("httpd -f -v -p 8080 -h /www").with_exposed_ports(8080)
    with web:
        url = f"http://{web.get_container_host_ip()}:{web.get_exposed_port(8080)}/"
        body = None
        for _ in range(100):
            try:
                body = urllib.request.urlopen(url, timeout=2).read().decode()
                break
            except OSError:
                time.sleep(0.1)
        assert body is not None and "hello from berth" in body


def test_a_container_left_running():
    # Never stopped: with Ryuk off, berth is the reaper when the job ends.
    DockerContainer("berth/sandbox:latest").with_command("sleep 300").with_name("left").start()
"#;

const RUN_SUITE: &str = "set -e\n\
python3 -m pip install --quiet --no-index --find-links wheels --target .deps testcontainers\n\
PYTHONPATH=.deps python3 -m pytest -q -p no:cacheprovider test_web.py\n";

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

const CALLS_PY: &str = r#"import io, json, tarfile, docker
c = docker.from_env()
out = {"api": c.version()["ApiVersion"]}
net = c.networks.create("testnet")
out["networks"] = [n.name for n in c.networks.list()]
box = c.containers.run("berth/sandbox:latest", "sleep 60", detach=True, name="box", network="testnet")
out["exec"] = box.exec_run("echo hi from exec").output.decode()
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as t:
    info = tarfile.TarInfo("f.txt"); info.size = 7; t.addfile(info, io.BytesIO(b"payload"))
out["put"] = box.put_archive("/tmp", buf.getvalue())
bits, stat = box.get_archive("/tmp/f.txt")
out["get"] = stat["size"]
once = c.containers.run("berth/sandbox:latest", ["sh", "-c", "echo attached"], detach=True)
out["wait"] = once.wait()["StatusCode"]
out["attach"] = once.attach(stream=False, logs=True).decode()
out["volume"] = c.volumes.create("data").name
out["names"] = sorted(x.name for x in c.containers.list(all=True))
try:
    c.containers.get("nope")
except docker.errors.NotFound:
    out["nope"] = 404
box.remove(force=True); once.remove(force=True); net.remove()
print("RESULT " + json.dumps(out))
"#;

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

/// A Python helper the jobs use to talk to their engine socket by hand.
const ENGINE_PY: &str = r#"import http.client, json, os, socket, sys

class Unix(http.client.HTTPConnection):
    def __init__(self):
        super().__init__("localhost", timeout=60)
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(os.environ["DOCKER_HOST"][len("unix://"):])

def req(method, path, body=None):
    c = Unix()
    data = None if body is None else json.dumps(body)
    c.request(method, "/v1.41" + path, body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    raw = r.read()
    c.close()
    try:
        return r.status, json.loads(raw)
    except ValueError:
        return r.status, raw.decode(errors="replace")

def child(name, cmd="sleep 300", host=None):
    body = {"Image": "berth/sandbox:latest", "Cmd": ["sh", "-c", cmd], "HostConfig": host or {}}
    status, made = req("POST", "/containers/create?name=" + name, body)
    if status != 201:
        return status, made
    return req("POST", "/containers/%s/start" % made["Id"])
"#;

const HOSTILE_PY: &str = r#"import json, os, sys
from engine import req
other = os.environ["OTHER"]
ws = os.getcwd()
out = {}
base = {"Image": "berth/sandbox:latest", "Cmd": ["true"]}
for name, host in [
    ("privileged", {"Privileged": True}),
    ("cap_sys_admin", {"CapAdd": ["SYS_ADMIN"]}),
    ("bind_root", {"Binds": ["/:/host"]}),
    ("bind_engine_socket", {"Binds": ["/var/run/docker.sock:/var/run/docker.sock"]}),
    ("network_host", {"NetworkMode": "host"}),
    ("pid_host", {"PidMode": "host"}),
]:
    out[name] = req("POST", "/containers/create", dict(base, HostConfig=host))[0]
out["inspect_other"] = req("GET", "/containers/%s/json" % other)[0]
out["kill_other"] = req("POST", "/containers/%s/kill" % other)[0]
out["list"] = [c["Id"] for c in req("GET", "/containers/json?all=1")[1]]
print("RESULT " + json.dumps(out))
"#;

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

const TWO_CHILDREN_PY: &str = r#"import sys, time
from engine import child
for n in ("one", "two"):
    status, answer = child(n)
    assert status == 204, (n, status, answer)
print("two children up", flush=True)
time.sleep(300)
"#;

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

const LIMIT_PY: &str = r#"import json
from engine import child, req
out = {}
out["one"] = child("one")[0]
out["too_much_memory"] = req("POST", "/containers/create", {"Image": "berth/sandbox:latest", "HostConfig": {"Memory": 8 << 30}})
out["two"] = child("two")[0]
out["three"] = child("three")
out["memory_of_one"] = req("GET", "/containers/one/json")[1]["HostConfig"]["Memory"]
print("RESULT " + json.dumps(out), flush=True)
import time
time.sleep(300)
"#;

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
