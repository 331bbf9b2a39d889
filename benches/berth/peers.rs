//! The output and host-start rows measured beside the tools a user would pick
//! instead, in the same run: raw `cmd > /dev/null` and `cmd > file`, pueue
//! (when installed: `BERTH_BENCH_PUEUE_DIR`, or `pueue`/`pueued` on PATH;
//! otherwise its rows are skipped with a note), and a finished job's memory.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Daemon, percentile, run_timed};

/// A pueue daemon with its own config and state directory.
struct Pueue {
    bin: PathBuf,
    config: PathBuf,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Pueue {
    fn start() -> Option<Pueue> {
        let bin_dir = std::env::var_os("BERTH_BENCH_PUEUE_DIR").map(PathBuf::from);
        let find = |name: &str| match &bin_dir {
            Some(d) => Some(d.join(name)).filter(|p| p.exists()),
            None => Command::new("sh")
                .args(["-c", &format!("command -v {name}")])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())),
        };
        let (bin, daemon) = (find("pueue")?, find("pueued")?);
        let dir = tempfile::tempdir().ok()?;
        let config = dir.path().join("pueue.yml");
        let d = dir.path().display();
        std::fs::write(
            &config,
            format!(
                "shared:\n  pueue_directory: {d}\n  runtime_directory: {d}\n  use_unix_socket: true\n  unix_socket_path: {d}/pueue.socket\ndaemon:\n  callback: null\n"
            ),
        )
        .ok()?;
        let child = Command::new(daemon)
            .arg("-c")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let p = Pueue {
            bin,
            config,
            child,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !p.cmd(&["status"]).status().map(|s| s.success()).unwrap_or(false) {
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(p)
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("-c")
            .arg(&self.config)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    /// `pueue add`, then until pueue recorded the task done: add → done by
    /// pueue's own end timestamp. (`pueue wait` checks every 2 s, so timing
    /// it would measure its poll, not pueue.) The status is polled every
    /// 10 ms; the poll only decides when to look, not the figure.
    fn add_and_done(&self, shell_cmd: &str) -> Duration {
        let t0 = chrono::Utc::now();
        let out = self
            .cmd(&["add", "--print-task-id", "--", shell_cmd])
            .stdout(Stdio::piped())
            .output()
            .unwrap();
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let deadline = Instant::now() + Duration::from_secs(600);
        while Instant::now() < deadline {
            let o = self
                .cmd(&["status", "--json"])
                .stdout(Stdio::piped())
                .output()
                .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
            if let Some(end) = v["tasks"][&id]["status"]["Done"]["end"].as_str() {
                let end = chrono::DateTime::parse_from_rfc3339(end).unwrap();
                return (end.with_timezone(&chrono::Utc) - t0)
                    .to_std()
                    .unwrap_or_default();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("pueue task {id} did not end within 600 s");
    }
}

impl Drop for Pueue {
    fn drop(&mut self) {
        let _ = self.cmd(&["shutdown"]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sh(cmd: &str) -> Duration {
    let mut c = Command::new("sh");
    c.args(["-c", cmd]);
    run_timed(c)
}

/// Median of `n` runs of `f`, in seconds.
fn median(n: usize, mut f: impl FnMut() -> Duration) -> f64 {
    let mut v: Vec<f64> = (0..n).map(|_| f().as_secs_f64()).collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    percentile(&v, 0.5)
}

/// 100 MB (or `BERTH_BENCH_OUTPUT_BYTES`) of 100-byte lines, in the background
/// and in the foreground, against raw redirections and pueue.
pub fn bench_output(d: &Daemon) {
    let bytes: u64 = std::env::var("BERTH_BENCH_OUTPUT_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000_000);
    let line: usize = std::env::var("BERTH_BENCH_OUTPUT_LINE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let cmd = super::gen_cmd(line, bytes);
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("out");
    let n = 5;
    let null = median(n, || sh(&format!("{cmd} > /dev/null")));
    let to_file = median(n, || sh(&format!("{cmd} > {}", file.display())));
    let background = median(n, || {
        let t = Instant::now();
        let v = d.json(&["run", "-d", "--runner", "host", "--shell", "--", &cmd]);
        let id = v["job"]["id"].as_str().unwrap_or("").to_string();
        let _ = d.cli(&["wait", &id, "--timeout", "3600"]).status();
        t.elapsed()
    });
    let foreground = median(n, || {
        // Through the daemon into a pipe that a reader drains.
        let mut c = d.cli(&["run", "--runner", "host", "--shell", "--", &cmd]);
        c.stdout(Stdio::piped());
        let t = Instant::now();
        let mut child = c.spawn().unwrap();
        let mut out = child.stdout.take().unwrap();
        std::io::copy(&mut out, &mut std::io::sink()).unwrap();
        child.wait().unwrap();
        t.elapsed()
    });
    // `berth logs` of one such job (what the store kept of it: the output
    // cap drops the oldest lines) against reading the same bytes from a file.
    let v = d.json(&["run", "-d", "--runner", "host", "--shell", "--", &cmd]);
    let id = v["job"]["id"].as_str().unwrap_or("").to_string();
    let _ = d.cli(&["wait", &id, "--timeout", "3600"]).status();
    let kept = d
        .cli(&["logs", &id])
        .stdout(Stdio::piped())
        .output()
        .unwrap()
        .stdout;
    std::fs::write(&file, &kept).unwrap();
    let logs = median(n, || run_timed(d.cli(&["logs", &id])));
    let cat = median(n, || sh(&format!("cat {} > /dev/null", file.display())));
    let pueue = Pueue::start();
    let pueue_s = pueue.as_ref().map(|p| median(n, || p.add_and_done(&cmd)));
    let mb = bytes as f64 / 1e6;
    let rate = |s: f64| format!("{:.2} s ({:.0} MB/s)", s, mb / s);
    println!(
        "| host job, {mb:.0} MB of {line}-byte lines: `cmd > /dev/null` | {} | | | median of {n} |",
        rate(null)
    );
    println!("| same, `cmd > file` | {} | | | |", rate(to_file));
    println!(
        "| same, `berth run -d` until `berth wait` returns | {} | `cmd > file` | {:.2}× the file's throughput | target ≥ 0.8× |",
        rate(background),
        to_file / background
    );
    match pueue_s {
        Some(p) => println!(
            "| same, pueue add → done (its end timestamp) | {} | berth -d: {} | berth {:.2}× pueue's throughput | target ≥ 1.0× |",
            rate(p),
            rate(background),
            p / background
        ),
        None => {
            println!("| same, pueue | skipped: pueue/pueued not found (set BERTH_BENCH_PUEUE_DIR) | | | |")
        }
    }
    println!(
        "| same, `berth run` in the foreground into a pipe | {} | `cmd > file` | {:.2}× the file's throughput | target ≥ 0.5× |",
        rate(foreground),
        to_file / foreground
    );

    let kept_mb = kept.len() as f64 / 1e6;
    println!(
        "| same, `berth logs` of the job into /dev/null ({kept_mb:.0} MB kept) | {logs:.2} s ({:.0} MB/s) | `cat` of those bytes from a file: {cat:.3} s ({:.0} MB/s) | | |",
        kept_mb / logs,
        kept_mb / cat
    );

    // Host add latency, and add → done, against pueue's.
    let k = 30;
    let add = || run_timed(d.cli(&["run", "-d", "-q", "--runner", "host", "--", "true"]));
    let add_wait = || {
        let t = Instant::now();
        let v = d.json(&["run", "-d", "--runner", "host", "--", "true"]);
        let id = v["job"]["id"].as_str().unwrap_or("").to_string();
        let _ = d.cli(&["wait", &id]).status();
        t.elapsed()
    };
    let foreground = || run_timed(d.cli(&["run", "--runner", "host", "--", "true"]));
    if let Some(p) = &pueue {
        let [berth_add, pueue_add] = super::interleaved(
            k,
            [&mut { add }, &mut || run_timed(p.cmd(&["add", "--", "true"]))],
        );
        super::row(
            "`berth run -d --runner host -- true` (p50 / p95 ms)",
            berth_add,
            pueue_add,
            "`pueue add -- true`",
        );
        let [berth_done, berth_fg, pueue_done] = super::interleaved(
            k,
            [&mut { add_wait }, &mut { foreground }, &mut || {
                p.add_and_done("true")
            }],
        );
        super::row(
            "host add → done of `true`: `berth run -d` + `berth wait` (p50 / p95 ms)",
            berth_done,
            pueue_done,
            "`pueue add` → done (its end timestamp)",
        );
        super::row(
            "host add → done of `true`: foreground `berth run` (p50 / p95 ms)",
            berth_fg,
            pueue_done,
            "`pueue add` → done (its end timestamp)",
        );
    } else {
        let berth_add = super::time(k, add);
        println!(
            "| `berth run -d --runner host -- true` | {:.1} / {:.1} | pueue skipped | | |",
            berth_add.0, berth_add.1
        );
    }
    let fg = super::time(k, || run_timed(d.cli(&["run", "--runner", "host", "--", "true"])));
    let raw = super::time(k, || run_timed(Command::new("true")));
    super::row(
        "foreground `berth run --runner host -- true` (p50 / p95 ms)",
        fg,
        raw,
        "spawning `true`",
    );
}

/// RSS of the daemon after 60 sequential 5 MB jobs, against idle (run it
/// on its own for a fresh daemon: `bash bench/run.sh finished`).
pub fn bench_finished(d: &Daemon) {
    let idle = d.rss_kib("VmRSS:");
    let cmd = super::gen_cmd(100, 5_000_000);
    for _ in 0..60 {
        let v = d.json(&["run", "-d", "--runner", "host", "--shell", "--", &cmd]);
        let id = v["job"]["id"].as_str().unwrap_or("").to_string();
        let _ = d.cli(&["wait", &id, "--timeout", "600"]).status();
    }
    let after = d.rss_kib("VmRSS:");
    println!(
        "| daemon RSS after 60 sequential 5 MB jobs | {:.1} MiB | before them: {:.1} MiB | {:+.1} MiB | target within 10 MiB |",
        after as f64 / 1024.0,
        idle as f64 / 1024.0,
        (after as f64 - idle as f64) / 1024.0
    );
}
