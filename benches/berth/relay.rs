//! Relay throughput of a published port: a 1 GiB download from a server in
//! a container through berth's forwarder (a `-p` job of the daemon, on its
//! default internal network) against the same server with its port
//! published by the engine (`docker run -p 127.0.0.1::8080`: the engine's
//! docker-proxy), in turns, then requests per second (a new connection
//! each). The server sends from memory, so the relay is what is measured.
//! `BERTH_BENCH_BURN=N` runs N CPU-burning threads beside both (the
//! "two busy cores" load: `BERTH_BENCH_BURN=2 bash bench/run.sh relay`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::Daemon;

/// The image with python3 (the server).
const DEV: &str = "berth/dev:latest";
/// Bytes per download.
const BYTES: u64 = 1 << 30;
/// Downloads through each, in turns.
const ROUNDS: usize = 5;

/// Answers `GET /ping` with a few bytes and anything else with `BYTES`
/// zeros, once it has read the request's whole head.
fn server() -> String {
    format!(
        "import socket,threading\n\
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1); s.bind(('0.0.0.0',8080)); s.listen(16)\n\
chunk=b'\\0'*(1<<20)\n\
def serve(c):\n    req=b''\n    while b'\\r\\n\\r\\n' not in req:\n        d=c.recv(65536)\n        if not d: break\n        req+=d\n    if b'/ping' in req:\n        c.sendall(b'HTTP/1.0 200 OK\\r\\nContent-Length: 4\\r\\n\\r\\npong')\n    else:\n        c.sendall(b'HTTP/1.0 200 OK\\r\\nContent-Length: {BYTES}\\r\\n\\r\\n')\n        for _ in range({BYTES}>>20): c.sendall(chunk)\n    c.close()\n\
while True:\n    c,_=s.accept(); threading.Thread(target=serve,args=(c,),daemon=True).start()\n"
    )
}

/// One GET of `path` on 127.0.0.1:`port`: the bytes read and how long it took.
fn get(port: u16, path: &str) -> Option<(u64, Duration)> {
    let t = Instant::now();
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(60))).ok()?;
    // One write, and the server reads the whole head: a request left
    // partly unread when the server closes makes its kernel reset the
    // connection, cutting the download short.
    s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .ok()?;
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            Err(_) => return None,
        }
    }
    Some((total, t.elapsed()))
}

fn wait_pong(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while get(port, "/ping").is_none_or(|(n, _)| n == 0) {
        assert!(
            Instant::now() < deadline,
            "the relay bench's server did not answer"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Requests a second through `port`: `REQUESTS` GETs of `/ping` in a row,
/// each on a new connection; the ones that failed are counted in `failed`
/// (not in the rate).
fn reqs(port: u16, failed: &mut usize) -> f64 {
    let t = Instant::now();
    let mut ok = 0;
    for _ in 0..REQUESTS {
        match get(port, "/ping") {
            Some((n, _)) if n > 0 => ok += 1,
            _ => *failed += 1,
        }
    }
    ok as f64 / t.elapsed().as_secs_f64()
}

/// Requests per round of [`reqs`].
const REQUESTS: usize = 500;

/// `BERTH_BENCH_BURN` threads spinning until the flag is set.
fn burn() -> (std::sync::Arc<std::sync::atomic::AtomicBool>, usize) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let n: usize = std::env::var("BERTH_BENCH_BURN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    for _ in 0..n {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut x = 0u64;
            while !stop.load(Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        });
    }
    (stop, n)
}

/// MB/s of one download of `BYTES` through `port`.
fn rate(port: u16) -> f64 {
    let (n, took) = get(port, "/big").expect("the download");
    assert!(n >= BYTES, "only {n} bytes came");
    n as f64 / took.as_secs_f64() / 1e6
}

pub fn bench(d: &Daemon) {
    let script = server();
    let v = d.json(&[
        "run", "-d", "--runner", "docker", "--image", DEV, "-p", "8080", "--", "python3", "-c", &script,
    ]);
    let id = v["job"]["id"].as_str().expect("a job").to_string();
    let berth_port = v["job"]["ports"][0]["host_port"]
        .as_u64()
        .expect("a forwarded port") as u16;
    let o = Command::new("docker")
        .args([
            "run",
            "-d",
            "-p",
            "127.0.0.1::8080",
            DEV,
            "python3",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    let cid = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let o = Command::new("docker")
        .args(["port", &cid, "8080"])
        .output()
        .unwrap();
    let engine_port: u16 = String::from_utf8_lossy(&o.stdout)
        .lines()
        .next()
        .and_then(|l| l.rsplit(':').next())
        .and_then(|p| p.trim().parse().ok())
        .expect("the engine's port");
    wait_pong(berth_port);
    wait_pong(engine_port);
    let (stop, burning) = burn();
    let (mut berth, mut engine) = (Vec::new(), Vec::new());
    let (mut berth_reqs, mut engine_reqs) = (Vec::new(), Vec::new());
    let (mut berth_failed, mut engine_failed) = (0, 0);
    for _ in 0..ROUNDS {
        berth.push(rate(berth_port));
        engine.push(rate(engine_port));
        berth_reqs.push(reqs(berth_port, &mut berth_failed));
        engine_reqs.push(reqs(engine_port, &mut engine_failed));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let load = format!("{burning} CPU-burning threads beside");
    let (b, e) = (median(&mut berth), median(&mut engine));
    println!(
        "| relay throughput, 1 GiB download through a published port (MB/s, median of {ROUNDS}) | {b:.0} | the engine's published port (docker-proxy): {e:.0} | {:.2}× | {load} |",
        b / e
    );
    let (b, e) = (median(&mut berth_reqs), median(&mut engine_reqs));
    println!(
        "| relay requests a second, {REQUESTS} GETs in a row, a new connection each (median of {ROUNDS}) | {b:.0} | docker-proxy: {e:.0} | {:.2}× | {load}; failed: berth {berth_failed}, docker-proxy {engine_failed} |",
        b / e
    );
    let _ = d.cli(&["kill", &id, "--grace", "0"]).status();
    let _ = Command::new("docker")
        .args(["rm", "-f", &cid])
        .stdout(Stdio::null())
        .status();
}
