//! What users of docker, pueue and process-compose reach for: `logs
//! --timestamps`, `--env-file`, `ps --label/--workspace`, through the daemon
//! as a person would type them.

use crate::common::Daemon;

#[test]
fn logs_timestamps_prefix_each_line_with_its_time() {
    let d = Daemon::start();
    let (code, _, err) = d.run(&[
        "run",
        "--runner",
        "host",
        "--",
        "sh",
        "-c",
        "echo one; echo two >&2",
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = d.run(&["logs", "job-1", "--timestamps"]);
    assert_eq!(code, 0, "{err}");
    let stamped = |line: &str, text: &str| {
        let (ts, rest) = line.split_once(' ').unwrap_or_default();
        chrono::DateTime::parse_from_rfc3339(ts).is_ok() && ts.ends_with('Z') && rest == text
    };
    assert!(
        out.lines().count() == 1 && stamped(out.trim_end(), "one"),
        "{out}"
    );
    assert!(err.lines().any(|l| stamped(l, "two")), "{err}");
    // Without the flag, the lines as they were.
    let (_, out, _) = d.run(&["logs", "job-1"]);
    assert_eq!(out, "one\n");
}

#[test]
fn env_file_sets_variables_and_a_bad_line_starts_nothing() {
    let d = Daemon::start();
    let file = d.dir.path().join("app.env");
    std::fs::write(&file, "# settings\nA=from file\nB=file\n").unwrap();
    let f = file.to_str().unwrap();
    let (code, out, err) = d.run(&[
        "run",
        "--runner",
        "host",
        "--env-file",
        f,
        "-e",
        "B=flag",
        "--",
        "sh",
        "-c",
        "echo \"$A/$B\"",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "from file/flag\n", "-e wins over the file");
    std::fs::write(&file, "A=1\nnot a variable\n").unwrap();
    let (code, _, err) = d.run(&["run", "--runner", "host", "--env-file", f, "--", "true"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("app.env:2"), "{err}");
    let jobs = d.json(&["ps", "--all"]);
    assert_eq!(jobs.as_array().map(Vec::len), Some(1), "nothing started: {jobs}");
}

#[test]
fn ps_keeps_the_jobs_of_a_label_or_a_workspace() {
    let d = Daemon::start();
    let other = d.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let run = |dir: &std::path::Path, label: &str| {
        let o = d
            .cli()
            .current_dir(dir)
            .env("BERTH_WORKSPACE", dir)
            .args(["run", "--runner", "host", "--label", label, "--", "true"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let ws = d.dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    run(&ws, "web");
    run(&other, "web");
    run(&ws, "tests");
    let ids = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["ps", "--all"];
        all.extend_from_slice(args);
        let v = d.json(&all);
        v.as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(&["--label", "web"]), ["job-2", "job-1"]);
    assert_eq!(ids(&["--workspace", other.to_str().unwrap()]), ["job-2"]);
    assert_eq!(
        ids(&["--label", "web", "--workspace", ws.to_str().unwrap()]),
        ["job-1"]
    );
    assert_eq!(ids(&["--label", "nothing"]), Vec::<String>::new());
    // No directory: this project's.
    let o = d
        .cli()
        .current_dir(&ws)
        .env("BERTH_WORKSPACE", &ws)
        .args(["ps", "--all", "--json", "--workspace"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let here: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(here, ["job-3", "job-1"]);
    // A page at a time: the filtered list continues with --before.
    assert_eq!(ids(&["--label", "web", "--limit", "1"]), ["job-2"]);
    assert_eq!(
        ids(&["--label", "web", "--limit", "1", "--before", "job-2"]),
        ["job-1"]
    );
}
