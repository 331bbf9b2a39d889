//! A full state disk is a state, not a crash: the daemon keeps serving and
//! says it is degraded, refuses new jobs with one line, lets jobs end,
//! marks every line it lost, recovers by itself once space returns, and
//! stops within its grace while degraded.

use std::time::{Duration, Instant};

use berth::api::client::Client;
use berth::model::{JobId, LogQuery};

use super::Tmpfs;
use crate::common::Daemon;

/// Prints ~80 MB of incompressible lines (101 bytes each, 800,000 of them).
const FILLER: &str = "head -c 60000000 /dev/urandom | base64 -w 100";

async fn degraded(c: &Client) -> bool {
    c.health().await.is_ok_and(|h| h.status == "degraded")
}

pub(super) async fn until_degraded(c: &Client, yes: bool, within: Duration) {
    let deadline = Instant::now() + within;
    while degraded(c).await != yes {
        assert!(Instant::now() < deadline, "health never said degraded={yes}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every page of `id` from seq 1: (lines, lost lines, gaps, last_seq).
pub(super) async fn read_all(c: &Client, id: &JobId) -> (u64, u64, usize, u64) {
    let (mut lines, mut lost, mut gaps) = (0, 0, 0);
    let mut since = 1;
    loop {
        let page = c
            .logs(
                id,
                &LogQuery {
                    since: Some(since),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert!(page.lines.len() <= 10_000, "a page is at most 10,000 lines");
        assert_eq!(page.first_available_seq, 1, "nothing was cut by the output cap");
        let mut at = since;
        for l in &page.lines {
            // Every seq between two lines is in a gap of this page.
            if l.seq > at {
                assert!(
                    page.lost.iter().any(|g| g.from == at && g.to == l.seq - 1),
                    "seqs {at}..{} skipped without a gap",
                    l.seq
                );
            }
            at = l.seq + 1;
        }
        lines += page.lines.len() as u64;
        lost += page.lost.iter().map(|g| g.lines()).sum::<u64>();
        gaps += page.lost.len();
        if !page.has_more {
            return (lines, lost, gaps, page.last_seq);
        }
        since = page.next_seq;
    }
}

async fn ended(d: &Daemon, id: &str, within: Duration) -> serde_json::Value {
    let deadline = Instant::now() + within;
    loop {
        let v = d.json(&["status", id]);
        if !["queued", "starting", "running"].contains(&v["status"]["state"].as_str().unwrap_or("")) {
            return v;
        }
        assert!(Instant::now() < deadline, "{id} did not end: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn events_of<'a>(events: &'a serde_json::Value, id: &str, kind: &str) -> Vec<&'a serde_json::Value> {
    events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["job"] == id && e["kind"] == kind)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_state_disk_is_a_state_the_daemon_serves_through_and_leaves_within_ten_seconds() {
    let disk = Tmpfs::mount(64);
    // 24 MiB to give back later; the state dir gets the other 40.
    let ballast = disk.ballast(24);
    let dir = tempfile::Builder::new().tempdir_in(disk.path()).unwrap();
    let mut d = Daemon::start_in(dir, &[], std::process::Stdio::null());
    let c = Client::new(&d.config());
    let sleeper = d.json(&["run", "-d", "--", "sleep", "600"])["job"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let filler = d.json(&["run", "-d", "--", "sh", "-c", FILLER])["job"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    until_degraded(&c, true, Duration::from_secs(60)).await;
    let health = c.health().await.unwrap();
    assert!(health.ok, "the daemon answers while degraded");
    let trouble = health.store.expect("health says why");
    assert!(trouble.reason.contains("full"), "{}", trouble.reason);

    // A new job is refused with one line that says why and what to do.
    let (code, _, err) = d.run(&["run", "-d", "--", "true"]);
    assert_eq!(code, 1);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot be written")
            && err.contains("new jobs are refused")
            && err.contains("free space"),
        "{err}"
    );

    // The filler ends (its process is gone, its slot freed), and every line
    // it printed is either read back or inside a gap: none is skipped.
    let info = ended(&d, &filler, Duration::from_secs(60)).await;
    assert_eq!(info["status"]["state"], "exited", "{info}");
    let (lines, lost, gaps, last) = read_all(&c, &JobId::from(filler.as_str())).await;
    assert_eq!(last, 800_000);
    assert_eq!(lines + lost, last, "{lines} read + {lost} lost");
    assert!(
        lost > 0 && gaps > 0,
        "the disk was full: lines were lost ({lost}) and said"
    );
    eprintln!("filler: {lines} lines read, {lost} lost in {gaps} gap(s)");

    // The job under way was told once: the state does not flap while the
    // disk stays full (the filler wrote to it all along). Its card says so.
    let events = d.json(&["events"]);
    assert_eq!(
        events_of(&events, &sleeper, "store_degraded").len(),
        1,
        "{events}"
    );
    assert!(
        events_of(&events, &sleeper, "store_recovered").is_empty(),
        "{events}"
    );
    let (_, card, _) = d.run(&["status", &sleeper]);
    assert!(card.contains("Store: cannot be written since"), "{card}");

    // Space comes back: the store recovers by itself, and new jobs run.
    std::fs::remove_file(&ballast).unwrap();
    until_degraded(&c, false, Duration::from_secs(30)).await;
    let (code, out, err) = d.run(&["run", "--", "echo", "back"]);
    assert_eq!((code, out.as_str()), (0, "back\n"), "{err}");
    let events = d.json(&["events"]);
    assert!(
        !events_of(&events, &sleeper, "store_recovered").is_empty(),
        "{events}"
    );
    let (_, card, _) = d.run(&["status", &sleeper]);
    assert!(card.contains("Store: could not be written from"), "{card}");

    // Full again, and stopped while degraded: within the grace.
    let again = d.json(&["run", "-d", "--", "sh", "-c", FILLER])["job"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    until_degraded(&c, true, Duration::from_secs(60)).await;
    // The card keeps both intervals, the closed one first.
    let (_, card, _) = d.run(&["status", &sleeper]);
    let (closed, open) = (
        card.find("could not be written from"),
        card.find("cannot be written since"),
    );
    assert!(closed.is_some() && closed < open, "{card}");
    ended(&d, &again, Duration::from_secs(60)).await;
    let started = Instant::now();
    let (code, _, err) = d.run(&["down"]);
    assert_eq!(code, 0, "{err}");
    let status = d
        .wait_exit(Duration::from_secs(5))
        .expect("the daemon is gone after down");
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "down took {:?}",
        started.elapsed()
    );
}
