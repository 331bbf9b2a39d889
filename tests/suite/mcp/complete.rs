//! Every tool set complete for its seed's flows under both runners: ports
//! on `safe_shell` and the exec `shell` spawn (with `image`), `network`,
//! `pids` and `read_only` on canonical `run` (an agent only tightens the
//! network), `reason` on every set's kill, a wait for the end on the
//! process set (`wait_for_service {exit: true}`), and shells the user
//! killed listed under FAILED as the shell seed puts them.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Mcp, job_in};
use crate::common::{SANDBOX, eventually, try_http_get};

fn json_of(text: &str) -> Value {
    serde_json::from_str(text.split("\nEvents").next().unwrap()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The port of the URL an answer gives for the job's port `port`.
fn url_of(v: &Value, port: &str) -> u16 {
    let url = v["ports"][port]
        .as_str()
        .unwrap_or_else(|| panic!("no URL for {port}: {v}"));
    url.rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .parse()
        .unwrap()
}

async fn serves(port: u16) {
    eventually(Duration::from_secs(20), "the server answers", || {
        try_http_get(port).is_some_and(|a| a.contains(" 200 "))
    })
    .await;
}

#[tokio::test]
async fn run_tightens_the_sandbox_with_network_pids_and_read_only() {
    let mcp = Mcp::start("canonical").await;
    let a = mcp
        .ok(
            "run",
            json!({"command": "touch /x 2>&1; echo rc=$?; ip -o link | grep -vc ' lo:'; exec sleep 30",
                   "runner": "docker", "image": SANDBOX, "network": "none", "pids": 64, "read_only": true,
                   "background": true}),
        )
        .await;
    let id = job_in(&a);
    eventually(Duration::from_secs(10), "the job's output", || {
        mcp.cli(&["logs", &id]).1.contains("rc=")
    })
    .await;
    let status = mcp.ok("status", json!({"id": id})).await;
    assert!(
        status.contains("pids 64") && status.contains("network none"),
        "{status}"
    );
    let logs = mcp.ok("logs", json!({"id": id})).await;
    assert!(
        logs.contains("Read-only file system") && logs.contains("rc=1"),
        "{logs}"
    );
    assert!(logs.contains("\n0\n"), "no interface but lo: {logs}");
    mcp.ok("kill", json!({"id": id, "tail": 0})).await;
    // Looser than the project's network: one line, nothing started.
    let r = mcp
        .call("run", json!({"command": "true", "network": "bridge"}))
        .await;
    assert!(r.is_error, "{}", r.text);
    assert!(
        r.text
            .contains("network `bridge` is looser than this project's `isolated`"),
        "{}",
        r.text
    );
    let r = mcp
        .call("run", json!({"command": "true", "network": "everywhere"}))
        .await;
    assert!(r.is_error && r.text.contains("everywhere"), "{}", r.text);
    let list = mcp.ok("list", json!({"filter": "all"})).await;
    assert!(!list.contains("job-2"), "nothing started: {list}");
}

#[tokio::test]
async fn safe_shell_publishes_ports_under_docker_and_on_the_host() {
    for runner in ["docker", "host"] {
        let mcp = Mcp::start_with("safe_shell", &[("BERTH_RUNNER", runner)], |_| {}).await;
        // The seed's names, plus ports: the server as the seed starts it.
        let args = if runner == "docker" {
            json!({"command": "python3", "args": ["-m", "http.server", "8000"], "background": true, "ports": ["8000"]})
        } else {
            json!({"command": "sh", "args": ["-c", "exec python3 -m http.server $PORT --bind 127.0.0.1"],
                   "background": true, "ports": ["8000"]})
        };
        let v = json_of(&mcp.ok("safe_shell", args).await);
        assert!(v["pid"].is_u64() && v["stdout"].is_string(), "{v}");
        serves(url_of(&v, "8000")).await;
        let k = mcp
            .ok(
                "safe_shell",
                json!({"command": "kill", "args": [v["pid"].to_string()]}),
            )
            .await;
        assert!(k.contains("killed by agent"), "{runner}: {k}");
    }
}

#[tokio::test]
async fn exec_spawns_with_ports_and_an_image_and_kills_with_a_reason() {
    let mcp = Mcp::start_with("exec", &[("BERTH_RUNNER", "docker")], |_| {}).await;
    let v = json_of(
        &mcp.ok(
            "shell",
            json!({"action": "spawn", "command": "httpd -f -p 8080 -h /www", "image": SANDBOX, "ports": ["8080"]}),
        )
        .await,
    );
    serves(url_of(&v, "8080")).await;
    let k = json_of(
        &mcp.ok(
            "shell",
            json!({"action": "kill", "run_id": v["run_id"], "reason": "page checked"}),
        )
        .await,
    );
    assert_eq!(k["result"], "killed", "{k}");
    assert_eq!(k["reason"], "page checked", "{k}");
}

#[tokio::test]
async fn every_kill_keeps_its_reason_and_killed_shells_are_failed() {
    let mcp = Mcp::start_with("all", &[("BERTH_RUNNER", "host")], |_| {}).await;
    let shell = job_in(
        &mcp.ok(
            "shell_run",
            json!({"command": "sleep 60", "run_in_background": true}),
        )
        .await,
    );
    let k = json_of(
        &mcp.ok("shell_kill", json!({"shell_id": shell, "reason": "not needed"}))
            .await,
    );
    assert_eq!(k["reason"], "not needed", "{k}");
    let process = job_in(&mcp.ok("run_background", json!({"command": "sleep 60"})).await);
    let k = json_of(
        &mcp.ok(
            "stop_process",
            json!({"process_id": process, "reason": "done with it"}),
        )
        .await,
    );
    assert_eq!(k["reason"], "done with it", "{k}");
    // A shell the user killed is FAILED, as the seed's panel shows it.
    let by_user = job_in(
        &mcp.ok(
            "shell_run",
            json!({"command": "sleep 60", "run_in_background": true}),
        )
        .await,
    );
    let (code, _, err) = mcp.cli(&["kill", &by_user, "--as", "user"]);
    assert_eq!(code, 0, "{err}");
    let s = mcp
        .ok("shell_summary", json!({"completed": true, "failed": true}))
        .await;
    let failed = s.split("FAILED").nth(1).unwrap_or_default();
    assert!(
        s.contains("COMPLETED (0)") && failed.contains(&format!("{by_user}  killed by user")),
        "{s}"
    );
}

#[tokio::test]
async fn the_process_set_waits_for_a_background_test_run_to_end() {
    let mcp = Mcp::start_with("process", &[("BERTH_RUNNER", "host")], |ws| {
        std::fs::write(
            ws.join("Makefile"),
            "test:\n\t@sleep 0.5; echo '3 passed, 1 failed'; exit 2\n",
        )
        .unwrap();
    })
    .await;
    let id = job_in(&mcp.ok("run_test", json!({"background": true})).await);
    let w = mcp
        .call(
            "wait_for_service",
            json!({"process_id": id, "exit": true, "timeout": 30}),
        )
        .await;
    assert!(!w.is_error, "{}", w.text);
    assert!(
        w.text.contains(&format!("{id} ended: failed (exit 2)")) && w.text.contains("3 passed, 1 failed"),
        "{}",
        w.text
    );
    let bad = mcp
        .call(
            "wait_for_service",
            json!({"process_id": id, "exit": true, "port": 80}),
        )
        .await;
    assert!(bad.is_error && bad.text.contains("`exit: true`"), "{}", bad.text);
}
