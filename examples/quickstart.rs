//! The main journey through the library, the way a test would use berth:
//! start a server as a background job, wait until it answers HTTP, fetch a
//! page through its mapped port, read its log, stop it.
//!
//! Run: `cargo run --example quickstart` (add `-- --runner host` to run it
//! as a host process instead of a sandboxed container).

use std::io::{Read, Write};
use std::time::Duration;

use berth::{Config, JobSpec, LogQuery, Manager, ReadyCondition, RunnerChoice};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runner = match std::env::args().skip_while(|a| a != "--runner").nth(1) {
        Some(r) => r.parse()?,
        None => RunnerChoice::Docker,
    };
    let state = std::env::temp_dir().join("berth-quickstart");
    let manager = Manager::open(Config::isolated(state, "quickstart")).await?;

    let spec = match runner {
        RunnerChoice::Host => JobSpec::shell("exec python3 -m http.server \"$PORT\" --bind 127.0.0.1"),
        // In a container the server binds its own port; berth maps it to an
        // ephemeral 127.0.0.1 port. Needs `berth images build` once.
        _ => JobSpec::argv(["httpd", "-f", "-v", "-p", "8080", "-h", "/www"])
            .with_image("berth/sandbox:latest"),
    };
    let job = manager
        .start(spec.with_runner(runner).with_port(8080).background())
        .await?;
    let info = job.info()?;
    println!(
        "started {} on {:?}: {}",
        job.id,
        info.runner,
        berth::card::ports_text(&info)
    );

    let ready = job
        .wait(&[ReadyCondition::http("/")], Duration::from_secs(30))
        .await?;
    println!("ready: {}", serde_json::to_string(&ready)?);

    let port = job.host_port(8080).expect("port 8080 is published");
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
    write!(stream, "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut page = String::new();
    stream.read_to_string(&mut page)?;
    println!(
        "GET http://127.0.0.1:{port}/ -> {}",
        page.lines().next().unwrap_or("(nothing)")
    );

    let logs = job.logs(&LogQuery {
        tail: Some(5),
        ..Default::default()
    })?;
    for line in logs.lines {
        println!("  log #{} [{:?}] {}", line.seq, line.stream, line.text);
    }

    let killed = job.kill().await?;
    println!("stopped: {} (ended_by {:?})", killed.result, killed.ended_by);
    manager.shutdown().await;
    Ok(())
}
