//! The cost of `isolation = "gvisor"`, each beside its baselines in the
//! same run, in turns: a container job's start-to-exit of `true` under
//! gVisor and under the engine's default runtime, and `docker run --rm
//! --runtime runsc`; start-to-ready of an httpd with a published port; a
//! job printing 100 MB (1,000,000 lines of 100 bytes) through the daemon.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Daemon, SANDBOX, d_run, interleaved, row, run_timed};

fn job<'a>(isolation: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "--runner",
        "docker",
        "--image",
        SANDBOX,
        "--isolation",
        isolation,
    ];
    args.extend_from_slice(rest);
    args
}

/// Start to ready of an httpd with a port, then a kill (untimed).
fn ready(d: &Daemon, isolation: &str) -> Duration {
    let t = Instant::now();
    let v = d.json(&job(
        isolation,
        &[
            "-d",
            "-p",
            "8080",
            "--ready-http",
            "/",
            "--",
            "httpd",
            "-f",
            "-p",
            "8080",
            "-h",
            "/www",
        ],
    ));
    let took = t.elapsed();
    assert_eq!(v["ready"]["outcome"], "ready", "{v}");
    let id = v["job"]["id"].as_str().unwrap().to_string();
    let _ = d.cli(&["kill", &id, "--grace", "0"]).status();
    took
}

pub fn bench_gvisor(d: &Daemon) {
    let n = 10;
    let (under, plain) = (job("gvisor", &["--", "true"]), job("container", &["--", "true"]));
    let _warm = (d_run(d, &under), d_run(d, &plain));
    let mut g = || d_run(d, &under);
    let mut c = || d_run(d, &plain);
    let mut raw = || {
        let mut cmd = Command::new("docker");
        cmd.args(["run", "--rm", "--runtime", "runsc", SANDBOX, "true"])
            .stdout(Stdio::null());
        run_timed(cmd)
    };
    let [g, c, raw] = interleaved(n, [&mut g, &mut c, &mut raw]);
    row(
        "start-to-exit of `true` under gVisor (p50 / p95 ms)",
        g,
        c,
        "same under runc",
    );
    row(
        "start-to-exit of `true` under gVisor (p50 / p95 ms)",
        g,
        raw,
        "docker run --rm --runtime runsc",
    );

    let mut g = || ready(d, "gvisor");
    let mut c = || ready(d, "container");
    let [g, c] = interleaved(n, [&mut g, &mut c]);
    row(
        "httpd start-to-ready with a port under gVisor (p50 / p95 ms)",
        g,
        c,
        "same under runc",
    );

    let print = "yes 0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789 | head -n 1000000";
    let (under, plain) = (
        job("gvisor", &["--", "sh", "-c", print]),
        job("container", &["--", "sh", "-c", print]),
    );
    let quiet = |args: &[&str]| {
        let mut cmd = d.cli(args);
        cmd.stdout(Stdio::null());
        run_timed(cmd)
    };
    let mut g = || quiet(&under);
    let mut c = || quiet(&plain);
    let [g, c] = interleaved(3, [&mut g, &mut c]);
    row(
        "a 100 MB output job under gVisor, through the daemon (p50 / p95 ms)",
        g,
        c,
        "same under runc",
    );
}
