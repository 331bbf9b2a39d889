//! berth's benchmarks, each beside a baseline measured in the same run, so a
//! figure is a ratio and not a number from another day or machine. These are
//! measurements, not tests: nothing here fails on a slow machine.
//!
//! Run: `bash bench/run.sh [NAME…]` (builds the release binary and images
//! first), or `cargo bench --bench berth -- [NAME…]` with names from
//! `start`, `network`, `ready`, `detect`, `spawn`, `ingest`, `memory`, `ps`, `output`,
//! `finished`, `layers`, `gvisor`, `sweep` (default: all), and `swarm` (only when named: it builds a three-node swarm in
//! namespaces, root). Ingest size: `BERTH_BENCH_BYTES` (default 1 GiB);
//! the output rows and their peers are in `berth/peers.rs`.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "berth/calls.rs"]
mod calls;
#[path = "berth/gvisor.rs"]
mod gvisor;
#[path = "berth/layers.rs"]
mod layers;
#[path = "berth/peers.rs"]
mod peers;
#[path = "berth/relay.rs"]
mod relay;
#[path = "berth/swarm.rs"]
mod swarm;
#[path = "berth/sweep.rs"]
mod sweep;
#[path = "berth/tc.rs"]
mod tc;
#[path = "berth/warm.rs"]
mod warm;

/// The image of the container rows: the one the `docker run` baselines use.
const SANDBOX: &str = "berth/sandbox:latest";

fn berth_bin() -> PathBuf {
    // Built by cargo for this bench, in the same profile (release under `cargo bench`).
    PathBuf::from(env!("CARGO_BIN_EXE_berth"))
}

/// A daemon of its own for the benchmarks.
struct Daemon {
    dir: tempfile::TempDir,
    instance: String,
    child: std::process::Child,
    /// The berth binary of this daemon and its clients.
    bin: PathBuf,
    /// Extra environment of the daemon and its clients: a job's settings
    /// come from its caller's `BERTH_*` variables, not the daemon's.
    env: Vec<(String, String)>,
}

impl Daemon {
    fn start() -> Daemon {
        Self::start_with("bench", &[])
    }

    /// A daemon of instance `bench-<name>-<pid>` with extra environment.
    fn start_with(name: &str, env: &[(&str, &str)]) -> Daemon {
        Self::start_bin(name, env, berth_bin())
    }

    /// As [`start_with`](Self::start_with), with another build of berth
    /// (`BERTH_BENCH_BEFORE`: the "before" rows).
    fn start_bin(name: &str, env: &[(&str, &str)], bin: PathBuf) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let instance = format!("{name}-{}", std::process::id());
        let mut cmd = Command::new(&bin);
        cmd.arg("daemon")
            .env("BERTH_STATE_DIR", dir.path())
            .env("BERTH_WORKSPACE", dir.path())
            .env("BERTH_INSTANCE", &instance)
            .env("BERTH_MAX_JOBS", "50")
            .envs(env.iter().copied())
            .stderr(Stdio::null());
        let mut d = Daemon {
            child: cmd.spawn().unwrap(),
            dir,
            instance,
            bin,
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        while !d.cli(&["ps"]).status().map(|s| s.success()).unwrap_or(false) {
            assert!(Instant::now() < deadline, "daemon did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        d.child.try_wait().unwrap();
        d
    }

    fn cli(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(args)
            .env("BERTH_STATE_DIR", self.dir.path())
            .env("BERTH_WORKSPACE", self.dir.path())
            .env("BERTH_INSTANCE", &self.instance)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut args = args.to_vec();
        args.insert(1, "--json");
        let o = self
            .cli(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        // What went wrong, when the answer is not JSON.
        serde_json::from_slice(&o.stdout).unwrap_or_else(
            |_| serde_json::json!({"stderr": String::from_utf8_lossy(&o.stderr), "exit": o.status.code()}),
        )
    }

    fn rss_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.cli(&["down"]).status();
        let _ = self.child.wait();
    }
}

/// VmRSS of `pid` in KiB.
fn rss_of(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Median and p95 of `n` timings of `f`, in ms.
fn time(n: usize, mut f: impl FnMut() -> Duration) -> (f64, f64) {
    let mut v: Vec<f64> = (0..n).map(|_| f().as_secs_f64() * 1000.0).collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (percentile(&v, 0.5), percentile(&v, 0.95))
}

fn row(what: &str, berth: (f64, f64), base: (f64, f64), base_name: &str) {
    println!(
        "| {what} | {:.1} / {:.1} | {base_name}: {:.1} / {:.1} | {:.2}× | {:+.1} ms |",
        berth.0,
        berth.1,
        base.0,
        base.1,
        berth.0 / base.0,
        berth.0 - base.0
    );
}

fn run_timed(mut c: Command) -> Duration {
    let t = Instant::now();
    let s = c.status().unwrap();
    assert!(s.success(), "{c:?} failed");
    t.elapsed()
}

/// Median and p95 (ms) of each of `runs`, taken in turns (one of each per
/// round) so a machine that gets busier or quieter weighs on all alike.
fn interleaved<const N: usize>(n: usize, mut runs: [&mut dyn FnMut() -> Duration; N]) -> [(f64, f64); N] {
    let mut taken: [Vec<f64>; N] = std::array::from_fn(|_| Vec::with_capacity(n));
    for _ in 0..n {
        for (run, v) in runs.iter_mut().zip(taken.iter_mut()) {
            v.push(run().as_secs_f64() * 1000.0);
        }
    }
    taken.map(|mut v| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        (percentile(&v, 0.5), percentile(&v, 0.95))
    })
}

/// A container job's start-to-exit through the daemon (client start
/// included) against `docker run --rm` of the same image, in turns; with
/// `BERTH_BENCH_BEFORE=<berth binary>` also the same through that build.
fn bench_start(d: &Daemon) {
    let n = 20;
    let args = ["run", "--runner", "docker", "--image", SANDBOX, "--", "true"];
    let before = std::env::var_os("BERTH_BENCH_BEFORE")
        .map(|bin| Daemon::start_bin("bench-before", &[], PathBuf::from(bin)));
    // Like for like with `docker run`: the engine's default bridge.
    let bridge = Daemon::start_with("bench-bridge", &[("BERTH_NETWORK", "bridge")]);
    // One of each first: the pool network, the image in the page cache.
    let _warm = d_run(d, &args);
    let _warm = d_run(&bridge, &args);
    if let Some(b) = &before {
        let _warm = d_run(b, &args);
    }
    let mut berth = || d_run(d, &args);
    let mut docker = || {
        let mut c = Command::new("docker");
        c.args(["run", "--rm", SANDBOX, "true"]).stdout(Stdio::null());
        run_timed(c)
    };
    let mut on_bridge = || d_run(&bridge, &args);
    let row_name = "container start-to-exit, `berth run --runner docker -- true` (p50 / p95 ms)";
    let bridge_name = "same with `network = \"bridge\"` (the engine's default bridge, as `docker run`)";
    match &before {
        Some(b) => {
            let mut old = || d_run(b, &args);
            let [berth, docker, on_bridge, old] =
                interleaved(n, [&mut berth, &mut docker, &mut on_bridge, &mut old]);
            row(row_name, berth, docker, "docker run --rm");
            row(bridge_name, on_bridge, docker, "docker run --rm");
            row(
                "same, the `BERTH_BENCH_BEFORE` build (p50 / p95 ms)",
                old,
                docker,
                "docker run --rm",
            );
        }
        None => {
            let [berth, docker, on_bridge] = interleaved(n, [&mut berth, &mut docker, &mut on_bridge]);
            row(row_name, berth, docker, "docker run --rm");
            row(bridge_name, on_bridge, docker, "docker run --rm");
        }
    }
}

/// The cost of the job network: a container job's start-to-exit on the
/// default `isolated` network when its pool network is reused, and when it
/// must be made first (the instance's idle networks removed before each
/// run, untimed), against `network = "bridge"` (the engine's default bridge,
/// a second daemon) in the same run.
fn bench_network(d: &Daemon) {
    let n = 20;
    let bridge_daemon = Daemon::start_with("bench-bridge", &[("BERTH_NETWORK", "bridge")]);
    let args = ["run", "--runner", "docker", "--image", SANDBOX, "--", "true"];
    let _warm = d_run(d, &args);
    let reused = time(n, || d_run(d, &args));
    let fresh = time(n, || {
        let ls = Command::new("docker")
            .args(["network", "ls", "-q", "--filter"])
            .arg(format!("label=berth.instance={}", d.instance))
            .output()
            .unwrap();
        for id in String::from_utf8_lossy(&ls.stdout).split_whitespace() {
            let _ = Command::new("docker")
                .args(["network", "rm", id])
                .stdout(Stdio::null())
                .status();
        }
        d_run(d, &args)
    });
    let _warm = d_run(&bridge_daemon, &args);
    let bridge = time(n, || d_run(&bridge_daemon, &args));
    row(
        "container start-to-exit, isolated, pool network reused (p50 / p95 ms)",
        reused,
        bridge,
        "network = bridge",
    );
    row(
        "container start-to-exit, isolated, network made first (p50 / p95 ms)",
        fresh,
        bridge,
        "network = bridge",
    );
}

fn d_run(d: &Daemon, args: &[&str]) -> Duration {
    run_timed(d.cli(args))
}

fn bench_spawn(d: &Daemon) {
    let n = 50;
    let berth = time(n, || d_run(d, &["run", "--runner", "host", "--", "true"]));
    let raw = time(n, || run_timed(Command::new("true")));
    row(
        "host spawn `true` through the daemon (p50 / p95 ms)",
        berth,
        raw,
        "spawn true",
    );
}

/// One GET; true on any HTTP answer.
fn http_ok(port: u16) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"GET / HTTP/1.0\r\n\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 12];
    matches!(s.read(&mut buf), Ok(n) if n >= 12 && buf.starts_with(b"HTTP/1."))
}

/// An httpd container started and waited on until it answers HTTP: berth's
/// CLI (`run -d --ready-http /`, client start included; the port is berth's
/// forwarder and the job joins a network holder), the raw engine sequence
/// through the docker CLI, and testcontainers-rs (`GenericImage` +
/// `WaitFor::http`, in-process), in turns; then the relay throughput of a
/// forwarded port against the engine's (`berth/relay.rs`).
fn bench_ready(d: &Daemon) {
    let n = 30;
    let mut berth = || httpd_to_ready(d);
    // The raw engine sequence through the docker CLI (create, start, read
    // the port, poll HTTP every 5 ms), then remove.
    let mut raw = || {
        let t = Instant::now();
        let o = Command::new("docker")
            .args([
                "create",
                "-p",
                "127.0.0.1::8080",
                SANDBOX,
                "httpd",
                "-f",
                "-p",
                "8080",
                "-h",
                "/www",
            ])
            .output()
            .unwrap();
        let cid = String::from_utf8_lossy(&o.stdout).trim().to_string();
        Command::new("docker")
            .args(["start", &cid])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        let o = Command::new("docker")
            .args(["port", &cid, "8080"])
            .output()
            .unwrap();
        let port: u16 = String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .and_then(|l| l.rsplit(':').next())
            .and_then(|p| p.trim().parse().ok())
            .unwrap();
        while !http_ok(port) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let took = t.elapsed();
        Command::new("docker")
            .args(["rm", "-f", &cid])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        took
    };
    let tc = tc::Peer::new();
    let mut tc_default = || tc.start_and_wait(None);
    let mut tc_fast = || tc.start_and_wait(Some(Duration::from_millis(5)));
    let [berth, raw, tc_default, tc_fast] =
        interleaved(n, [&mut berth, &mut raw, &mut tc_default, &mut tc_fast]);
    let name = "httpd start-to-ready, `berth run -d --ready-http /` from the CLI (p50 / p95 ms)";
    row(name, berth, raw, "docker create+start+poll 5 ms");
    row(
        name,
        berth,
        tc_default,
        "testcontainers-rs GenericImage + WaitFor::http (polls every 100 ms)",
    );
    row(name, berth, tc_fast, "same, polling every 5 ms");
    relay::bench(d);
}

/// `run -d -p 8080 --ready-http /` of an httpd through `d` (client start
/// included), then its kill: the time until it was ready.
fn httpd_to_ready(d: &Daemon) -> Duration {
    let t = Instant::now();
    let v = d.json(&[
        "run",
        "-d",
        "--runner",
        "docker",
        "--image",
        SANDBOX,
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
    ]);
    let took = t.elapsed();
    assert_eq!(v["ready"]["outcome"], "ready", "{v}");
    let id = v["job"]["id"].as_str().unwrap().to_string();
    let _ = d.cli(&["kill", &id, "--grace", "0"]).status();
    took
}

/// Time from a server's bind (it prints the moment) to `berth wait --port` returning.
fn bench_detect(d: &Daemon) {
    let n = 20;
    let script = "import socket,time,sys; time.sleep(0.3); s=socket.socket(); \
                  s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); \
                  s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); \
                  print(time.time_ns(), flush=True); time.sleep(30)";
    let mut lat = Vec::new();
    for _ in 0..n {
        let v = d.json(&[
            "run",
            "-d",
            "--runner",
            "host",
            "-p",
            "9000",
            "--shell",
            "--",
            &format!("exec python3 -c \"{script}\" $PORT"),
        ]);
        let id = v["job"]["id"].as_str().unwrap().to_string();
        let o = d
            .cli(&["wait", &id, "--port", "9000", "--timeout", "10"])
            .output()
            .unwrap();
        let returned = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        assert!(o.status.success());
        let logs = d.json(&["logs", &id, "--tail", "1"]);
        let bound: u128 = logs["lines"][0]["text"]
            .as_str()
            .unwrap_or("0")
            .parse()
            .unwrap_or(0);
        lat.push((returned.saturating_sub(bound)) as f64 / 1e6);
        let _ = d.cli(&["kill", &id, "--grace", "0"]).status();
    }
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "| readiness detection: bind → `berth wait --port` returns (p50 / p95 ms) | {:.1} / {:.1} | poll interval 20 ms | | |",
        percentile(&lat, 0.5),
        percentile(&lat, 0.95)
    );
}

fn gen_cmd(line: usize, bytes: u64) -> String {
    format!("yes $(printf '%0{}d' 0) | head -c {bytes}", line - 1)
}

fn bench_ingest(d: &Daemon) {
    let bytes: u64 = std::env::var("BERTH_BENCH_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 30);
    for (runner, line) in [
        ("host", 100usize),
        ("host", 4096),
        ("docker", 100),
        ("docker", 4096),
    ] {
        let cmd = gen_cmd(line, bytes);
        let raw = if runner == "host" {
            let t = Instant::now();
            Command::new("sh")
                .args(["-c", &format!("{cmd} | cat > /dev/null")])
                .status()
                .unwrap();
            t.elapsed()
        } else {
            let t = Instant::now();
            Command::new("docker")
                .args(["run", "--rm", "berth/sandbox:latest", "sh", "-c", &cmd])
                .stdout(Stdio::null())
                .status()
                .unwrap();
            t.elapsed()
        };
        let rss_before = d.rss_kib("VmRSS:");
        // Sample RSS while the job runs: VmHWM is a lifetime peak, useless after the first run.
        let pid = d.child.id();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sampler = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut peak = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    peak = peak.max(rss_of(pid));
                    std::thread::sleep(Duration::from_millis(20));
                }
                peak
            })
        };
        let t = Instant::now();
        let v = d.json(&["run", "-d", "--runner", runner, "--shell", "--", &cmd]);
        let id = v["job"]["id"].as_str().unwrap_or("").to_string();
        let _ = d.cli(&["wait", &id, "--timeout", "3600"]).status();
        let took = t.elapsed();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let hwm = sampler.join().unwrap();
        let v = d.json(&["status", &id]);
        // A last partial line is kept as a line of its own.
        let lines = bytes.div_ceil(line as u64);
        let last = v["last_seq"].as_u64().unwrap_or(0);
        let mb = bytes as f64 / 1e6;
        println!(
            "| ingest {runner}, {line}-byte lines, {:.0} MB | {:.0} MB/s, {:.0} lines/s | raw reader: {:.0} MB/s | {:.2}× | peak RSS growth {:.1} MiB; lines stored {last}/{lines} |",
            mb,
            mb / took.as_secs_f64(),
            lines as f64 / took.as_secs_f64(),
            mb / raw.as_secs_f64(),
            raw.as_secs_f64() / took.as_secs_f64(),
            hwm.saturating_sub(rss_before) as f64 / 1024.0,
        );
    }
}

fn bench_memory(d: &Daemon) {
    let idle = d.rss_kib("VmRSS:");
    let mut ids = Vec::new();
    for _ in 0..10 {
        let v = d.json(&["run", "-d", "--runner", "host", "--", "sleep", "60"]);
        ids.push(v["job"]["id"].as_str().unwrap_or("").to_string());
    }
    let busy = d.rss_kib("VmRSS:");
    for id in ids {
        let _ = d.cli(&["kill", &id, "--grace", "0"]).status();
    }
    println!(
        "| manager memory | idle {:.1} MiB; +{:.0} KiB per running job (10 jobs) | | | |",
        idle as f64 / 1024.0,
        busy.saturating_sub(idle) as f64 / 10.0
    );
}

/// `berth ps` answers from the records: with 200 finished and 3 running
/// Docker jobs it should cost what it costs with none (the client process and
/// one socket round trip), whatever the engine's stats would take.
fn bench_ps(d: &Daemon) {
    let n = 30;
    // Docker by default (the case that used to cost a stats call per container);
    // BERTH_BENCH_PS_RUNNER=host measures the same listing of host jobs.
    let runner = std::env::var("BERTH_BENCH_PS_RUNNER").unwrap_or_else(|_| "docker".into());
    let runner = runner.as_str();
    let empty = time(n, || d_run(d, &["ps", "--all"]));
    let finished = 200;
    let workers = 4;
    std::thread::scope(|s| {
        for w in 0..workers {
            s.spawn(move || {
                for _ in (w..finished).step_by(workers) {
                    // Foreground runs count against the cap of 3: wait in line.
                    d_run(d, &["run", "--queue", "--runner", runner, "--", "true"]);
                }
            });
        }
    });
    let mut running = Vec::new();
    for _ in 0..3 {
        let v = d.json(&["run", "-d", "--runner", runner, "--", "sleep", "600"]);
        running.push(v["job"]["id"].as_str().unwrap_or("").to_string());
    }
    let listed = d.json(&["ps", "--all", "--limit", "1000"]);
    let rows = listed.as_array().map(Vec::len).unwrap_or(0);
    let ps = time(n, || d_run(d, &["ps"]));
    let ps_all = time(n, || d_run(d, &["ps", "--all", "--limit", "1000"]));
    row(
        &format!("`berth ps` (3 running {runner} jobs of 203) (p50 / p95 ms)"),
        ps,
        empty,
        "`berth ps --all` with no jobs",
    );
    row(
        &format!(
            "`berth ps --all --limit 1000` ({rows} rows: 200 finished + 3 running {runner} jobs) (p50 / p95 ms)"
        ),
        ps_all,
        empty,
        "`berth ps --all` with no jobs",
    );
    for id in running {
        let _ = d.cli(&["kill", &id, "--grace", "0"]).status();
    }
}

fn main() {
    // `cargo test --all-targets` runs this binary without `--bench`: nothing to do then.
    if !std::env::args().any(|a| a == "--bench") {
        println!("berth benchmarks: run them with `bash bench/run.sh` (cargo bench --bench berth)");
        return;
    }
    let all = [
        "finished", "memory", "start", "network", "ready", "detect", "spawn", "output", "ingest", "ps",
        "layers", "gvisor", "sweep",
    ];
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let chosen: Vec<&str> = if args.is_empty() {
        all.to_vec()
    } else {
        // `swarm` only when named: it builds a cluster in namespaces (root);
        // `relay` alone is also in `ready`; `warm` (the spares' rows) and
        // `calls` (engine requests per job) when named.
        all.iter()
            .chain(&["swarm", "relay", "warm", "calls"])
            .copied()
            .filter(|a| args.iter().any(|x| x == a))
            .collect()
    };
    let d = Daemon::start();
    println!("| measure | berth | baseline | ratio | note |");
    println!("|---|---|---|---|---|");
    for name in chosen {
        match name {
            "memory" => bench_memory(&d),
            "spawn" => bench_spawn(&d),
            "start" => bench_start(&d),
            "network" => bench_network(&d),
            "ready" => bench_ready(&d),
            "detect" => bench_detect(&d),
            "ingest" => bench_ingest(&d),
            "ps" => bench_ps(&d),
            "output" => peers::bench_output(&d),
            "finished" => peers::bench_finished(&d),
            "layers" => layers::bench_layers(&d),
            "gvisor" => gvisor::bench_gvisor(&d),
            "sweep" => sweep::bench_sweep(),
            "swarm" => swarm::bench_swarm(&d),
            "relay" => relay::bench(&d),
            "warm" => warm::bench_warm(&d),
            "calls" => calls::bench_calls(),
            _ => {}
        }
    }
}
