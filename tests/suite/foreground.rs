//! One foreground driver: `berth run` through a daemon and `berth run
//! --no-daemon` read the same stream and end the same way, so their answers
//! (the `--json` document, the last line, the exit code) are the same.

use crate::common::{Daemon, berth};

/// The same run through a daemon and in a process of its own: (exit code,
/// stdout, stderr) of each.
fn both(args: &[&str]) -> [(i32, String, String); 2] {
    let d = Daemon::start();
    let through = d.run(args);
    let dir = tempfile::tempdir().unwrap();
    let o = berth(dir.path())
        .arg(args[0])
        .arg("--no-daemon")
        .args(&args[1..])
        .output()
        .unwrap();
    let alone = (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    [through, alone]
}

#[test]
fn a_json_run_answers_the_same_document_with_or_without_a_daemon() {
    let runs = both(&[
        "run",
        "--json",
        "--runner",
        "host",
        "--",
        "sh",
        "-c",
        "seq 1 20000; echo oops >&2; exit 4",
    ]);
    let mut answers = Vec::new();
    for (code, out, err) in &runs {
        assert_eq!(*code, 4, "{err}");
        // Only the document on stdout: the output is in it, not before it.
        let mut v: serde_json::Value =
            serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {}", &out[..out.len().min(200)]));
        assert!(v["stdout"].as_str().unwrap().ends_with("19999\n20000"), "{v}");
        assert_eq!(v["stderr"], "oops");
        assert_eq!(v["truncated"], true);
        // Where each instance keeps its files differs; the rest must not.
        v.as_object_mut().unwrap().remove("log_files");
        answers.push(v);
    }
    assert_eq!(answers[0], answers[1]);
}

#[test]
fn a_run_killed_at_its_budget_says_so_in_the_same_words_with_or_without_a_daemon() {
    let runs = both(&[
        "run",
        "--timeout",
        "1",
        "--on-timeout",
        "kill",
        "--runner",
        "host",
        "--",
        "sh",
        "-c",
        "echo partial; sleep 30",
    ]);
    for (code, out, err) in &runs {
        assert_eq!(*code, 124, "{err}");
        assert_eq!(out, "partial\n");
        assert_eq!(
            err.lines().last(),
            Some("berth: job-1 timed out after 1s and was killed (exit 124)"),
            "{err}"
        );
    }
}
