//! `--tools safe_shell` against its seed (000): the schema's names and types,
//! the three modes of the output table, and the documented agent workflow
//! (background → read the log file with `cat` → `kill <pid>`) under the
//! Docker runner.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Mcp;
use crate::common::{eventually, job_containers_of};

/// The JSON part of an answer (before the appended events).
fn json_of(text: &str) -> Value {
    serde_json::from_str(text.split("\nEvents").next().unwrap()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test]
async fn the_seed_schema_and_its_documented_background_flow_under_docker() {
    let mcp = Mcp::start_with("safe_shell", &[("BERTH_RUNNER", "docker")], |ws| {
        use std::os::unix::fs::PermissionsExt;
        let server = ws.join("server");
        std::fs::write(
            &server,
            "#!/bin/sh\necho server listening\necho server warming up >&2\nexec sleep 300\n",
        )
        .unwrap();
        std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o755)).unwrap();
    })
    .await;
    // The schema as the seed writes it.
    let tools = mcp.client().list_all_tools().await.unwrap();
    let safe_shell = tools
        .iter()
        .find(|t| t.name == "safe_shell")
        .expect("the safe_shell tool");
    let schema = serde_json::to_value(&safe_shell.input_schema).unwrap();
    let props = &schema["properties"];
    assert_eq!(props["command"]["type"], "string");
    assert_eq!(props["args"]["type"], "array");
    assert_eq!(props["input"]["type"], json!(["string", "null"]));
    assert_eq!(props["background"]["type"], "boolean");
    let keep_alive = props["keep_alive"]["type"].to_string();
    assert!(
        keep_alive.contains("integer") && !keep_alive.contains("number"),
        "{keep_alive}"
    );
    assert_eq!(schema["required"], json!(["command"]));

    // 1. safe_shell(command="./server", background=true) -> PID and log paths.
    let t = mcp
        .ok("safe_shell", json!({"command": "./server", "background": true}))
        .await;
    let v = json_of(&t);
    let pid = v["pid"]
        .as_u64()
        .unwrap_or_else(|| panic!("pid is a number: {t}"));
    let stderr_log = v["stderr"].as_str().unwrap().to_string();
    assert!(v["stdout"].as_str().unwrap().ends_with(".log"), "{t}");
    assert_eq!(job_containers_of(&mcp.instance), 1);
    // 3. safe_shell(command="cat", args=["/tmp/..._stderr.log"]) — the log as it grows.
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !seen.contains("server warming up") && Instant::now() < deadline {
        seen = mcp
            .ok("safe_shell", json!({"command": "cat", "args": [stderr_log]}))
            .await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        seen.starts_with("exit code: 0") && seen.contains("server warming up"),
        "{seen}"
    );
    assert!(!seen.contains("server listening"), "stderr only: {seen}");
    // 4. safe_shell(command="kill", args=["<pid>"]).
    let k = mcp
        .ok(
            "safe_shell",
            json!({"command": "kill", "args": [pid.to_string()]}),
        )
        .await;
    assert!(
        k.starts_with("exit code: 0") && k.contains("killed by agent"),
        "{k}"
    );
    eventually(Duration::from_secs(15), "the container is gone", || {
        job_containers_of(&mcp.instance) == 0
    })
    .await;

    // Interactive: run, feed input, wait keep_alive seconds, then kill; merged output.
    let t = mcp
        .ok(
            "safe_shell",
            json!({"command": "sh", "args": ["-c", "read x; echo got $x; echo to-err >&2; exec sleep 30"],
                   "input": "hi\n", "keep_alive": 1}),
        )
        .await;
    assert!(
        t.contains("got hi") && t.contains("to-err") && t.contains("keep_alive"),
        "{t}"
    );
    // Batch: keep_alive 0 waits until exit.
    let t = mcp
        .ok(
            "safe_shell",
            json!({"command": "echo", "args": ["batch", "done"], "keep_alive": 0}),
        )
        .await;
    assert!(t.starts_with("exit code: 0") && t.contains("batch done"), "{t}");
}

#[tokio::test]
async fn safe_shell_blocks_keeps_alive_and_backgrounds_with_log_files() {
    let mcp = Mcp::start_with("safe_shell", &[("BERTH_RUNNER", "host")], |_| {}).await;
    assert_eq!(mcp.tool_names().await, vec!["apply", "diff", "safe_shell"]);
    let r = mcp
        .call(
            "safe_shell",
            json!({"command": "sh", "args": ["-c", "echo out; echo err >&2; exit 2"]}),
        )
        .await;
    assert!(r.is_error && r.text.starts_with("exit code: 2"), "{}", r.text);
    assert!(r.text.contains("out\n") && r.text.contains("err\n"), "{}", r.text);
    // Answered when keep_alive expires (it says so), not at the end of
    // the 30 s sleep.
    let t = mcp
        .ok(
            "safe_shell",
            json!({"command": "sh", "args": ["-c", "read x; echo got $x; exec sleep 30"], "input": "hi\n", "keep_alive": 1}),
        )
        .await;
    assert!(t.contains("got hi") && t.contains("keep_alive expired"), "{t}");
    let t = mcp
        .ok(
            "safe_shell",
            json!({"command": "sh", "args": ["-c", "echo bg-out; echo bg-err >&2; exec sleep 30"], "background": true}),
        )
        .await;
    let v: Value = serde_json::from_str(t.split("\nEvents").next().unwrap()).expect("JSON answer");
    let pid = v["pid"].as_u64().expect("pid");
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    assert!(v["job_id"].as_str().unwrap().starts_with("job-"));
    let (out, err) = (v["stdout"].as_str().unwrap(), v["stderr"].as_str().unwrap());
    eventually(Duration::from_secs(5), "log files written", || {
        std::fs::read_to_string(out)
            .unwrap_or_default()
            .contains("bg-out")
            && std::fs::read_to_string(err)
                .unwrap_or_default()
                .contains("bg-err")
    })
    .await;
    let t = mcp
        .ok(
            "safe_shell",
            json!({"command": "kill", "args": [pid.to_string()]}),
        )
        .await;
    assert!(t.starts_with("exit code: 0"), "{t}");
}
