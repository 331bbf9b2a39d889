//! `warm`: a container job that takes a spare (`warm_pool = 1`) against
//! `docker run --rm` and the same job cold, in turns; an httpd started to
//! ready with a port, warm, against testcontainers-rs; and what an idle
//! spare costs in memory. Before each warm run the bench waits until the
//! spare the previous run asked for is ready (outside the timing): a user
//! who starts jobs faster than spares are made gets cold starts, which
//! the row says by counting the warm ones.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Daemon, SANDBOX, d_run, httpd_to_ready, interleaved, row, run_timed, tc};

/// Spares of `d` ready now.
fn spares(d: &Daemon) -> usize {
    let o = Command::new("docker")
        .args([
            "ps",
            "-q",
            "--filter",
            &format!("label=berth.instance={}", d.instance),
        ])
        .args(["--filter", "name=-warm-"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).lines().count()
}

fn spare_ready(d: &Daemon) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while spares(d) == 0 {
        assert!(Instant::now() < deadline, "no spare container was made");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How many of `d`'s jobs took a spare, of how many.
fn warm_count(d: &Daemon) -> (usize, usize) {
    let v = d.json(&["ps", "--all", "--limit", "1000"]);
    let jobs = v.as_array().cloned().unwrap_or_default();
    let warm = jobs.iter().filter(|j| j["limits"]["warm"] == true).count();
    (warm, jobs.len())
}

pub fn bench_warm(cold: &Daemon) {
    let n = 20;
    let warm = Daemon::start_with("bench-warm", &[("BERTH_WARM_POOL", "1")]);
    let args = ["run", "--runner", "docker", "--image", SANDBOX, "--", "true"];
    // One of each first: the pool network, the image in the page cache.
    let _ = d_run(cold, &args);
    let _ = d_run(&warm, &args);
    let mut on_spare = || {
        spare_ready(&warm);
        d_run(&warm, &args)
    };
    let mut berth_cold = || d_run(cold, &args);
    let mut docker = || {
        let mut c = Command::new("docker");
        c.args(["run", "--rm", SANDBOX, "true"]).stdout(Stdio::null());
        run_timed(c)
    };
    let [on_spare, berth_cold, docker] = interleaved(n, [&mut on_spare, &mut berth_cold, &mut docker]);
    let (took, of) = warm_count(&warm);
    let name = format!(
        "container start-to-exit with `warm_pool = 1`, `berth run -- true` ({took} of {of} jobs warm)"
    );
    row(&name, on_spare, docker, "docker run --rm");
    row(
        "same, cold (no pool), same run",
        berth_cold,
        docker,
        "docker run --rm",
    );
    bench_warm_ready(&warm);
    idle_cost(&warm);
}

/// An httpd to ready with a port from a spare, against testcontainers-rs.
fn bench_warm_ready(warm: &Daemon) {
    let n = 20;
    // The shape of these jobs: made by the first.
    let _ = httpd_to_ready(warm);
    let mut on_spare = || {
        spare_ready(warm);
        httpd_to_ready(warm)
    };
    let tc = tc::Peer::new();
    let mut tc_default = || tc.start_and_wait(None);
    let [on_spare, tc_default] = interleaved(n, [&mut on_spare, &mut tc_default]);
    row(
        "httpd start-to-ready with a port, warm (`run -d -p 8080 --ready-http /`)",
        on_spare,
        tc_default,
        "testcontainers-rs GenericImage + WaitFor::http",
    );
}

/// What one idle spare holds: its container's memory (the engine's
/// account) and its runtime shim's resident set.
fn idle_cost(warm: &Daemon) {
    spare_ready(warm);
    let o = Command::new("docker")
        .args([
            "ps",
            "-q",
            "--no-trunc",
            "--filter",
            &format!("label=berth.instance={}", warm.instance),
        ])
        .args(["--filter", "name=-warm-"])
        .output()
        .unwrap();
    let cid = String::from_utf8_lossy(&o.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let o = Command::new("docker")
        .args(["stats", "--no-stream", "--format", "{{.MemUsage}}", &cid])
        .output()
        .unwrap();
    let mem = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let shim = Command::new("pgrep")
        .args(["-f", &format!("containerd-shim.*{}", &cid[..12.min(cid.len())])])
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .and_then(|p| p.trim().parse().ok())
        })
        .map(super::rss_of)
        .unwrap_or(0);
    println!(
        "| an idle spare's memory | container {mem}; shim RSS {} KiB | | | `warm_pool` is off by default |",
        shim
    );
}
