//! A program that embeds berth (as a test harness or an agent runtime
//! would) and keeps its promise that nothing outlives it: it serves berth's
//! helpers from its own executable ([`berth::embed::helpers`]: the host-job
//! shim, the crash watchdog) and guards its manager with the watchdog
//! ([`berth::embed::guard`]).
//!
//! Run: `cargo run --features test-util --bin berth-embed-example -- STATE_DIR [COMMAND]`. It starts
//! COMMAND (default: a server that also leaves a process behind with
//! `setsid`) as a background host job, prints `started <job> <leader pid>`
//! and waits. Close its stdin for a clean end (jobs stopped, watchdog
//! stands down); kill it with SIGKILL and its watchdog stops the job's
//! whole tree anyway (the suite does both, `tests/suite/embed.rs`).

use std::io::Read;
use std::time::Duration;

use berth::{Config, JobSpec, Manager, ReadyCondition, RunnerChoice};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // First: when this executable was started as berth's shim or watchdog,
    // that runs here and the process exits.
    berth::embed::helpers();
    let mut args = std::env::args().skip(1);
    let state = args.next().ok_or("usage: embed STATE_DIR [COMMAND]")?;
    let command = args
        .next()
        .unwrap_or_else(|| "setsid sleep 3001 & echo up; exec sleep 3002".to_string());
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let manager = Manager::open(Config::isolated(&state, "embed")).await?;
        let guard = berth::embed::guard(&manager)?;
        let job = manager
            .start(
                JobSpec::shell(&command)
                    .with_runner(RunnerChoice::Host)
                    .background(),
            )
            .await?;
        job.wait(&[ReadyCondition::log("up")], Duration::from_secs(30))
            .await?;
        let info = job.info()?;
        println!(
            "started {} {} watchdog {}",
            job.id,
            info.pid.unwrap_or_default(),
            guard.watchdog_pid()
        );
        // Until stdin closes (on a blocking thread: nothing blocks a worker).
        tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new())).await??;
        manager.shutdown().await;
        drop(guard);
        println!("clean end");
        Ok(())
    })
}
