//! A session is a pod: the container jobs of one MCP session share one
//! network namespace (`runner/docker/pod/`), so the safe_shell seed's
//! "start a server in the background, then `curl localhost`" works under
//! Docker as on a host shell, and siblings reach each other by label; a job
//! of another session reaches neither that localhost nor the first
//! session's address; two siblings cannot publish one port; and the pods
//! go with their sessions (no pause, no network of the instance left).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};

use super::{Mcp, Reply};
use crate::common::{containers_of, docker_inspect, eventually};

/// Docker jobs from berth/dev (python3, curl).
const DOCKER_DEV: &[(&str, &str)] = &[("BERTH_RUNNER", "docker"), ("BERTH_IMAGE", "berth/dev:latest")];

/// A second `berth mcp` on `dir`'s instance (the first hosts it).
struct Other {
    child: tokio::process::Child,
    client: Option<RunningService<rmcp::RoleClient, ()>>,
}

impl Other {
    async fn open(dir: &Path, instance: &str, tools: &str) -> Other {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_berth"));
        cmd.args(["mcp", "--tools", tools]).current_dir(dir.join("ws"));
        Mcp::apply_env(cmd.as_std_mut(), dir, instance);
        cmd.envs(DOCKER_DEV.iter().copied());
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("other.stderr")).unwrap())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn berth mcp");
        let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let client = ().serve((stdout, stdin)).await.expect("MCP initialize");
        Other {
            child,
            client: Some(client),
        }
    }

    async fn call(&self, tool: &str, args: Value) -> Reply {
        let params = CallToolRequestParams::new(tool.to_string())
            .with_arguments(args.as_object().cloned().expect("arguments are an object"));
        let result = self
            .client
            .as_ref()
            .unwrap()
            .call_tool(params)
            .await
            .expect("tools/call");
        Reply {
            text: result
                .content
                .iter()
                .filter_map(|c| c.as_text().map(|t| t.text.clone()))
                .collect::<Vec<_>>()
                .join("\n"),
            is_error: result.is_error == Some(true),
        }
    }

    async fn close(&mut self) {
        if let Some(c) = self.client.take() {
            let _ = c.cancel().await;
        }
        tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("the second berth mcp exits")
            .unwrap();
    }
}

/// `docker` listing of the instance's objects with `labels` (ids).
fn listed(kind: &[&str], instance: &str, labels: &[&str]) -> Vec<String> {
    let mut cmd = Command::new("docker");
    cmd.args(kind).arg("-q");
    cmd.args(["--filter", &format!("label=berth.instance={instance}")]);
    for l in labels {
        cmd.args(["--filter", &format!("label={l}")]);
    }
    let o = cmd.output().expect("docker CLI");
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn pod_pauses(instance: &str) -> Vec<String> {
    listed(&["ps", "-a"], instance, &["berth.pod"])
}

fn networks(instance: &str) -> Vec<String> {
    listed(&["network", "ls"], instance, &[])
}

/// The address of the pod a running job container of `instance` is in (its
/// pause's), and the pause's `berth.pod` label.
fn pod_address(instance: &str) -> (String, String) {
    let jobs = listed(&["ps"], instance, &["berth.job"]);
    let job = docker_inspect("container", &jobs[0]).expect("the job container");
    let mode = job["HostConfig"]["NetworkMode"].as_str().unwrap().to_string();
    let pause = mode
        .strip_prefix("container:")
        .unwrap_or_else(|| panic!("a pod member joins its pause: {mode}"));
    let h = docker_inspect("container", pause).expect("the pod pause");
    let nets = h["NetworkSettings"]["Networks"].as_object().unwrap();
    assert_eq!(nets.len(), 1, "one endpoint: the pause's");
    let ip = nets.values().next().unwrap()["IPAddress"]
        .as_str()
        .unwrap()
        .to_string();
    let pod = h["Config"]["Labels"]["berth.pod"].as_str().unwrap().to_string();
    (ip, pod)
}

/// Run `args` (a safe_shell call) until it exits 0, within `limit`.
async fn until_ok(mcp: &Mcp, args: Value, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let r = mcp.call("safe_shell", args.clone()).await;
        if !r.is_error && r.text.starts_with("exit code: 0") {
            return r.text;
        }
        assert!(
            Instant::now() < deadline,
            "{args} never succeeded: {}\n{}",
            r.text,
            mcp.stderr()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn safe_shell_serves_on_localhost_to_its_session_and_to_no_other() {
    let mut a = Mcp::start_with("safe_shell", DOCKER_DEV, |_| {}).await;
    // The seed's flow, its own parameter names: a server in the background ...
    let t = a
        .ok(
            "safe_shell",
            json!({"command": "python3", "args": ["-m", "http.server", "8000"], "background": true}),
        )
        .await;
    assert!(t.contains("\"pid\""), "{t}");
    // ... then curl localhost (polled: python takes a moment to listen).
    let page = until_ok(
        &a,
        json!({"command": "curl", "args": ["-s", "localhost:8000"]}),
        Duration::from_secs(30),
    )
    .await;
    assert!(page.contains("Directory listing"), "{page}");
    let (ip, pod) = pod_address(&a.instance);
    assert!(pod.starts_with("mcp:"), "{pod}");
    assert_eq!(pod_pauses(&a.instance).len(), 1);

    // Another session: neither that localhost nor that address.
    let mut b = Other::open(a.dir.path(), &a.instance, "safe_shell").await;
    for args in [
        json!(["-s", "--max-time", "3", "localhost:8000"]),
        json!(["-s", "--max-time", "3", format!("http://{ip}:8000/")]),
        json!([
            "-s",
            "--max-time",
            "3",
            "--noproxy",
            "*",
            format!("http://{ip}:8000/")
        ]),
    ] {
        let r = b
            .call("safe_shell", json!({"command": "curl", "args": args}))
            .await;
        // Through its egress proxy the request is denied (an answer, so
        // curl exits 0); directly it never connects.
        assert!(
            !r.text.contains("Directory listing") && (r.is_error || r.text.contains("egress to")),
            "another session reached the server with curl {args}: {}",
            r.text
        );
    }
    assert_eq!(pod_pauses(&a.instance).len(), 2, "a pod per session");
    // The other session's end takes its pod; the first serves on.
    b.close().await;
    eventually(Duration::from_secs(10), "the ended session's pod is gone", || {
        pod_pauses(&a.instance).len() == 1
    })
    .await;
    let page = until_ok(
        &a,
        json!({"command": "curl", "args": ["-s", "localhost:8000"]}),
        Duration::from_secs(5),
    )
    .await;
    assert!(page.contains("Directory listing"), "{page}");

    // The host session's end: nothing of the instance is left.
    let instance = a.instance.clone();
    a.close().await;
    assert_eq!(containers_of(&instance), 0, "no pause nor job left");
    assert!(
        networks(&instance).is_empty(),
        "no network left: {:?}",
        networks(&instance)
    );
}

#[tokio::test]
async fn siblings_resolve_each_other_by_label_and_cannot_publish_one_port_twice() {
    let a = Mcp::start_with("canonical", DOCKER_DEV, |_| {}).await;
    let web = a
        .ok(
            "run",
            json!({"command": "exec python3 -m http.server 8000", "label": "web", "ports": ["8000"],
                   "background": true, "runner": "docker"}),
        )
        .await;
    assert!(web.contains("http://127.0.0.1:"), "{web}");
    // A sibling by the label (its `NO_PROXY` names the pod's members).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = a
            .call(
                "run",
                json!({"command": "curl -sf web:8000 && getent hosts web", "runner": "docker"}),
            )
            .await;
        if !r.is_error && r.text.contains("Directory listing") {
            assert!(r.text.contains("127.0.0.1"), "{}", r.text);
            break;
        }
        assert!(Instant::now() < deadline, "web:8000 never answered: {}", r.text);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Berth's forwarder relays the published port to the pod.
    let at = web.find("http://127.0.0.1:").unwrap() + "http://127.0.0.1:".len();
    let port: u16 = web[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap();
    assert!(crate::common::http_get(port).contains("Directory listing"));
    // Two siblings cannot listen on one port: said at once, nothing started.
    let r = a
        .call(
            "run",
            json!({"command": "sleep 30", "ports": ["8000"], "background": true, "runner": "docker"}),
        )
        .await;
    assert!(
        r.is_error && r.text.contains("port 8000/tcp is published already by"),
        "{}",
        r.text
    );
    assert_eq!(pod_pauses(&a.instance).len(), 1);
}

#[tokio::test]
async fn a_crashed_hosts_pods_are_swept_by_its_watchdog() {
    let mut a = Mcp::start_with("safe_shell", DOCKER_DEV, |_| {}).await;
    a.ok(
        "safe_shell",
        json!({"command": "sleep", "args": ["300"], "background": true}),
    )
    .await;
    assert_eq!(pod_pauses(&a.instance).len(), 1);
    // SIGKILL: no teardown of its own; its watchdog sweeps by label.
    let pid = a.child.id().expect("running");
    assert!(
        Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    a.child.wait().await.unwrap();
    let instance = a.instance.clone();
    eventually(
        Duration::from_secs(40),
        "no container nor network of the instance left",
        || containers_of(&instance) == 0 && networks(&instance).is_empty(),
    )
    .await;
}
