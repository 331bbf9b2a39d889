//! `warm_pool`: the daemon keeps a started spare container per job shape,
//! and the next job of that shape takes it. What a user checks: the warm
//! job's output, environment, directory, exit code and stop are a cold
//! job's; its record says it was warm; the spares go with the daemon,
//! after a crash too; a pool size out of bounds is refused in one line.

use std::process::Command;
use std::time::Duration;

use crate::common::{Daemon, containers_of, eventually};

const WARM: &[(&str, &str)] = &[("BERTH_RUNNER", "docker"), ("BERTH_WARM_POOL", "1")];

/// Spare containers of `instance` running now, by name (a container's
/// name holds its instance's: a spare is found even without its labels).
fn spares(instance: &str) -> usize {
    let o = Command::new("docker")
        .args([
            "ps",
            "--format",
            "{{.Names}}",
            "--filter",
            &format!("name=-{instance}-"),
        ])
        .output()
        .expect("docker CLI");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|n| n.contains("-warm-"))
        .count()
}

/// `berth ARGS` as a docker job with the pool on; (exit code, stdout).
fn berth(d: &Daemon, args: &[&str]) -> (i32, String) {
    let o = d
        .cli()
        .envs(WARM.iter().copied())
        .args(args)
        .output()
        .expect("run berth");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("error"), "berth {args:?}: {err}");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

fn card(d: &Daemon, id: &str) -> serde_json::Value {
    d.json(&["status", id])
}

/// The same command, asked twice: cold, then into the spare the first made.
#[tokio::test]
async fn a_warm_job_is_a_cold_one_to_its_caller_and_its_spare_goes_with_the_daemon() {
    let d = Daemon::start_with(WARM);
    // Quotes, `$`, a newline: what a script through `sh` could get wrong.
    let run = [
        "run",
        "-e",
        "GREETING=it's $HOME\n`x`",
        "--",
        "sh",
        "-c",
        "printf '%s|%s|%s|%s\\n' \"$HOSTNAME\" \"$PWD\" \"$GREETING\" \"$(cat /etc/hostname)\"; exit 3",
    ];
    let (cold_code, cold_out) = berth(&d, &run);
    assert_eq!(card(&d, "job-1")["limits"]["warm"], serde_json::Value::Null);
    eventually(Duration::from_secs(30), "a spare container", || {
        spares(&d.instance) == 1
    })
    .await;

    let (warm_code, warm_out) = berth(&d, &run);
    assert_eq!(
        card(&d, "job-2")["limits"]["warm"],
        true,
        "the second job took the spare"
    );
    let says_warm = |id: &str| d.run(&["status", id]).1.contains(" · warm start");
    assert!(
        says_warm("job-2") && !says_warm("job-1"),
        "the card says which was warm"
    );
    assert_eq!(warm_code, cold_code);
    assert_eq!(warm_code, 3);
    assert_eq!(warm_out, cold_out.replace("job-1", "job-2"), "cold: {cold_out}");
    assert!(warm_out.starts_with("job-2|"), "{warm_out}");

    // A stop is a cold job's: TERM through the init, and who asked.
    eventually(Duration::from_secs(30), "the next spare", || {
        spares(&d.instance) == 1
    })
    .await;
    let (code, _) = berth(&d, &["run", "-d", "-q", "--", "sleep", "300"]);
    assert_eq!(code, 0);
    let running = card(&d, "job-3");
    assert_eq!(running["limits"]["warm"], true);
    let k = d.json(&["kill", "job-3"]);
    assert_eq!(k["result"], "killed", "{k}");
    assert_eq!(
        (&k["status"]["signal"], &k["ended_by"]),
        (&15.into(), &"agent".into()),
        "{k}"
    );
    assert_eq!(card(&d, "job-3")["status"]["state"], "killed");

    // A ready spare does not hold the daemon's teardown past its promise
    // (grace, 2 s here, and a second: `sigterm_tears_everything_down…`).
    eventually(Duration::from_secs(30), "the next spare", || {
        spares(&d.instance) == 1
    })
    .await;
    let asked = std::time::Instant::now();
    assert_eq!(d.run(&["down"]).0, 0);
    assert!(asked.elapsed() < Duration::from_secs(3), "{:?}", asked.elapsed());
    assert_eq!(
        containers_of(&d.instance),
        0,
        "nothing of the instance outlives its daemon"
    );
}

#[tokio::test]
async fn a_killed_daemons_spares_are_swept() {
    let mut d = Daemon::start_with(WARM);
    assert_eq!(berth(&d, &["run", "--", "true"]).0, 0);
    eventually(Duration::from_secs(30), "a spare container", || {
        spares(&d.instance) == 1
    })
    .await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(d.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the daemon");
    d.wait_exit(Duration::from_secs(10));
    // Its watchdog sweeps what the dead daemon left: by label, and nothing
    // of the instance's by name either (a spare missing a label would leak).
    eventually(Duration::from_secs(30), "the spare swept", || {
        containers_of(&d.instance) == 0
    })
    .await;
    let o = Command::new("docker")
        .args(["ps", "-aq", "--filter", &format!("name=-{}-", d.instance)])
        .output()
        .expect("docker CLI");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "",
        "a container of the instance is left"
    );
}

#[test]
fn a_pool_size_out_of_bounds_is_refused_in_one_line() {
    let d = Daemon::start();
    let o = d
        .cli()
        .env("BERTH_WARM_POOL", "9")
        .arg("config")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("warm_pool") && err.contains("at most 8"), "{err}");
}
