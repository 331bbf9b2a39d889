//! An engine that disappears for 8 s under running container jobs. berth
//! talks to the real engine through a Unix-socket forwarder the test stops
//! (its listener closed *and* every open connection dropped, so the wait
//! requests and output streams break too) and starts again. The engine is
//! the truth for what runs: the jobs keep their slots and stay running,
//! their output is complete afterwards (docker kept what was printed during
//! the blip), a kill answers `killed`, no container of the instance is left
//! that no job claims, and running containers never exceed the cap of 3
//! while more jobs are asked for during and after the blip.

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::{Daemon, eventually};

const ENGINE: &str = "/var/run/docker.sock";
const BLIP: Duration = Duration::from_secs(8);
const LINES: u32 = 60;

/// A Unix-socket forwarder to the engine's socket: one thread accepts,
/// two threads copy each connection's directions.
struct Forwarder {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<UnixStream>>>,
    acceptor: Option<JoinHandle<()>>,
}

impl Forwarder {
    fn start(path: &Path) -> Forwarder {
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path).expect("bind the forwarder");
        let stop = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<UnixStream>>> = Arc::default();
        let (stop2, open2) = (stop.clone(), open.clone());
        let acceptor = std::thread::spawn(move || {
            for client in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(engine) = UnixStream::connect(ENGINE) else {
                    continue;
                };
                relay(client, engine, &open2);
            }
            // The listener goes here: new connections are refused.
        });
        Forwarder {
            path: path.to_path_buf(),
            stop,
            open,
            acceptor: Some(acceptor),
        }
    }

    /// Close the listener and drop every open connection.
    fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the blocked accept, which then sees `stop`.
        let _ = UnixStream::connect(&self.path);
        acceptor.join().unwrap();
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Copy both ways between `a` and `b`, each kept (for `stop`) while open.
fn relay(a: UnixStream, b: UnixStream, open: &Arc<Mutex<Vec<UnixStream>>>) {
    let mut keep = open.lock().unwrap();
    for (from, to) in [(&a, &b), (&b, &a)] {
        let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
            return;
        };
        keep.push(from.try_clone().unwrap());
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut from, &mut to);
            let _ = to.shutdown(std::net::Shutdown::Write);
        });
    }
}

/// The running job containers of `instance` (by its label), from the
/// engine itself, not through the forwarder.
fn running_jobs(instance: &str) -> usize {
    let o = Command::new("docker")
        .args([
            "ps",
            "-q",
            "--filter",
            &format!("label=berth.instance={instance}"),
        ])
        .args(["--filter", "label=berth.job"])
        .output()
        .expect("docker CLI");
    String::from_utf8_lossy(&o.stdout).lines().count()
}

/// The job each of `instance`'s containers (any state) is labelled with.
fn container_jobs(instance: &str) -> Vec<String> {
    let o = Command::new("docker")
        .args([
            "ps",
            "-a",
            "--filter",
            &format!("label=berth.instance={instance}"),
        ])
        .args([
            "--filter",
            "label=berth.job",
            "--format",
            "{{.Label \"berth.job\"}}",
        ])
        .output()
        .expect("docker CLI");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Samples the instance's running job containers until dropped; the most seen.
struct Sampler {
    most: Arc<AtomicUsize>,
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    fn start(instance: &str) -> Sampler {
        let (most, done) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (m, d, instance) = (most.clone(), done.clone(), instance.to_string());
        let thread = std::thread::spawn(move || {
            while !d.load(Ordering::SeqCst) {
                m.fetch_max(running_jobs(&instance), Ordering::SeqCst);
            }
        });
        Sampler {
            most,
            done,
            thread: Some(thread),
        }
    }

    fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Ask for one more container job; its id when it was started.
fn try_start(d: &Daemon) -> Option<String> {
    let (code, out, _) = d.run(&["run", "--json", "-d", "--runner", "docker", "--", "sleep", "600"]);
    let v: serde_json::Value = serde_json::from_str(&out).ok().filter(|_| code == 0)?;
    v["job"]["id"].as_str().map(str::to_string)
}

fn state(d: &Daemon, id: &str) -> String {
    d.json(&["status", id])["status"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn an_engine_blip_keeps_jobs_their_slots_and_their_output() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("engine.sock");
    let mut fwd = Forwarder::start(&sock);
    let host = format!("unix://{}", sock.display());
    let d = Daemon::start_with(&[("DOCKER_HOST", host.as_str()), ("BERTH_MAX_JOBS", "3")]);
    let count = format!("for i in $(seq 1 {LINES}); do echo line-$i; sleep 0.25; done");
    let a = d.json(&["run", "-d", "--runner", "docker", "--shell", "--", &count]);
    let a = a["job"]["id"].as_str().unwrap().to_string();
    let mut jobs = vec![a.clone()];
    for _ in 0..2 {
        jobs.push(try_start(&d).expect("a slot of the cap is free"));
    }
    let (code, _, err) = d.run(&["wait", &a, "--log", "^line-4$", "--timeout", "30"]);
    assert_eq!(code, 0, "{err}");
    let sampler = Sampler::start(&d.instance);

    // The blip: more jobs are asked for all through it.
    fwd.stop();
    let blip = Instant::now();
    let mut states = Vec::new();
    while blip.elapsed() < BLIP {
        jobs.extend(try_start(&d));
        states.push(state(&d, &a));
    }
    fwd = Forwarder::start(&sock);

    // After: more jobs asked for until the counting job ended, and at
    // least a few times whatever became of it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut asked = 0;
    while asked < 3 || !matches!(state(&d, &a).as_str(), "exited" | "lost" | "killed" | "signaled") {
        assert!(Instant::now() < deadline, "{a} did not end");
        jobs.extend(try_start(&d));
        asked += 1;
    }
    let most = sampler.most();
    drop(sampler);

    assert!(most <= 3, "{most} job containers ran at once under a cap of 3");
    assert!(
        states.iter().all(|s| s == "running"),
        "the job stays running while the engine is away: {states:?}"
    );
    let info = d.json(&["status", &a]);
    assert_eq!(info["status"]["state"], "exited", "{info}");
    let page = d.json(&["logs", &a, "--since", "1", "--limit", "100000"]);
    let texts: Vec<&str> = page["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    let want: Vec<String> = (1..=LINES).map(|i| format!("line-{i}")).collect();
    assert_eq!(texts, want, "every line once, those printed during the blip too");

    // Every container of the instance is a live job's.
    eventually(Duration::from_secs(20), "no container that no job claims", || {
        container_jobs(&d.instance)
            .iter()
            .all(|j| matches!(state(&d, j).as_str(), "running" | "starting"))
    })
    .await;
    let k = d.json(&["kill", &jobs[1]]);
    assert_eq!(
        k["result"], "killed",
        "a job that lived through the blip is killed: {k}"
    );
    for j in &jobs[2..] {
        d.run(&["kill", j]);
    }
    eventually(
        Duration::from_secs(30),
        "the instance's job containers removed",
        || container_jobs(&d.instance).is_empty(),
    )
    .await;
    drop(d);
    drop(fwd);
}
