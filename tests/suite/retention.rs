//! What berth keeps: a per-job output cap that bounds the state directory
//! however much a job prints (and says where the kept output starts), and a
//! history that can be pruned by policy, by age, or entirely.

use std::path::Path;
use std::time::Duration;

use crate::common::{Daemon, eventually};

/// Bytes under `dir`, recursively.
fn disk_usage(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() {
            disk_usage(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

fn ended(d: &Daemon, id: &str) -> bool {
    d.json(&["status", id])["status"]["state"] != "running"
}

#[tokio::test]
async fn a_gigabyte_job_under_a_64_mib_cap_leaves_under_100_mib_and_says_what_was_dropped() {
    let d = Daemon::start_with(&[("BERTH_MAX_OUTPUT", "64m")]);
    // 1 GiB of 100-byte lines (about 10.7 million).
    let line = "0123456789".repeat(10);
    let (code, id, err) = d.run(&[
        "run",
        "-d",
        "-q",
        "--runner",
        "host",
        "--",
        "sh",
        "-c",
        &format!("yes {} | head -c 1073741824", &line[..99]),
    ]);
    assert_eq!(code, 0, "{err}");
    let id = id.trim().to_string();
    eventually(Duration::from_secs(600), "the 1 GiB job ended", || ended(&d, &id)).await;
    let status = d.json(&["status", &id]);
    assert_eq!(status["status"]["state"], "exited", "{status}");
    let state = d.dir.path().join("state");
    let used = disk_usage(&state);
    assert!(used < 100 << 20, "state dir holds {} MiB", used >> 20);

    // Reading from the start says where the kept output begins, and serves it.
    let page = d.json(&["logs", &id, "--since", "1", "--limit", "3"]);
    let cut = page["truncated_before"].as_u64().expect("truncated_before");
    assert!(cut > 1, "{page}");
    assert_eq!(page["first_available_seq"].as_u64(), Some(cut));
    assert_eq!(page["lines"][0]["seq"].as_u64(), Some(cut), "{page}");
    assert_eq!(page["lines"][0]["text"], &line[..99]);
    // The end is all there: 1 GiB / 100 bytes per line, the last one partial.
    let last = status["last_seq"].as_u64().unwrap();
    assert_eq!(last, 1_073_741_824u64.div_ceil(100));
    let tail = d.json(&["logs", &id, "--tail", "1"]);
    assert_eq!(tail["lines"][0]["seq"].as_u64(), Some(last));
    // What was kept is under the cap, and nothing in it is missing.
    let kept = last - cut + 1;
    assert!(kept * 100 < 64 << 20, "kept {kept} lines");
    // The text face says the same. The store may still be dropping old
    // lines after the job ended (the cap is kept by the writer as it
    // catches up), so the start it names is this one or a later one.
    let (code, _, err) = d.run(&["logs", &id, "--since", "1", "--limit", "1"]);
    assert_eq!(code, 0);
    let said = err
        .split("dropped by the output cap (max_output); showing from ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no cut named: {err}"));
    assert!((cut..=last).contains(&said), "cut {cut}, said {said}: {err}");

    // Pruning everything forgets the run, its lines and its files, and gives the space back.
    let out = d.json(&["prune", "--all"]);
    assert_eq!(out["pruned"], serde_json::json!([id]));
    assert_eq!(d.json(&["ps", "--all"]), serde_json::json!([]));
    assert!(!state.join(&d.instance).join("jobs").join(&id).exists());
    let (code, _, err) = d.run(&["logs", &id]);
    assert_ne!(code, 0);
    assert!(err.contains(&id), "{err}");
    let after = disk_usage(&state);
    assert!(
        after < 16 << 20,
        "after prune the state dir holds {} MiB",
        after >> 20
    );
}

#[tokio::test]
async fn prune_follows_the_history_policy_and_never_touches_running_jobs() {
    let d = Daemon::start_with(&[("BERTH_KEEP_RUNS", "2")]);
    let mut ids = Vec::new();
    for i in 0..4 {
        let (code, id, err) = d.run(&[
            "run",
            "-d",
            "-q",
            "--runner",
            "host",
            "--",
            "echo",
            &i.to_string(),
        ]);
        assert_eq!(code, 0, "{err}");
        ids.push(id.trim().to_string());
    }
    for id in &ids {
        eventually(Duration::from_secs(10), "quick job ended", || ended(&d, id)).await;
    }
    let (code, running, err) = d.run(&["run", "-d", "-q", "--runner", "host", "--", "sleep", "30"]);
    assert_eq!(code, 0, "{err}");
    let running = running.trim().to_string();

    // Newest first, paged.
    let page = d.json(&["ps", "--all", "--limit", "2"]);
    let page_ids: Vec<&str> = page
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(page_ids, [running.as_str(), ids[3].as_str()]);
    let next = d.json(&["ps", "--all", "--limit", "2", "--before", &ids[3]]);
    assert_eq!(next[0]["id"], ids[2].as_str());

    // The policy keeps the newest two finished runs; a running job is never pruned.
    let out = d.json(&["prune"]);
    assert_eq!(out["pruned"], serde_json::json!([ids[1], ids[0]]));
    assert_eq!(out["kept"], 2);
    let left: Vec<String> = d
        .json(&["ps", "--all"])
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(left, [running.clone(), ids[3].clone(), ids[2].clone()]);
    let out = d.json(&["prune", "--older-than", "1d"]);
    assert_eq!(out["pruned"], serde_json::json!([]), "nothing is a day old");
    let (code, _, err) = d.run(&["prune", "--older-than", "3w"]);
    assert_eq!(code, 2, "bad age is a usage error: {err}");
    assert!(err.contains("unknown unit"), "{err}");
    d.run(&["kill", &running]);
}

#[tokio::test]
async fn history_stays_readable_after_the_daemon_is_down() {
    let mut d = Daemon::start();
    let (code, id, err) = d.run(&["run", "-d", "-q", "--runner", "host", "--", "seq", "1", "30"]);
    assert_eq!(code, 0, "{err}");
    let id = id.trim().to_string();
    eventually(Duration::from_secs(10), "job ended", || ended(&d, &id)).await;
    assert_eq!(d.run(&["down"]).0, 0);
    assert!(d.wait_exit(Duration::from_secs(10)).is_some());

    // No daemon: ps, logs and events read the store, and say so.
    let (code, out, err) = d.run(&["ps", "--all", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("reading its store"), "{err}");
    let jobs: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(jobs[0]["id"], id.as_str());
    assert_eq!(jobs[0]["status"]["state"], "exited");
    let (code, out, err) = d.run(&["logs", &id, "--since", "11", "--limit", "5", "--json"]);
    assert_eq!(code, 0, "{err}");
    let page: serde_json::Value = serde_json::from_str(&out).unwrap();
    let texts: Vec<&str> = page["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["11", "12", "13", "14", "15"]);
    assert_eq!(page["next_seq"], 16);
    assert_eq!(page["has_more"], true);
    let (code, out, _) = d.run(&["logs", &id, "--tail", "1"]);
    assert_eq!((code, out.as_str()), (0, "30\n"));
    let (code, out, _) = d.run(&["events", "--json"]);
    assert_eq!(code, 0);
    assert!(out.contains("\"ended\""), "{out}");
    // What needs a daemon says so, and an unknown id is an error.
    let (code, _, err) = d.run(&["logs", &id, "--follow"]);
    assert_ne!(code, 0);
    assert!(err.contains("no berth daemon") || err.contains("daemon"), "{err}");
    let (code, _, err) = d.run(&["logs", "job-99"]);
    assert_ne!(code, 0);
    assert!(err.contains("job-99"), "{err}");
}
