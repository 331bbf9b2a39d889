//! A dead daemon's resources are the next daemon's to clean, even when its
//! crash watchdog died with it: containers (jobs and pause containers) and
//! networks labelled with the instance are gone once a new daemon serves.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Started, watchdog_of};
use crate::common::{Daemon, SANDBOX, containers_of};

/// Networks labelled with `instance`.
fn networks_of(instance: &str) -> usize {
    let o = Command::new("docker")
        .args([
            "network",
            "ls",
            "-q",
            "--filter",
            &format!("label=berth.instance={instance}"),
        ])
        .output()
        .expect("docker CLI");
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stdout).lines().count()
}

fn docker_job(d: &Daemon, args: &[&str]) {
    let mut all = vec!["run", "-d", "--runner", "docker", "--image", SANDBOX];
    all.extend_from_slice(args);
    d.json(&all);
}

#[tokio::test(flavor = "multi_thread")]
async fn daemon_and_watchdog_killed_together_ten_times_leave_nothing_behind() {
    let mut d = Daemon::start();
    let instance = d.instance.clone();
    let mut daemon = d.child.id();
    // The daemons after the first one (same instance and state dir).
    let mut current: Option<Started> = None;
    for round in 0..10 {
        // A job with a published port, one that ended (its network gets a
        // pause), and one without ports (it joins the pause) when there is one.
        docker_job(&d, &["-p", "8080", "--", "sleep", "300"]);
        let (code, _, err) = d.run(&["run", "--runner", "docker", "--image", SANDBOX, "--", "true"]);
        assert_eq!(code, 0, "{err}");
        docker_job(&d, &["--", "sleep", "300"]);
        let deadline = Instant::now() + Duration::from_secs(10);
        let watchdog = loop {
            if let Some(w) = watchdog_of(daemon) {
                break w;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: no watchdog for {daemon}"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        // Both at once: nobody is left to clean up.
        let o = Command::new("kill")
            .args(["-KILL", &daemon.to_string(), &watchdog.to_string()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        match current.take() {
            Some(mut s) => s.0.wait().unwrap(),
            None => d.child.wait().unwrap(),
        };
        assert!(
            containers_of(&instance) > 0,
            "round {round}: the dead daemon left containers"
        );
        let next = Started(d.cli().arg("daemon").stderr(Stdio::null()).spawn().unwrap());
        daemon = next.0.id();
        current = Some(next);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !d.answers() {
            assert!(
                Instant::now() < deadline,
                "round {round}: the next daemon did not come up"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Serving means taken over: nothing of the dead one is left.
        assert_eq!(
            containers_of(&instance),
            0,
            "round {round}: containers left after the takeover"
        );
        assert_eq!(
            networks_of(&instance),
            0,
            "round {round}: networks left after the takeover"
        );
    }
    let (code, _, err) = d.run(&["down"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!((containers_of(&instance), networks_of(&instance)), (0, 0));
}
