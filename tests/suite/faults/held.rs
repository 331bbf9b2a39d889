//! A daemon stopped while its store cannot write (a full state disk) loses
//! no line unmarked: `down`, SIGTERM and SIGKILL (the crash watchdog's
//! turn) each leave every seq a reader saw before the stop either stored
//! or inside a lost range, and the job's end says why (`store
//! unavailable`); a clean stop never says its manager died.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use berth::api::client::Client;
use berth::model::{JobId, LogQuery};

use super::full_disk::{read_all, until_degraded};
use super::{Started, Tmpfs, watchdog_of};
use crate::common::Daemon;

/// Endless incompressible lines (101 bytes each).
const PRODUCER: &str = "while :; do head -c 6000000 /dev/urandom | base64 -w 100; done";

#[derive(Debug, Clone, Copy)]
enum Stop {
    Down,
    Term,
    Kill,
}

/// The highest seq a reader sees now.
async fn printed(c: &Client, id: &JobId) -> u64 {
    let page = c
        .logs(
            id,
            &LogQuery {
                tail: Some(1),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    page.lines.last().map_or(0, |l| l.seq)
}

/// The process group of process `pid`.
fn pgid_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split(' ').nth(2).unwrap().parse().unwrap()
}

fn signal(sig: &str, target: &str) {
    let o = Command::new("kill").args([sig, "--", target]).output().unwrap();
    assert!(o.status.success(), "kill {sig} {target}: {o:?}");
}

/// The note of held output in the store's reserve names `id` at `seq` or later.
fn noted(d: &Daemon, id: &str, seq: u64) -> bool {
    let path = d.config().instance_dir().join("berth.db.reserve");
    let bytes = std::fs::read(&path).unwrap_or_default();
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    serde_json::from_slice::<serde_json::Value>(&bytes[..end])
        .ok()
        .and_then(|v| v["jobs"][id].as_u64())
        .is_some_and(|s| s >= seq)
}

async fn stopped_while_degraded(how: Stop) {
    let disk = Tmpfs::mount(48);
    let dir = tempfile::Builder::new().tempdir_in(disk.path()).unwrap();
    let mut d = Daemon::start_in(dir, &[], Stdio::null());
    let c = Client::new(&d.config());
    let job = d.json(&["run", "-d", "--", "sh", "-c", PRODUCER])["job"].clone();
    let id = job["id"].as_str().unwrap().to_string();
    let jid = JobId::from(id.as_str());
    until_degraded(&c, true, Duration::from_secs(60)).await;
    // Lines are held in memory now: wait until some more were printed.
    let at_degraded = printed(&c, &jid).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while printed(&c, &jid).await < at_degraded + 2_000 {
        assert!(
            Instant::now() < deadline,
            "{how:?}: no output held after degrading"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if matches!(how, Stop::Kill) {
        // A frozen producer: what a reader saw last is what the dying
        // manager had, once its writer noted it.
        let pid = d.json(&["status", &id])["pid"].as_u64().unwrap() as u32;
        signal("-STOP", &format!("-{}", pgid_of(pid)));
    }
    let seen = printed(&c, &jid).await;
    match how {
        Stop::Down => assert_eq!(d.run(&["down"]).0, 0),
        Stop::Term => signal("-TERM", &d.pid().to_string()),
        Stop::Kill => {
            let deadline = Instant::now() + Duration::from_secs(30);
            while !noted(&d, &id, seen) {
                assert!(Instant::now() < deadline, "the held output was never noted");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let watchdog = watchdog_of(d.pid()).expect("the daemon's watchdog runs");
            signal("-KILL", &d.pid().to_string());
            d.wait_exit(Duration::from_secs(10)).expect("the daemon died");
            // The watchdog reaps the runs, then exits after its late sweeps.
            let deadline = Instant::now() + Duration::from_secs(120);
            while std::path::Path::new(&format!("/proc/{watchdog}")).exists() {
                assert!(Instant::now() < deadline, "the watchdog never finished");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    d.wait_exit(Duration::from_secs(30)).expect("the daemon stopped");
    // The next daemon, on the same (still full) disk, reads it all back.
    // Its stderr off the full disk: what it says if it does not come up.
    let said = tempfile::NamedTempFile::new().unwrap();
    let _next = Started(
        d.cli()
            .arg("daemon")
            .stderr(said.reopen().unwrap())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !d.answers() {
        assert!(
            Instant::now() < deadline,
            "{how:?}: the next daemon did not come up: {}\n{}",
            std::fs::read_to_string(said.path()).unwrap_or_default(),
            String::from_utf8_lossy(
                &Command::new("du")
                    .arg("-a")
                    .arg(disk.path())
                    .output()
                    .unwrap()
                    .stdout
            )
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (lines, lost, gaps, last) = read_all(&c, &jid).await;
    eprintln!("{how:?}: seen {seen}, last {last}: {lines} read, {lost} lost in {gaps} gap(s)");
    assert!(
        last >= seen,
        "{how:?}: a reader saw seq {seen}, the job now ends at {last}"
    );
    assert_eq!(lines + lost, last, "{how:?}: {lines} read + {lost} lost");
    let status = &d.json(&["status", &id])["status"];
    let reason = status["reason"].as_str().unwrap_or_default();
    if let Stop::Kill = how {
        assert_eq!(status["state"], "lost", "{how:?}: {status}");
        assert!(reason.contains("store unavailable"), "{how:?}: {reason}");
    } else {
        // Stopped by its manager, which did not die; the card says the
        // store could not be written while it ran.
        assert_eq!(
            (&status["state"], reason),
            (&"killed".into(), "shutdown"),
            "{how:?}: {status}"
        );
        let (_, card, _) = d.run(&["status", &id]);
        assert!(card.contains("Store: cannot be written since"), "{how:?}: {card}");
    }
    assert_eq!(d.run(&["down"]).0, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn down_while_degraded_marks_every_held_line() {
    stopped_while_degraded(Stop::Down).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_while_degraded_marks_every_held_line() {
    stopped_while_degraded(Stop::Term).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_while_degraded_leaves_the_watchdog_the_held_lines_to_mark() {
    stopped_while_degraded(Stop::Kill).await;
}

/// A healthy daemon SIGKILLed (its watchdog with it) under fast jobs:
/// lines a reader saw that the store had not committed yet are no longer
/// readable, but are said: the next daemon reads each job to at least the
/// last seq seen, as lines or a lost range. Three rounds, two jobs each
/// (the unstored tail is a few milliseconds of output).
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_daemons_unstored_lines_read_as_lost() {
    let mut d = Daemon::start();
    let c = Client::new(&d.config());
    let mut pid = d.pid();
    let mut current: Option<Started> = None;
    for round in 0..3 {
        let jobs: Vec<JobId> = (0..2)
            .map(|_| {
                JobId::from(
                    d.json(&["run", "-d", "--", "sh", "-c", PRODUCER])["job"]["id"]
                        .as_str()
                        .unwrap(),
                )
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        while printed(&c, &jobs[1]).await < 100_000 {
            assert!(
                Instant::now() < deadline,
                "round {round}: the jobs printed too little"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let watchdog = watchdog_of(pid).expect("the daemon's watchdog runs");
        let mut seen = Vec::new();
        for j in &jobs {
            seen.push(printed(&c, j).await);
        }
        signal("-KILL", &pid.to_string());
        signal("-KILL", &watchdog.to_string());
        match current.take() {
            Some(mut s) => drop(s.0.wait()),
            None => drop(d.wait_exit(Duration::from_secs(10)).expect("the daemon died")),
        }
        let next = Started(d.cli().arg("daemon").stderr(Stdio::null()).spawn().unwrap());
        pid = next.0.id();
        current = Some(next);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !d.answers() {
            assert!(
                Instant::now() < deadline,
                "round {round}: the next daemon did not come up"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for (j, seen) in jobs.iter().zip(seen) {
            let (lines, lost, gaps, last) = read_all(&c, j).await;
            eprintln!(
                "round {round} {j}: seen {seen}, last {last}: {lines} read, {lost} lost in {gaps} gap(s)"
            );
            assert!(
                last >= seen,
                "round {round} {j}: a reader saw seq {seen}, the job now ends at {last}"
            );
            assert_eq!(
                lines + lost,
                last,
                "round {round} {j}: {lines} read + {lost} lost"
            );
        }
    }
    assert_eq!(d.run(&["down"]).0, 0);
}
