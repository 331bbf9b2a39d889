//! The token budget of berth's MCP faces: the canonical task and each seed's
//! documented flow, driven through the MCP client under both runners, with
//! the tool calls made and the characters of tool output they cost (every
//! text block of every answer, appended events included). Each test prints
//! its table row and holds the flow to its bound; the manual's MCP chapter
//! (docs/src/mcp.md) quotes the rows (`cargo test --test all token_budget -- --nocapture`).

use std::time::Duration;

use serde_json::{Value, json};

use super::{Mcp, job_in};
use crate::common::{SANDBOX, eventually, try_http_get};

const RUNNERS: [&str; 2] = ["host", "docker"];

/// Calls made and characters answered so far.
fn spent(mcp: &Mcp) -> (usize, usize) {
    let t = mcp.transcript.lock().unwrap();
    (t.len(), t.iter().map(|(_, _, text)| text.chars().count()).sum())
}

/// Print the flow's row and hold it to `calls` calls and `max_chars` characters.
fn row(mcp: &Mcp, flow: &str, runner: &str, calls: usize, max_chars: usize) {
    mcp.print_transcript(&format!("{flow} ({runner})"));
    let (n, chars) = spent(mcp);
    println!("| {flow} | {runner} | {n} | {chars} |");
    assert_eq!(n, calls, "{flow} ({runner}): calls");
    assert!(
        chars <= max_chars,
        "{flow} ({runner}): {chars} characters, over {max_chars}"
    );
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text.split("\nEvents").next().unwrap()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The port of the first `http://127.0.0.1:PORT` in `text`.
fn port_in(text: &str) -> u16 {
    let at = text
        .find("http://127.0.0.1:")
        .unwrap_or_else(|| panic!("no URL: {text}"));
    let digits: String = text[at + 17..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap()
}

/// The agent's own look at the page (not a tool call), once the job logged it.
async fn fetch_and_see_logged(mcp: &Mcp, id: &str, port: u16, logged: &str) {
    eventually(Duration::from_secs(20), "the page", || {
        try_http_get(port).is_some_and(|a| a.contains(" 200 "))
    })
    .await;
    eventually(Duration::from_secs(10), "the request logged", || {
        let (_, out, err) = mcp.cli(&["logs", id]);
        out.contains(logged) || err.contains(logged)
    })
    .await;
}

#[tokio::test]
async fn token_budget_canonical_task() {
    for runner in RUNNERS {
        let mcp = Mcp::start("canonical").await;
        let (command, logged) = match runner {
            "docker" => ("httpd -f -vv -p 8080 -h /www", "response:200"),
            _ => (
                "exec python3 -m http.server $PORT --bind 127.0.0.1",
                "GET / HTTP/1.0",
            ),
        };
        let mut args = json!({"command": command, "runner": runner, "ports": ["8080"],
                              "ready": {"http": "/"}, "background": true});
        if runner == "docker" {
            args["image"] = json!(SANDBOX);
        }
        let a = mcp.ok("run", args).await;
        let id = job_in(&a);
        fetch_and_see_logged(&mcp, &id, port_in(&a), logged).await;
        let k = mcp
            .ok("kill", json!({"id": id, "reason": "checked the page"}))
            .await;
        assert!(k.contains(logged) && k.contains("checked the page"), "{k}");
        row(&mcp, "canonical: run (ready) → kill", runner, 2, 600);
    }
}

#[tokio::test]
async fn token_budget_safe_shell_flow() {
    for runner in RUNNERS {
        let mcp = Mcp::start_with("safe_shell", &[("BERTH_RUNNER", runner)], |_| {}).await;
        let args = match runner {
            "docker" => json!({"command": "python3", "args": ["-m", "http.server", "8000"],
                               "background": true, "ports": ["8000"]}),
            _ => {
                json!({"command": "sh", "args": ["-c", "exec python3 -m http.server $PORT --bind 127.0.0.1"],
                        "background": true, "ports": ["8000"]})
            }
        };
        let v = json_of(&mcp.ok("safe_shell", args).await);
        let id = v["job_id"].as_str().unwrap().to_string();
        let port = port_in(v["ports"]["8000"].as_str().unwrap());
        fetch_and_see_logged(&mcp, &id, port, "GET / HTTP/1.0").await;
        let log = mcp
            .ok("safe_shell", json!({"command": "cat", "args": [v["stderr"]]}))
            .await;
        assert!(log.contains("GET / HTTP/1.0"), "{log}");
        let k = mcp
            .ok(
                "safe_shell",
                json!({"command": "kill", "args": [v["pid"].to_string()]}),
            )
            .await;
        assert!(k.contains("killed by agent"), "{k}");
        row(
            &mcp,
            "safe_shell: background (ports) → cat log → kill pid",
            runner,
            3,
            450,
        );
    }
}

#[tokio::test]
async fn token_budget_shell_flow() {
    for runner in RUNNERS {
        let mcp = Mcp::start_with("shell", &[("BERTH_RUNNER", runner)], |_| {}).await;
        // A foreground build that outlives its budget (the seed's is 60 s).
        let build = "for i in $(seq 1 20); do echo compiling unit $i; done; exec sleep 60";
        let p = mcp.ok("shell_run", json!({"command": build, "timeout": 2})).await;
        assert!(p.contains("auto background"), "{p}");
        let id = job_in(&p);
        let s = mcp.ok("shell_summary", json!({})).await;
        assert!(s.contains(&id), "{s}");
        let l = mcp
            .ok("shell_log", json!({"shell_id": id, "mode": "tail", "limit": 5}))
            .await;
        assert!(l.contains("compiling unit 20"), "{l}");
        let k = mcp
            .ok(
                "shell_kill",
                json!({"shell_id": id, "reason": "build hangs after unit 20"}),
            )
            .await;
        assert!(k.contains("\"killed\""), "{k}");
        row(
            &mcp,
            "shell: shell_run promoted → summary → log tail → kill",
            runner,
            4,
            1900,
        );
    }
}

#[tokio::test]
async fn token_budget_process_flows() {
    for runner in RUNNERS {
        let mcp = Mcp::start_with("process", &[("BERTH_RUNNER", runner)], |ws| {
            std::fs::write(ws.join("Makefile"), "test:\n\t@echo '12 passed'\n").unwrap();
        })
        .await;
        let command = match runner {
            "docker" => "echo Ready on 3000; exec python3 -m http.server 3000",
            _ => "echo Ready on $PORT; exec python3 -m http.server $PORT --bind 127.0.0.1",
        };
        let t = mcp
            .ok("run_background", json!({"command": command, "ports": ["3000"]}))
            .await;
        let id = job_in(&t);
        let w = mcp
            .ok(
                "wait_for_service",
                json!({"port": 3000, "output_regex": "Ready on"}),
            )
            .await;
        assert!(w.contains("is ready"), "{w}");
        fetch_and_see_logged(&mcp, &id, port_in(&t), "GET / HTTP/1.0").await;
        let out = mcp
            .ok("read_process_output", json!({"process_id": id, "lines": 50}))
            .await;
        assert!(out.contains("GET / HTTP/1.0"), "{out}");
        mcp.ok("stop_process", json!({"process_id": id, "reason": "checked"}))
            .await;
        row(
            &mcp,
            "process: run_background → wait_for_service → read output → stop",
            runner,
            4,
            720,
        );

        let before = spent(&mcp);
        let t = mcp.ok("run_test", json!({"background": true})).await;
        let w = mcp
            .ok(
                "wait_for_service",
                json!({"process_id": job_in(&t), "exit": true}),
            )
            .await;
        assert!(w.contains("12 passed") && w.contains("success (exit 0)"), "{w}");
        let (n, chars) = spent(&mcp);
        let (n, chars) = (n - before.0, chars - before.1);
        println!("| process: run_test background → wait_for_service exit | {runner} | {n} | {chars} |");
        assert!(n == 2 && chars <= 400, "{n} calls, {chars} characters");
    }
}

#[tokio::test]
async fn token_budget_exec_flow() {
    for runner in RUNNERS {
        let mcp = Mcp::start_with("exec", &[("BERTH_RUNNER", runner)], |_| {}).await;
        let build = "sleep 0.5; for i in $(seq 1 15); do echo compiling unit $i; done; echo 'error: unit 16 does not compile'; exit 1";
        let spawned = mcp
            .ok(
                "shell",
                json!({"action": "spawn", "command": build, "watch": ["error"]}),
            )
            .await;
        let v = json_of(&spawned);
        let run_id = v["run_id"].as_str().unwrap().to_string();
        // The agent carries on; the run ends meanwhile.
        eventually(Duration::from_secs(20), "the run's end", || {
            mcp.cli(&["status", &run_id]).1.contains("failed")
        })
        .await;
        let p = mcp.ok("shell", json!({"action": "poll", "run_id": run_id})).await;
        // The hit comes with the poll (or, on a slow machine, the spawn answer already).
        assert!(
            (p.contains("watch /error/ matched") || spawned.contains("watch /error/ matched"))
                && p.contains("\"failed\""),
            "{spawned}\n{p}"
        );
        let l = mcp
            .ok(
                "shell",
                json!({"action": "log", "run_id": run_id, "since_seq": 12}),
            )
            .await;
        assert!(l.contains("unit 16 does not compile"), "{l}");
        row(&mcp, "exec: spawn (watch) → poll → log", runner, 3, 1700);
    }
}
