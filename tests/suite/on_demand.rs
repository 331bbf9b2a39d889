//! `berth run` with no daemon starts one on demand: parallel runs (CI steps)
//! share it, one cap and one store, and it goes after `daemon_idle` with
//! nothing to do; `--no-daemon` is the in-process escape hatch.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::{berth, processes_with};

#[test]
fn parallel_runs_with_no_daemon_share_one_started_on_demand_and_it_goes_when_idle() {
    let dir = tempfile::tempdir().unwrap();
    let instance = berth(dir.path())
        .get_envs()
        .find(|(k, _)| *k == "BERTH_INSTANCE")
        .and_then(|(_, v)| v)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    // About a second each, findable by its command line.
    let token = format!("1.{}7", std::process::id());
    let script = format!("sleep {token}; echo ok");
    let (stop, peak) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let sampler = {
        let (stop, peak, token) = (stop.clone(), peak.clone(), token.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                peak.fetch_max(processes_with(&token).len(), Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    // All four at once, as parallel CI steps.
    let children: Vec<_> = (0..4)
        .map(|_| {
            berth(dir.path())
                .env("BERTH_INSTANCE", &instance)
                .args(["run", "--", "sh", "-c", &script])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let runs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    stop.store(true, Ordering::SeqCst);
    sampler.join().unwrap();
    for o in &runs {
        let (out, err) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        assert_eq!((o.status.code(), out.as_ref()), (Some(0), "ok\n"), "{err}");
    }
    assert!(
        peak.load(Ordering::SeqCst) <= 3,
        "{} ran at once with a cap of 3",
        peak.load(Ordering::SeqCst)
    );
    assert!(peak.load(Ordering::SeqCst) >= 1, "the sampler saw no run");
    let log = std::fs::read_to_string(dir.path().join(&instance).join("daemon.log")).unwrap_or_default();
    assert_eq!(
        log.matches("berth daemon: serving").count(),
        1,
        "one daemon served them all:\n{log}"
    );
    // Idle (BERTH_DAEMON_IDLE=2 in the tests' environment): it goes.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !log_says(dir.path(), &instance, "no job and no session") {
        assert!(Instant::now() < deadline, "the daemon did not go when idle");
        std::thread::sleep(Duration::from_millis(100));
    }
    let ps = berth(dir.path())
        .env("BERTH_INSTANCE", &instance)
        .arg("ps")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&ps.stderr).contains("reading its store"),
        "a daemon still answers"
    );
}

fn log_says(state: &std::path::Path, instance: &str, what: &str) -> bool {
    std::fs::read_to_string(state.join(instance).join("daemon.log")).is_ok_and(|l| l.contains(what))
}
