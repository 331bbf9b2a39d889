//! `--tools exec` against its seed (004): one `shell` tool driven by
//! `action` — spawn (background by default, with `watch` patterns), poll
//! (status running|success|failed, exit code, snippet), log (items *after*
//! `since_seq`, `next_seq` to continue), kill — and the watcher
//! notification carrying a snippet of the output.

use std::time::Duration;

use serde_json::{Value, json};

use super::Mcp;

fn json_of(text: &str) -> Value {
    serde_json::from_str(text.split("\nEvents").next().unwrap()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test]
async fn the_seed_wait_on_conditions_pattern() {
    let mcp = Mcp::start_with("exec", &[("BERTH_RUNNER", "host")], |_| {}).await;
    // 1. spawn with a watch pattern for the expected success message. The
    // success line waits for a gate file the test makes once the spawn's
    // answer is back, so the watch hit is news for a poll (outside the
    // workspace: a writes layer may not show a file added under it later).
    let gate = mcp.dir.path().join("go");
    let t = mcp
        .ok(
            "shell",
            json!({"action": "spawn",
                   "command": format!("for i in 1 2 3; do echo compiling $i; done; while [ ! -e {} ]; do sleep 0.05; done; echo Build finished successfully", gate.display()),
                   "watch": ["Build finished"]}),
        )
        .await;
    let v = json_of(&t);
    let run_id = v["run_id"].as_str().unwrap().to_string();
    std::fs::write(&gate, "").unwrap();
    // 3. poll until the watcher event appears in the backlog.
    let mut note = None;
    let mut last = Value::Null;
    for _ in 0..200 {
        let p = mcp.ok("shell", json!({"action": "poll", "run_id": run_id})).await;
        last = json_of(&p);
        if let Some(at) = p.find("watch /Build finished/") {
            note = Some(p[at..].to_string());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let note = note.unwrap_or_else(|| panic!("no watcher notification; last poll {last}"));
    assert!(
        note.contains("snippet:") && note.contains("compiling 3"),
        "{note}"
    );
    let mut polled = last;
    for _ in 0..200 {
        if polled["status"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        polled = json_of(&mcp.ok("shell", json!({"action": "poll", "run_id": run_id})).await);
    }
    assert_eq!(polled["status"], "success", "{polled}");
    assert_eq!(polled["exit_code"], 0, "{polled}");
    // The snippet, or (once a watch hit carried that output) the event that did.
    let snippet = polled["snippet"].as_str().unwrap();
    assert!(
        snippet.contains("Build finished successfully")
            || (snippet.starts_with("see event #") && note.contains("Build finished successfully")),
        "{polled}"
    );
    // 4. log: since_seq is exclusive, next_seq continues.
    let page = json_of(
        &mcp.ok(
            "shell",
            json!({"action": "log", "run_id": run_id, "since_seq": 0, "limit": 2}),
        )
        .await,
    );
    let texts: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["compiling 1", "compiling 2"], "{page}");
    assert_eq!(page["next_seq"], 2);
    let page = json_of(
        &mcp.ok(
            "shell",
            json!({"action": "log", "run_id": run_id, "since_seq": 2}),
        )
        .await,
    );
    assert_eq!(page["items"][0]["seq"], 3, "{page}");
    assert_eq!(page["items"][0]["text"], "compiling 3", "{page}");
    assert_eq!(page["next_seq"], 5, "the run ended: its end is item 5: {page}");
    // Output and events are one seq-ordered stream of items.
    let all = json_of(&mcp.ok("shell", json!({"action": "log", "run_id": run_id})).await);
    let items = all["items"].as_array().unwrap();
    let kinds: Vec<String> = items
        .iter()
        .map(|i| {
            format!(
                "{}:{}",
                i["seq"],
                i["event"].as_str().unwrap_or(i["text"].as_str().unwrap_or(""))
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "1:compiling 1",
            "2:compiling 2",
            "3:compiling 3",
            "4:Build finished successfully",
            "4:watch_hit",
            "5:ended"
        ],
        "{all}"
    );
    assert_eq!(items[5]["status"], "success");
    assert_eq!(all["next_seq"], 5);
    let rest = json_of(
        &mcp.ok(
            "shell",
            json!({"action": "log", "run_id": run_id, "since_seq": 5}),
        )
        .await,
    );
    assert_eq!(rest["items"], json!([]), "{rest}");
    // kill terminates a running process; poll says failed afterwards.
    let s = json_of(
        &mcp.ok("shell", json!({"action": "spawn", "command": "sleep 60"}))
            .await,
    );
    let k = mcp
        .ok("shell", json!({"action": "kill", "run_id": s["run_id"]}))
        .await;
    assert!(k.contains("\"killed\""), "{k}");
    // No action: legacy synchronous execution.
    let sync = mcp.ok("shell", json!({"command": "echo legacy"})).await;
    assert!(sync.contains("legacy") && sync.contains("exit 0"), "{sync}");
}

#[tokio::test]
async fn exec_set_spawns_polls_pages_with_next_seq_and_kills() {
    let mcp = Mcp::start_with("exec", &[("BERTH_RUNNER", "host")], |_| {}).await;
    assert_eq!(mcp.tool_names().await, vec!["apply", "diff", "shell"]);
    let t = mcp
        .ok(
            "shell",
            json!({"action": "spawn", "command": "for i in 1 2 3; do echo line$i; done; exec sleep 30",
                   "watch": ["line3"]}),
        )
        .await;
    let v: Value = serde_json::from_str(t.split("\nEvents").next().unwrap()).unwrap();
    let run_id = v["run_id"].as_str().unwrap().to_string();
    assert_eq!(v["status"], "running");
    // The output reaches the agent once: in the poll's snippet, or in the
    // watch hit's (in the spawn answer or a poll's), which later polls name.
    let mut polled = String::new();
    let mut told = t.clone();
    for _ in 0..200 {
        polled = mcp.ok("shell", json!({"action": "poll", "run_id": run_id})).await;
        told += &polled;
        if told.contains("line3") && polled.contains("\"snippet\":\"") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        polled.contains("\"status\":\"running\"") && told.contains("line3"),
        "{polled}"
    );
    let log = mcp
        .ok(
            "shell",
            json!({"action": "log", "run_id": run_id, "since_seq": 0, "limit": 2}),
        )
        .await;
    let v: Value = serde_json::from_str(log.split("\nEvents").next().unwrap()).unwrap();
    assert_eq!(v["items"].as_array().unwrap().len(), 2);
    assert_eq!(v["items"][1]["text"], "line2");
    assert_eq!(v["next_seq"], 2);
    let log = mcp
        .ok(
            "shell",
            json!({"action": "log", "run_id": run_id, "since_seq": 2}),
        )
        .await;
    let v: Value = serde_json::from_str(log.split("\nEvents").next().unwrap()).unwrap();
    assert_eq!(v["items"][0]["text"], "line3");
    assert_eq!(v["next_seq"], 3);
    let k = mcp.ok("shell", json!({"action": "kill", "run_id": run_id})).await;
    assert!(k.contains("\"killed\""), "{k}");
    let sync = mcp.ok("shell", json!({"command": "echo sync-run"})).await;
    assert!(
        sync.contains("sync-run") && sync.contains("success (exit 0)"),
        "{sync}"
    );
}
