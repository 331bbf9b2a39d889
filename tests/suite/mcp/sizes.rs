//! Answers sized for an agent: each bound of the issue measured through the
//! MCP client. A foreground job printing 100k lines promoted by its budget
//! answers with its card once and at most 120 lines (under 16 KiB);
//! `shell_summary` over 500 runs stays under 8 KiB and pages through every
//! one; an exec watch hit carries its snippet once and `poll` names that
//! event instead of repeating it. The host runner: these are about answer
//! size, not containers.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};

use super::{Mcp, job_in};
use crate::common::eventually;

#[tokio::test]
async fn a_promoted_flood_answers_with_one_card_and_at_most_120_lines() {
    let mcp = Mcp::start_with("shell", &[("BERTH_RUNNER", "host")], |_| {}).await;
    // 100k lines of 200 bytes (20 MB), then it keeps running past its budget.
    let flood =
        "awk 'BEGIN { for (i = 1; i <= 100000; i++) printf \"line %06d %0187d\\n\", i, 0 }'; exec sleep 60";
    let a = mcp.ok("shell_run", json!({"command": flood, "timeout": 3})).await;
    let so_far = a.lines().find(|l| l.starts_with("Output so far")).unwrap_or("-");
    println!("promotion answer: {} bytes ({so_far})", a.len());
    assert!(a.contains("auto background (3s budget exceeded)"), "{a}");
    assert!(a.len() < 16 * 1024, "{} bytes:\n{a}", a.len());
    assert_eq!(a.matches("Status:").count(), 1, "the card once:\n{a}");
    assert!(
        !a.contains("Last log"),
        "no card's last log besides the output:\n{a}"
    );
    let shown = a.lines().filter(|l| l.starts_with("line ")).count();
    assert!(shown <= 120 && shown > 0, "{shown} lines shown:\n{a}");
    // What was left out is named, with the call that reads it.
    assert!(a.contains("not shown") && a.contains("`shell_log`"), "{a}");
    let id = job_in(&a);
    mcp.ok("shell_kill", json!({"shell_id": id})).await;
}

#[tokio::test]
async fn shell_summary_and_events_of_500_runs_fit_8_kib_and_page_through_all() {
    let mcp = Mcp::start_with("all", &[("BERTH_RUNNER", "host")], |_| {}).await;
    for i in 1..=500 {
        let command = if i % 10 == 0 { "exit 1" } else { "true" };
        mcp.call("shell_run", json!({"command": command})).await;
    }
    let args = json!({"completed": true, "failed": true});
    let first = mcp.ok("shell_summary", args).await;
    println!("shell_summary of 500 runs: {} bytes", first.len());
    assert!(first.len() < 8 * 1024, "{} bytes:\n{first}", first.len());
    assert!(
        first.contains("COMPLETED (450; ") && first.contains("FAILED (50; "),
        "totals with how many are shown:\n{first}"
    );
    // Follow the `before` each page gives until the last page.
    let mut seen = BTreeSet::new();
    let mut page = first;
    for _ in 0..100 {
        for line in page.lines().filter(|l| l.starts_with("job-")) {
            assert!(seen.insert(job_in(line)), "listed twice: {line}");
        }
        let Some(more) = page
            .lines()
            .find_map(|l| l.strip_prefix("More (older): `shell_summary` "))
        else {
            break;
        };
        let next: Value = serde_json::from_str(more).expect("the next page's arguments");
        page = mcp.ok("shell_summary", next).await;
        assert!(page.len() < 8 * 1024, "{} bytes:\n{page}", page.len());
    }
    assert_eq!(seen.len(), 500, "every run listed once");

    // The events of those runs (a start and an end each), asked for all at once: pages.
    let mut seqs = Vec::new();
    let mut since = 1;
    for _ in 0..100 {
        let page = mcp.ok("events", json!({"since": since, "limit": 1000})).await;
        assert!(page.len() < 8 * 1024 + 100, "{} bytes:\n{page}", page.len());
        let before = seqs.len();
        seqs.extend(page.lines().filter_map(|l| {
            let n: String = l
                .strip_prefix("[event #")?
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            n.parse::<u64>().ok()
        }));
        let Some(next) = page
            .lines()
            .find_map(|l| l.strip_prefix("Next: `events` "))
            .and_then(|v| serde_json::from_str::<Value>(v).ok())
        else {
            break;
        };
        if seqs.len() == before {
            break;
        }
        since = next["since"].as_u64().unwrap();
    }
    println!("events of 500 runs: {} in pages of 8 KiB", seqs.len());
    assert!(seqs.len() >= 1000, "a start and an end per run: {}", seqs.len());
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "each event once, in order"
    );
}

#[tokio::test]
async fn an_exec_watch_hit_carries_its_snippet_once_and_poll_names_it() {
    let mcp = Mcp::start_with("exec", &[("BERTH_RUNNER", "host")], |_| {}).await;
    let t = mcp
        .ok(
            "shell",
            json!({"action": "spawn", "watch": ["hit"],
                   "command": "sleep 1; for i in 1 2 3; do echo hit $i; done; echo all done; exec sleep 30"}),
        )
        .await;
    let v: Value = serde_json::from_str(t.split("\nEvents").next().unwrap()).unwrap();
    let run_id = v["run_id"].as_str().unwrap().to_string();
    eventually(Duration::from_secs(10), "the output", || {
        mcp.cli(&["logs", &run_id]).1.contains("all done")
    })
    .await;
    // The hits come after the spawn answer (it answers at once), all in the poll's.
    assert!(!t.contains("watch /hit/"), "{t}");
    let p = mcp.ok("shell", json!({"action": "poll", "run_id": run_id})).await;
    println!("poll with three watch hits: {} characters", p.chars().count());
    assert_eq!(p.matches("watch /hit/ matched").count(), 3, "{p}");
    assert_eq!(p.matches("  snippet:\n").count(), 1, "the snippet once:\n{p}");
    assert_eq!(
        p.matches("(snippet: see event #").count(),
        2,
        "the others name it:\n{p}"
    );
    assert_eq!(p.matches("all done").count(), 1, "{p}");
    let polled: Value = serde_json::from_str(p.split("\nEvents").next().unwrap()).unwrap();
    let snippet = polled["snippet"].as_str().unwrap();
    assert!(
        snippet.starts_with("see event #") && snippet.ends_with("below"),
        "{p}"
    );
    let n: String = snippet["see event #".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    assert!(
        p.contains(&format!("[event #{n}] {run_id} ")),
        "names an event of this answer:\n{p}"
    );
    assert!(p.chars().count() < 1200, "{p}");
    // Polled again with no new output: the same event, no snippet.
    let again = mcp.ok("shell", json!({"action": "poll", "run_id": run_id})).await;
    assert!(
        again.contains(&format!("\"snippet\":\"see event #{n} (no output since)\"")),
        "{again}"
    );
    assert!(!again.contains("all done"), "{again}");
    mcp.ok("shell", json!({"action": "kill", "run_id": run_id})).await;
}

#[tokio::test]
async fn the_events_an_answer_carries_stay_within_4_kib_and_the_rest_follow() {
    let mcp = Mcp::start_with("canonical", &[("BERTH_RUNNER", "host")], |_| {}).await;
    // 20 long matching lines: 20 watch hits of ~250 characters each, once
    // the run's answer is back (a gate file, outside the workspace: the
    // job's writes layer may not show a file added under it later), so they
    // are news for later answers.
    let gate = mcp.dir.path().join("go");
    let a = mcp
        .ok(
            "run",
            json!({"command": format!("while [ ! -e {} ]; do sleep 0.05; done; for i in $(seq 1 20); do echo \"hit $i $(printf '%0200d' 0)\"; done; exec sleep 30", gate.display()),
                   "watch": ["hit"], "background": true}),
        )
        .await;
    let id = job_in(&a);
    assert!(!a.contains("watch /hit/"), "{a}");
    std::fs::write(&gate, "").unwrap();
    eventually(Duration::from_secs(10), "the hits", || {
        mcp.cli(&["events", "--json"]).1.matches("watch_hit").count() >= 20
    })
    .await;
    let events_of = |text: &str| {
        text.split("Events since your last call:\n")
            .nth(1)
            .unwrap_or("")
            .to_string()
    };
    let first = events_of(&mcp.ok("status", json!({"id": id})).await);
    println!("events appended to one answer: {} bytes", first.len());
    assert!(first.len() < 4 * 1024 + 512, "{} bytes:\n{first}", first.len());
    assert!(
        first.contains("more events follow in your next answers"),
        "{first}"
    );
    let second = events_of(&mcp.ok("status", json!({"id": id})).await);
    let hits = first.matches("watch /hit/ matched").count() + second.matches("watch /hit/ matched").count();
    assert_eq!(hits, 20, "every hit told once:\n{first}\n{second}");
    mcp.ok("kill", json!({"id": id, "tail": 0})).await;
}

#[tokio::test]
async fn safe_shell_cat_of_a_job_log_stays_within_16_kib() {
    let mcp = Mcp::start_with("safe_shell", &[("BERTH_RUNNER", "host")], |_| {}).await;
    // 200 lines of 4,000 bytes to stderr: 800 KB the seed's `cat` would return whole.
    let script = "awk 'BEGIN { for (i = 1; i <= 200; i++) printf \"%04d %03995d\\n\", i, 0 > \"/dev/stderr\" }'; exec sleep 30";
    let t = mcp
        .ok(
            "safe_shell",
            json!({"command": "sh", "args": ["-c", script], "background": true}),
        )
        .await;
    let v: Value = serde_json::from_str(t.split("\nEvents").next().unwrap()).unwrap();
    let id = v["job_id"].as_str().unwrap().to_string();
    eventually(Duration::from_secs(10), "the lines", || {
        mcp.cli(&["logs", &id, "--tail", "1"]).2.contains("0200 ")
    })
    .await;
    let cat = mcp
        .ok("safe_shell", json!({"command": "cat", "args": [v["stderr"]]}))
        .await;
    println!("cat of an 800 KB log: {} bytes", cat.len());
    assert!(cat.len() < 16 * 1024 + 100, "{} bytes", cat.len());
    assert!(
        cat.contains("0200 "),
        "the last lines: {}",
        &cat[cat.len().saturating_sub(200)..]
    );
    mcp.ok(
        "safe_shell",
        json!({"command": "kill", "args": [v["pid"].to_string()]}),
    )
    .await;
}
