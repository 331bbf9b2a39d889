//! `--tools shell` against its seed (001): `shell_run` with
//! `run_in_background`, events carrying `{call_id, shell_id, start_mode,
//! ended_by, exit_code}`, `shell_summary` tabs (killed shells under FAILED,
//! kept-alive ones their caller stopped under STOPPED), `shell_kill` /
//! `shell_resume` answering `{result, reason, ended_by}`.

use serde_json::{Value, json};

use super::{Mcp, job_in};

/// The seed's metadata object of the first event line about `id` whose kind is `kind`.
fn event_meta(text: &str, id: &str, kind: &str) -> Option<Value> {
    text.lines()
        .filter(|l| l.starts_with("[event #") && l.contains(&format!("] {id} ")) && l.contains(kind))
        .find_map(|l| serde_json::from_str(&l[l.find('{')?..]).ok())
}

#[tokio::test]
async fn the_seed_tools_and_event_metadata() {
    let mcp = Mcp::start_with("shell", &[("BERTH_RUNNER", "host")], |_| {}).await;
    // The agent sets run_in_background=true for anything over 60 s.
    let t = mcp
        .ok(
            "shell_run",
            json!({"command": "sleep 120", "run_in_background": true}),
        )
        .await;
    let id = job_in(&t);
    assert!(t.contains("started in the background"), "{t}");
    let s = mcp.ok("shell_summary", json!({})).await;
    assert!(s.contains("RUNNING (1)") && s.contains(&id), "{s}");
    assert!(
        !s.contains("COMPLETED") && !s.contains("FAILED"),
        "running only by default: {s}"
    );
    let l = mcp.ok("shell_log", json!({"shell_id": id, "mode": "tail"})).await;
    assert!(l.contains(&id) || l.contains("no output"), "{l}");
    // shell_kill returns {result, reason, ended_by}.
    let k = mcp.ok("shell_kill", json!({"shell_id": id})).await;
    let v: Value = serde_json::from_str(k.split("\nEvents").next().unwrap()).unwrap();
    assert_eq!(v["result"], "killed", "{k}");
    assert_eq!(v["ended_by"], "agent", "{k}");
    assert_eq!(v["shell_id"], id.as_str(), "{k}");
    assert!(v["reason"].is_string(), "{k}");
    // Killed shells are shown under FAILED (the seed's red card), with --completed / --failed.
    let s = mcp
        .ok("shell_summary", json!({"completed": true, "failed": true}))
        .await;
    assert!(
        s.contains("RUNNING (0)") && s.contains("COMPLETED (0)") && s.contains("FAILED (1)"),
        "{s}"
    );
    let again = mcp.ok("shell_kill", json!({"shell_id": id})).await;
    assert!(
        again.contains("\"already_finished\"") && again.contains("\"ended_by\":\"agent\""),
        "{again}"
    );

    // A natural failure: its end event says ended_by system, with call_id
    // and exit code. It ends once its answer is back (a gate file, outside
    // the workspace: a writes layer may not show a file added under it
    // later), so the end is news for a later answer.
    let gate = mcp.dir.path().join("go");
    let t = mcp
        .ok(
            "shell_run",
            json!({"command": format!("echo boom; while [ ! -e {} ]; do sleep 0.05; done; exit 3", gate.display()), "run_in_background": true}),
        )
        .await;
    let failing = job_in(&t);
    std::fs::write(&gate, "").unwrap();
    let mut meta = None;
    for _ in 0..200 {
        let s = mcp.ok("shell_summary", json!({"failed": true})).await;
        meta = meta.or_else(|| event_meta(&s, &failing, "ended"));
        if meta.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let meta = meta.expect("an ended event about the failing shell");
    assert_eq!(meta["shell_id"], failing.as_str(), "{meta}");
    assert_eq!(meta["ended_by"], "system", "{meta}");
    assert_eq!(meta["exit_code"], 3, "{meta}");
    assert_eq!(meta["start_mode"], "background", "{meta}");
    assert!(meta["call_id"].as_str().is_some_and(|c| !c.is_empty()), "{meta}");
    // shell_resume returns {result, reason, ended_by}.
    let r = mcp.ok("shell_resume", json!({"shell_id": failing})).await;
    let v: Value = serde_json::from_str(r.split("\nEvents").next().unwrap()).unwrap();
    assert_eq!(v["result"], "resumed", "{r}");
    assert!(v["reason"].is_string() && v.get("ended_by").is_some(), "{r}");
    // `background` stays accepted as the same flag.
    let t = mcp
        .ok("shell_run", json!({"command": "true", "background": true}))
        .await;
    assert!(
        t.contains("started in the background") || t.contains("already ended"),
        "{t}"
    );
}

#[tokio::test]
async fn shell_set_runs_pages_logs_with_cursors_kills_and_resumes() {
    let mcp = Mcp::start_with("shell", &[("BERTH_RUNNER", "host")], |_| {}).await;
    let mut names = mcp.tool_names().await;
    names.sort();
    assert_eq!(
        names,
        [
            "apply",
            "diff",
            "shell_kill",
            "shell_log",
            "shell_resume",
            "shell_run",
            "shell_summary"
        ]
    );
    let t = mcp.ok("shell_run", json!({"command": "seq 1 300"})).await;
    let id = job_in(&t);
    assert!(t.contains("success (exit 0)"), "{t}");
    assert!(
        t.contains("lines 61–240 not shown") && t.contains("`shell_log`"),
        "{t}"
    );
    let p1 = mcp
        .ok(
            "shell_log",
            json!({"shell_id": id, "mode": "body", "cursor": 1, "limit": 100}),
        )
        .await;
    assert!(p1.contains("lines 1–100 of 300 · next_seq 101"), "{p1}");
    assert!(p1.contains("\"cursor\":101"), "{p1}");
    let p2 = mcp
        .ok(
            "shell_log",
            json!({"shell_id": id, "mode": "body", "cursor": 101, "limit": 500}),
        )
        .await;
    assert!(
        p2.contains("lines 101–220 of 300 · next_seq 221"),
        "limit capped at 120: {p2}"
    );
    let d = mcp
        .ok("shell_log", json!({"shell_id": id, "mode": "diagnostic"}))
        .await;
    assert!(
        d.contains("lines 181–300") && d.ends_with("300\n") || d.contains("300\nEarlier"),
        "{d}"
    );
    let s = mcp.ok("shell_summary", json!({"completed": true})).await;
    assert!(
        s.contains("RUNNING (0)") && s.contains("COMPLETED (1)") && s.contains(&id),
        "{s}"
    );
    let k = mcp.ok("shell_kill", json!({"shell_id": id})).await;
    assert!(k.contains("\"already_finished\""), "{k}");
    let r = mcp.ok("shell_resume", json!({"shell_id": id})).await;
    assert!(
        r.contains("\"resumed\"") && r.contains("\"shell_id\":\"job-2\""),
        "{r}"
    );
}

/// A shell held up with `keep_alive` and killed by its caller before its
/// time is not a failure: `shell_summary` lists it under STOPPED (with the
/// completed ones), not under FAILED as `killed (143)`; a plain kill still is.
#[tokio::test]
async fn a_kept_alive_shell_its_caller_killed_is_stopped_not_failed() {
    let mcp = Mcp::start_with("all", &[("BERTH_RUNNER", "host")], |_| {}).await;
    let held = mcp
        .ok(
            "run",
            json!({"command": "exec sleep 120", "background": true, "keep_alive": 60}),
        )
        .await;
    let held = job_in(&held);
    let plain = job_in(
        &mcp.ok(
            "shell_run",
            json!({"command": "exec sleep 120", "run_in_background": true}),
        )
        .await,
    );
    for id in [&held, &plain] {
        mcp.ok("kill", json!({"id": id})).await;
    }
    let s = mcp
        .ok("shell_summary", json!({"completed": true, "failed": true}))
        .await;
    // The tab a row is under: the last `NAME (n)` line above it.
    let tab_of = |id: &str| {
        let mut tab = None;
        for l in s.lines() {
            match l.split_once(" (") {
                Some((name, _)) if !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase()) => {
                    tab = Some(name.to_string());
                }
                _ if l.starts_with(&format!("{id}  ")) => return tab,
                _ => {}
            }
        }
        None
    };
    assert_eq!(tab_of(&held).as_deref(), Some("STOPPED"), "{s}");
    assert_eq!(tab_of(&plain).as_deref(), Some("FAILED"), "{s}");
    assert!(s.contains("STOPPED (1)") && s.contains("FAILED (1)"), "{s}");
    // Asked for failures only, the stopped one is not there.
    let failed = mcp.ok("shell_summary", json!({"failed": true})).await;
    assert!(!failed.contains(&format!("{held}  ")), "{failed}");
}
