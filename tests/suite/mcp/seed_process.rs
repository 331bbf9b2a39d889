//! `--tools process` against its seed (003): `run_background` with ports
//! (and runner, image, limits), `wait_for_port(port, timeout)`,
//! `wait_for_service {port, output_regex}`, `read_process_output(id,
//! lines=50)`, `list_processes()` showing active processes, `stop_process`,
//! `run_test` with `background: true`.

use std::time::Duration;

use serde_json::json;

use super::{Mcp, job_in, url_port};
use crate::common::{eventually, http_get};

#[tokio::test]
async fn the_seed_flow_start_wait_peek_list_stop() {
    let mcp = Mcp::start_with("process", &[("BERTH_RUNNER", "host")], |ws| {
        std::fs::write(ws.join("Makefile"), "test:\n\techo tests-ok\n").unwrap();
    })
    .await;
    // An older job that ended: list_processes() must not show it by default.
    let old = mcp.ok("run_background", json!({"command": "true"})).await;
    let old = job_in(&old);
    let t = mcp
        .ok(
            "run_background",
            json!({"command": "sleep 1; echo Ready on $PORT; exec python3 -m http.server $PORT --bind 127.0.0.1",
                   "ports": ["1234"], "runner": "host"}),
        )
        .await;
    let id = job_in(&t);
    let port = url_port(&t);
    // wait_for_service: { port: 1234, output_regex: "Ready on" }, as the seed writes it.
    let w = mcp
        .ok(
            "wait_for_service",
            json!({"port": 1234, "output_regex": "Ready on"}),
        )
        .await;
    assert!(
        w.contains(&id) && w.contains("is ready after") && w.contains("Ready on"),
        "{w}"
    );
    // wait_for_port(port, timeout)
    let w = mcp
        .ok("wait_for_port", json!({"port": port, "timeout": 10}))
        .await;
    assert!(w.contains("accepts connections") && w.contains(&id), "{w}");
    assert!(http_get(port).starts_with("HTTP/1.0 200"));
    eventually(Duration::from_secs(5), "request logged", || {
        mcp.cli(&["logs", &id]).2.contains("GET / HTTP")
    })
    .await;
    // read_process_output(id, lines=50)
    let out = mcp
        .ok("read_process_output", json!({"process_id": id, "lines": 50}))
        .await;
    assert!(out.contains("Ready on") && out.contains("GET / HTTP"), "{out}");
    // list_processes(): active processes.
    let l = mcp.ok("list_processes", json!({})).await;
    assert!(l.contains(&id) && l.contains("running"), "{l}");
    assert!(!l.contains(&format!("{old} ")), "ended ones only on request: {l}");
    let l = mcp.ok("list_processes", json!({"usage": true})).await;
    assert!(l.contains("cpu") && l.contains("mem"), "{l}");
    // stop_process(process_id)
    let k = mcp.ok("stop_process", json!({"process_id": id})).await;
    assert!(k.contains("\"killed\""), "{k}");
    let l = mcp.ok("list_processes", json!({})).await;
    assert!(!l.contains(&format!("{id} ")), "{l}");
    let l = mcp.ok("list_processes", json!({"all": true})).await;
    assert!(l.contains(&id) && l.contains(&old) && l.contains("exit 0"), "{l}");
    // run_test(..., background=true) returns a job id.
    let b = mcp.ok("run_test", json!({"background": true})).await;
    assert!(b.contains("started in the background"), "{b}");
}

#[tokio::test]
async fn process_set_runs_waits_reads_and_stops() {
    let mcp = Mcp::start_with("process", &[("BERTH_RUNNER", "host")], |ws| {
        std::fs::write(ws.join("Makefile"), "test:\n\techo tests-ok\n").unwrap();
    })
    .await;
    let mut names = mcp.tool_names().await;
    names.sort();
    assert_eq!(
        names,
        [
            "apply",
            "diff",
            "list_processes",
            "read_process_output",
            "run_background",
            "run_build",
            "run_test",
            "stop_process",
            "wait_for_port",
            "wait_for_service"
        ]
    );
    let t = mcp
        .ok(
            "run_background",
            json!({"command": "exec python3 -m http.server $PORT --bind 127.0.0.1", "ports": ["8080"]}),
        )
        .await;
    let id = job_in(&t);
    let port = url_port(&t);
    let w = mcp
        .ok(
            "wait_for_service",
            json!({"process_id": id, "port": 8080, "timeout": 30}),
        )
        .await;
    assert!(w.contains("is ready after"), "{w}");
    let w = mcp.ok("wait_for_port", json!({"port": port, "timeout": 5})).await;
    assert!(w.contains("accepts connections"), "{w}");
    assert!(http_get(port).starts_with("HTTP/1.0 200"));
    eventually(Duration::from_secs(5), "request logged", || {
        mcp.cli(&["logs", &id]).2.contains("GET / HTTP")
    })
    .await;
    let out = mcp
        .ok("read_process_output", json!({"process_id": id, "lines": 5}))
        .await;
    assert!(out.contains("GET / HTTP"), "{out}");
    let l = mcp.ok("list_processes", json!({"usage": true})).await;
    assert!(
        l.contains(&id) && l.contains("running") && l.contains("mem"),
        "{l}"
    );
    let k = mcp.ok("stop_process", json!({"process_id": id})).await;
    assert!(k.contains("\"killed\""), "{k}");
    let t = mcp.ok("run_test", json!({"runner": "host"})).await;
    assert!(t.contains("tests-ok") && t.contains("success (exit 0)"), "{t}");
    let b = mcp
        .ok("run_test", json!({"runner": "host", "background": true}))
        .await;
    assert!(
        b.contains("started in the background") && b.contains("read_process_output"),
        "{b}"
    );
}
