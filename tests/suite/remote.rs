//! A job on a remote engine, end to end: a second engine that shares
//! nothing with the caller (its own network and mount namespaces, data and
//! exec roots, a TLS-only TCP listener; `scripts/remote-engine.sh`), where
//! the caller's workspace path does not exist. berth with `DOCKER_HOST` and
//! `DOCKER_TLS_VERIFY`/`DOCKER_CERT_PATH` pointing at it uploads the
//! workspace, serves the job's port on the caller's 127.0.0.1, copies files
//! out with `berth cp`, and leaves nothing on that engine after `berth down`
//! or after the manager is SIGKILLed; and the same engine through
//! `ssh://root@host:2222` (an sshd in the engine's network namespace, key
//! auth, its logins reaching the engine with `docker system dial-stdio`).

use std::process::Command;
use std::time::Duration;

use crate::common::{Daemon, SANDBOX, eventually, http_get, unique_sleep};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/remote-engine.sh");

/// The second engine, stopped (everything it made removed) when dropped.
struct RemoteEngine {
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl RemoteEngine {
    fn start() -> RemoteEngine {
        let dir = tempfile::tempdir().unwrap();
        let o = Command::new("bash")
            .args([SCRIPT, "start"])
            .arg(dir.path())
            .output()
            .expect("bash runs the remote engine script");
        assert!(
            o.status.success(),
            "the remote engine did not start: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let env: Vec<(String, String)> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(env.len(), 3, "{env:?}");
        let engine = RemoteEngine { dir, env };
        let o = Command::new("bash")
            .args([SCRIPT, "load"])
            .arg(engine.dir.path())
            .arg(SANDBOX)
            .output()
            .unwrap();
        assert!(o.status.success(), "load: {}", String::from_utf8_lossy(&o.stderr));
        engine
    }

    /// Start an sshd on the engine's host; the environment for an
    /// `ssh://` endpoint (`DOCKER_HOST`, and `PATH` with an `ssh` that
    /// uses the test's key).
    fn ssh(&self) -> Vec<(String, String)> {
        let o = Command::new("bash")
            .args([SCRIPT, "ssh"])
            .arg(self.dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "sshd: {}", String::from_utf8_lossy(&o.stderr));
        let lines: Vec<(String, String)> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let get = |k: &str| {
            lines
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .unwrap()
        };
        let path = format!(
            "{}:{}",
            get("BERTH_TEST_SSH_PATH"),
            std::env::var("PATH").unwrap_or_default()
        );
        vec![("DOCKER_HOST".into(), get("DOCKER_HOST")), ("PATH".into(), path)]
    }

    fn env(&self) -> Vec<(&str, &str)> {
        self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }

    /// `docker` aimed at the remote engine.
    fn docker(&self, args: &[&str]) -> String {
        let o = Command::new("docker")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "docker {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Containers berth made on the remote engine.
    fn berth_containers(&self) -> usize {
        self.docker(&["ps", "-aq", "--filter", "label=berth.managed=true"])
            .lines()
            .count()
    }
}

impl Drop for RemoteEngine {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .args([SCRIPT, "stop"])
            .arg(self.dir.path())
            .status();
    }
}

#[tokio::test]
async fn a_job_on_a_remote_engine_gets_the_workspace_serves_its_port_and_leaves_nothing() {
    let remote = RemoteEngine::start();
    let mut d = Daemon::start_with(&remote.env());
    let ws = d.dir.path().join("ws");
    std::fs::write(ws.join("hello.txt"), "hello from the caller's workspace\n").unwrap();
    std::fs::write(ws.join("secret.txt"), "not for the engine\n").unwrap();
    std::fs::write(ws.join(".dockerignore"), "secret.txt\n").unwrap();

    // The CLI says which engine it would use (its own environment's).
    let o = d.cli().envs(remote.env()).arg("config").output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("remote engine on 10.234."), "{out}");

    // The caller's workspace path does not exist on the engine: what the
    // job reads there was uploaded.
    let script = "mkdir www && cat hello.txt > www/index.html && echo made-by-the-job > out.txt \
                  && (test -e secret.txt && echo SECRET-UPLOADED || echo secret-excluded) \
                  && exec httpd -f -p 8080 -h www";
    let v = d.json(&[
        "run",
        "-d",
        "--runner",
        "docker",
        "--image",
        SANDBOX,
        "-p",
        "8080",
        "--ready-http",
        "/",
        "--timeout",
        "30",
        "--shell",
        "--",
        script,
    ]);
    assert_eq!(v["ready"]["outcome"], "ready", "{v}");
    let id = v["job"]["id"].as_str().unwrap().to_string();
    let port = v["job"]["ports"][0]["host_port"].as_u64().unwrap() as u16;
    assert_eq!(v["job"]["ports"][0]["host_ip"], "127.0.0.1", "{v}");
    let page = http_get(port);
    assert!(page.contains("hello from the caller's workspace"), "{page}");
    let notes = v["job"]["limits"]["not_enforced"].to_string();
    assert!(notes.contains("remote engine"), "{notes}");
    // The card tells the remote truths: a copy (what .dockerignore kept out), the egress.
    let (_, card, _) = d.run(&["status", &id]);
    assert!(
        card.contains("Note: remote engine on") && card.contains("1 kept out by .dockerignore"),
        "{card}"
    );
    assert!(card.contains("Note: egress"), "{card}");

    // A port condition means the server inside accepts, through the relay
    // too: a job whose port nothing listens on is not ready.
    let (code, _, err) = d.run(&["wait", &id, "--port", "8080", "--timeout", "10"]);
    assert_eq!(code, 0, "{err}");
    let quiet = d.json(&[
        "run",
        "-d",
        "--runner",
        "docker",
        "--image",
        SANDBOX,
        "-p",
        "9090",
        "--",
        "sleep",
        &unique_sleep(),
    ]);
    let quiet_id = quiet["job"]["id"].as_str().unwrap().to_string();
    let (code, _, err) = d.run(&["wait", &quiet_id, "--port", "9090", "--timeout", "2"]);
    assert_eq!(code, 1, "nothing listens inside, yet: {err}");
    assert_eq!(d.json(&["kill", &quiet_id])["result"], "killed");

    // Files come home with `berth cp`.
    let dest = d.dir.path().join("fetched.txt");
    let (code, _, err) = d.run(&["cp", &format!("{id}:out.txt"), dest.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read_to_string(&dest).unwrap(), "made-by-the-job\n");
    let (_, out, err) = d.run(&["logs", &id, "--tail", "10"]);
    assert!(out.contains("secret-excluded"), "{out}{err}");

    assert_eq!(d.json(&["kill", &id])["result"], "killed");
    let (code, _, err) = d.run(&["down"]);
    assert_eq!(code, 0, "{err}");
    assert!(d.wait_exit(Duration::from_secs(15)).is_some());
    assert_eq!(
        remote.berth_containers(),
        0,
        "containers left on the remote engine"
    );
    let volumes = remote.docker(&["volume", "ls", "-q"]);
    assert!(volumes.trim().is_empty(), "volumes left: {volumes}");

    // A manager that is SIGKILLed: its watchdog reaches the same engine
    // with the same credentials and removes its container there.
    let mut d = Daemon::start_with(&remote.env());
    let v = d.json(&[
        "run",
        "-d",
        "--runner",
        "docker",
        "--image",
        SANDBOX,
        "--",
        "sleep",
        &unique_sleep(),
    ]);
    assert!(v["job"]["id"].is_string(), "{v}");
    assert_eq!(remote.berth_containers(), 1);
    d.child.kill().unwrap();
    let _ = d.child.wait();
    eventually(
        Duration::from_secs(40),
        "the watchdog cleaned the remote engine",
        || remote.berth_containers() == 0,
    )
    .await;
}

#[tokio::test]
async fn an_ssh_engine_runs_the_same_job() {
    let remote = RemoteEngine::start();
    let ssh = remote.ssh();
    let env: Vec<(&str, &str)> = ssh.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert!(
        env[0].1.starts_with("ssh://root@10.234.") && env[0].1.ends_with(":2222"),
        "{env:?}"
    );
    let mut d = Daemon::start_with(&env);
    let ws = d.dir.path().join("ws");
    std::fs::write(ws.join("index.html"), "served over ssh\n").unwrap();
    let v = d.json(&[
        "run",
        "-d",
        "--runner",
        "docker",
        "--image",
        SANDBOX,
        "-p",
        "8080",
        "--ready-http",
        "/",
        "--timeout",
        "60",
        "--",
        "httpd",
        "-f",
        "-p",
        "8080",
        "-h",
        ".",
    ]);
    assert_eq!(v["ready"]["outcome"], "ready", "{v}");
    let port = v["job"]["ports"][0]["host_port"].as_u64().unwrap() as u16;
    assert!(http_get(port).contains("served over ssh"));
    let id = v["job"]["id"].as_str().unwrap().to_string();
    let dest = d.dir.path().join("copied.html");
    let (code, _, err) = d.run(&["cp", &format!("{id}:index.html"), dest.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read_to_string(&dest).unwrap(), "served over ssh\n");
    let (code, _, err) = d.run(&["down"]);
    assert_eq!(code, 0, "{err}");
    assert!(d.wait_exit(Duration::from_secs(20)).is_some());
    assert_eq!(remote.berth_containers(), 0, "containers left on the engine");
}

/// A `layer` job on a remote engine: what it wrote there comes back into
/// its layer when it ends, so `berth diff` and `berth apply` bring a test
/// report home after the job (and its container) are gone.
#[tokio::test]
async fn a_remote_layer_job_brings_its_report_back_with_apply_after_it_ended() {
    let remote = RemoteEngine::start();
    let d = Daemon::start_with(&remote.env());
    let ws = d.dir.path().join("ws");
    std::fs::write(ws.join("old.txt"), "to be removed\n").unwrap();
    std::fs::write(ws.join("kept.txt"), "kept\n").unwrap();
    let script = "mkdir -p reports && echo '<testsuite tests=\"1\"/>' > reports/junit.xml && rm old.txt";
    let (code, _, err) = d.run(&[
        "run", "--write", "layer", "--runner", "docker", "--image", SANDBOX, "--", "sh", "-c", script,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("changed in layer job-1"), "{err}");
    // Its container goes (in the background); the layer does not need it.
    eventually(Duration::from_secs(15), "the job's container removed", || {
        remote.berth_containers() == 0
    })
    .await;
    d.diff_then_apply(
        "job-1",
        &["A  reports/junit.xml", "D  old.txt"],
        "kept.txt",
        &[("reports/junit.xml", "<testsuite tests=\"1\"/>\n")],
        "old.txt",
    );
    let layers = d.json(&["layers"]);
    assert_eq!(layers[0]["remote"], true, "{layers}");
}
