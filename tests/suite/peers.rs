//! What users of docker, pueue and process-compose reach for: `logs
//! --timestamps`, through the daemon as a person would type them.

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
