//! `calls`: how many requests the engine gets for one container job,
//! counted by a Unix-socket forwarder in front of the engine's socket (the
//! request lines of each connection, client to engine): berth's `run --
//! true` through a daemon whose `DOCKER_HOST` is the forwarder, after one
//! job of the same image, against `docker run --rm` of the same image
//! through the same forwarder; with `BERTH_BENCH_BEFORE=<berth binary>`
//! also the build before. Each figure is the median of five jobs, counted
//! once the job's container is gone (its removal is a request too).

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Daemon, SANDBOX};

const ENGINE: &str = "/var/run/docker.sock";
const METHODS: [&str; 5] = ["GET /", "POST /", "DELETE /", "HEAD /", "PUT /"];

/// The forwarder, and the requests it has seen (`METHOD /path`).
struct Counter {
    sock: PathBuf,
    seen: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl Counter {
    fn start() -> Counter {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("engine.sock");
        let listener = UnixListener::bind(&sock).unwrap();
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let log = seen.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let log = log.clone();
                std::thread::spawn(move || forward(client, &log));
            }
        });
        Counter {
            sock,
            seen,
            _dir: dir,
        }
    }

    fn host(&self) -> String {
        format!("unix://{}", self.sock.display())
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

/// Copy one connection both ways, noting each request line it carries.
fn forward(mut client: UnixStream, log: &Mutex<Vec<String>>) {
    let Ok(mut engine) = UnixStream::connect(ENGINE) else {
        return;
    };
    let (mut back_from, mut back_to) = (engine.try_clone().unwrap(), client.try_clone().unwrap());
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut back_from, &mut back_to);
        let _ = back_to.shutdown(std::net::Shutdown::Write);
    });
    let mut line = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    while let Ok(n) = client.read(&mut buf) {
        if n == 0 || engine.write_all(&buf[..n]).is_err() {
            break;
        }
        for &b in &buf[..n] {
            if b != b'\n' {
                line.push(b);
                continue;
            }
            let text = String::from_utf8_lossy(&line);
            if METHODS.iter().any(|m| text.starts_with(m)) && text.trim_end().ends_with("HTTP/1.1") {
                let request = text.split(' ').take(2).collect::<Vec<_>>().join(" ");
                log.lock()
                    .unwrap()
                    .push(request.split('?').next().unwrap_or_default().to_string());
            }
            line.clear();
        }
    }
    let _ = engine.shutdown(std::net::Shutdown::Write);
}

/// Job containers of instance `instance` (or, with `None`, of the image) that exist.
fn containers(instance: Option<&str>) -> usize {
    let mut c = Command::new("docker");
    c.args(["ps", "-aq"]);
    match instance {
        // Its jobs' containers, not the pause containers it keeps.
        Some(i) => c.args([
            "--filter",
            &format!("label=berth.instance={i}"),
            "--filter",
            "label=berth.job",
        ]),
        None => c.args(["--filter", &format!("ancestor={SANDBOX}")]),
    };
    let o = c.output().unwrap();
    String::from_utf8_lossy(&o.stdout).lines().count()
}

/// Run `job` five times; the median count of requests each made, and the
/// requests of the last one.
fn count(counter: &Counter, mut job: impl FnMut(), gone: impl Fn() -> bool) -> (usize, Vec<String>) {
    let mut counts = Vec::new();
    let mut last = Vec::new();
    for _ in 0..5 {
        counter.take();
        job();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !gone() {
            assert!(Instant::now() < deadline, "the job's container was never removed");
            std::thread::sleep(Duration::from_millis(20));
        }
        last = counter.take();
        counts.push(last.len());
    }
    counts.sort();
    (counts[2], last)
}

fn berth_job(d: &Daemon) {
    let args = ["run", "--runner", "docker", "--image", SANDBOX, "--", "true"];
    assert!(d.cli(&args).status().unwrap().success(), "berth run failed");
}

/// The row of a daemon (this build, or `BERTH_BENCH_BEFORE`'s).
fn berth_row(counter: &Counter, d: &Daemon, name: &str, docker: usize) {
    berth_job(d); // the pool network, the image seen
    let (n, last) = count(counter, || berth_job(d), || containers(Some(&d.instance)) == 0);
    println!(
        "| engine requests per container `run -- true`, {name} | {n} ({}) | `docker run --rm`: {docker} | {:.2}× | median of 5 |",
        last.join(", "),
        n as f64 / docker as f64
    );
}

pub fn bench_calls() {
    let counter = Counter::start();
    let host = counter.host();
    let env = [("DOCKER_HOST", host.as_str())];
    let before = std::env::var_os("BERTH_BENCH_BEFORE")
        .map(|bin| Daemon::start_bin("bench-calls-before", &env, PathBuf::from(bin)));
    let d = Daemon::start_with("bench-calls", &env);
    let docker_job = || {
        let mut c = Command::new("docker");
        c.env("DOCKER_HOST", &host)
            .args(["run", "--rm", SANDBOX, "true"])
            .stdout(Stdio::null());
        assert!(c.status().unwrap().success(), "docker run failed");
    };
    let (docker, last) = count(&counter, docker_job, || containers(None) == 0);
    println!("<!-- docker run --rm: {} -->", last.join(", "));
    berth_row(&counter, &d, "this build", docker);
    if let Some(b) = &before {
        berth_row(&counter, b, "the `BERTH_BENCH_BEFORE` build", docker);
    }
}
