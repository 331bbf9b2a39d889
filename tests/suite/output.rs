//! Output through the library API: every line exactly once, in order, with
//! contiguous seq, while the in-memory ring stays within its bound.

use std::time::Duration;

use berth::{JobSpec, LogQuery, RunnerChoice, Stream};
use pretty_assertions::assert_eq;

use crate::common::manager_with;

/// Page through `id`'s output from seq 1, `limit` lines a page, handing each
/// page to `check`; returns how many pages it took.
fn page_all(
    manager: &berth::Manager,
    id: &berth::JobId,
    limit: usize,
    mut check: impl FnMut(&berth::LogPage),
) -> usize {
    let (mut since, mut pages) = (1, 0);
    loop {
        let query = LogQuery {
            since: Some(since),
            limit: Some(limit),
            ..Default::default()
        };
        let page = manager.logs(id, &query).unwrap();
        check(&page);
        pages += 1;
        since = page.next_seq;
        if !page.has_more {
            return pages;
        }
    }
}

#[tokio::test]
async fn two_hundred_thousand_lines_read_back_exactly_once() {
    const N: u64 = 200_000;
    const RING: usize = 256 * 1024;
    let t = manager_with(|c| c.with_ring_bytes(RING));
    let job = t
        .manager
        .start(JobSpec::argv(["seq", "1", &N.to_string()]).with_runner(RunnerChoice::Host))
        .await
        .unwrap();
    let info = tokio::time::timeout(Duration::from_secs(60), job.wait_end())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(info.exit_code, Some(0));
    assert_eq!(info.last_seq, N);
    let output = t.manager.logs(&job.id, &LogQuery::default()).unwrap();
    assert_eq!(output.last_seq, N);

    let mut expected = 1u64;
    let pages = page_all(&t.manager, &job.id, 7_777, |page| {
        for line in &page.lines {
            assert_eq!(line.seq, expected);
            assert_eq!(line.text, expected.to_string());
            assert_eq!(line.stream, Stream::Stdout);
            expected += 1;
        }
    });
    assert_eq!(expected, N + 1, "every line read exactly once");
    assert!(pages > 20);
    // Tail reads the newest lines; a tail reaching past the ring is filled from the spill.
    let tail = t
        .manager
        .logs(
            &job.id,
            &LogQuery {
                tail: Some(3),
                ..Default::default()
            },
        )
        .unwrap();
    let texts: Vec<_> = tail.lines.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(texts, vec!["199998", "199999", "200000"]);
    let big_tail = t
        .manager
        .logs(
            &job.id,
            &LogQuery {
                tail: Some(100_000),
                ..Default::default()
            },
        )
        .unwrap();
    // A tail is at most one page: the newest 10,000 lines.
    assert_eq!(big_tail.lines.len(), berth::output::PAGE_LINES);
    assert_eq!(big_tail.lines[0].seq, 200_001 - berth::output::PAGE_LINES as u64);
    let ring = t.manager.ring_bytes(&job.id).unwrap();
    assert!(ring <= RING, "ring holds {ring} bytes, bound {RING}");
}

#[tokio::test]
async fn printf_without_final_newline_yields_three_lines() {
    let t = manager_with(|c| c);
    let job = t
        .manager
        .start(JobSpec::argv(["printf", r"a\nb\nc"]).with_runner(RunnerChoice::Host))
        .await
        .unwrap();
    job.wait_end().await.unwrap();
    let page = job.logs(&LogQuery::default()).unwrap();
    let got: Vec<(u64, &str)> = page.lines.iter().map(|l| (l.seq, l.text.as_str())).collect();
    assert_eq!(got, vec![(1, "a"), (2, "b"), (3, "c")]);
    assert!(!page.has_more);
    assert_eq!(page.next_seq, 4);
}

#[tokio::test]
async fn raw_log_files_hold_each_stream_and_a_snippet_shows_the_end() {
    let t = manager_with(|c| c);
    let job = t
        .manager
        .start(JobSpec::shell("echo one; echo two >&2; printf three").with_runner(RunnerChoice::Host))
        .await
        .unwrap();
    let info = job.wait_end().await.unwrap();
    assert_eq!(std::fs::read_to_string(&info.logs.stdout).unwrap(), "one\nthree");
    assert_eq!(std::fs::read_to_string(&info.logs.stderr).unwrap(), "two\n");
    let snippet = t.manager.snippet(&job.id).unwrap();
    // Seq (and so the snippet) follows arrival order across the two pipes.
    let mut lines: Vec<&str> = snippet.lines().collect();
    lines.sort();
    assert_eq!(lines, vec!["one", "three", "two"]);
    let stderr_only = job
        .logs(&LogQuery {
            stream: Some(Stream::Stderr),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(stderr_only.lines.len(), 1);
    assert_eq!(stderr_only.lines[0].text, "two");
}

/// A gigabyte of output (10.7 million numbered 100-byte lines) paged from
/// seq 1 through the store's blocks: every line comes back exactly once, in
/// order, and the finished job holds no ring.
#[tokio::test]
async fn a_gigabyte_job_pages_back_from_seq_one_exactly_once() {
    const N: u64 = 10_737_418; // 1 GiB / 100 bytes
    let t = manager_with(|c| c.with_max_output_bytes(4 << 30));
    let script = format!(r#"BEGIN {{ for (i = 1; i <= {N}; i++) printf "%099d\n", i }}"#);
    let job = t
        .manager
        .start(JobSpec::argv(["awk", &script]).with_runner(RunnerChoice::Host))
        .await
        .unwrap();
    let info = tokio::time::timeout(Duration::from_secs(900), job.wait_end())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((info.exit_code, info.last_seq), (Some(0), N));
    assert_eq!(
        t.manager.ring_bytes(&job.id).unwrap(),
        0,
        "a finished job keeps no ring"
    );

    let mut expected = 1u64;
    page_all(&t.manager, &job.id, 50_000, |page| {
        assert_eq!(page.truncated_before, None);
        for line in &page.lines {
            assert_eq!(line.seq, expected);
            assert_eq!(line.text.len(), 99);
            assert_eq!(line.text.parse::<u64>().ok(), Some(expected), "line {expected}");
            expected += 1;
        }
    });
    assert_eq!(expected, N + 1, "every line read exactly once");
}

/// Bytes that are not UTF-8 (64 KiB of pseudo-random bytes, ending in a
/// newline: berth's lines end there) come out of `berth run` through the
/// daemon's frames and out of `berth logs --raw` exactly as the job printed
/// them; a text face shows such a byte as `\xNN`, never U+FFFD.
#[test]
fn any_bytes_come_back_exact_through_run_and_logs_raw() {
    let d = crate::common::Daemon::start();
    let ws = d.dir.path().join("ws");
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut blob: Vec<u8> = (0..65_535)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    blob.push(b'\n');
    assert!(std::str::from_utf8(&blob).is_err());
    std::fs::write(ws.join("blob"), &blob).unwrap();
    let run = d
        .cli()
        .current_dir(&ws)
        .args(["run", "--", "cat", "blob"])
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        run.stdout == blob,
        "berth run printed {} bytes for {}; stderr: {}",
        run.stdout.len(),
        blob.len(),
        String::from_utf8_lossy(&run.stderr)
    );
    // Runs side by side (more than the cap: some wait, some are read back
    // from the store rather than the ring): each exact too.
    let runs: Vec<_> = (0..6)
        .map(|_| {
            let mut cmd = d.cli();
            cmd.current_dir(&ws).args(["run", "--", "cat", "blob"]);
            std::thread::spawn(move || cmd.output().unwrap())
        })
        .collect();
    for r in runs {
        let o = r.join().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            o.stdout == blob,
            "a run side by side printed {} bytes",
            o.stdout.len()
        );
    }
    let id = d
        .json(&["ps", "--all"])
        .as_array()
        .unwrap()
        .iter()
        .last()
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let raw = d.cli().args(["logs", "--raw", &id]).output().unwrap();
    assert!(
        raw.stdout == blob,
        "logs --raw printed {} bytes for {}",
        raw.stdout.len(),
        blob.len()
    );
    // A text face escapes the bytes it cannot show.
    let json = d.json(&["logs", &id, "--tail", "5"]);
    let text = json.to_string();
    assert!(!text.contains('\u{fffd}'), "{text}");
}
