//! What users of docker, pueue and process-compose reach for: `logs
//! --timestamps`, `--env-file`, through the daemon as a person would type
//! them.

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
