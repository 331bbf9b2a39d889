//! `berth daemon` (the manager in the foreground), `berth up` (start it
//! detached and return once its socket answers) and `berth down` (tear it
//! down and wait until it is gone).

use std::time::{Duration, Instant};

use super::Global;
use super::out::outln;
use crate::api::client::Client;
use crate::api::socket_path;

/// How long `up` and `down` wait for the daemon.
const SETTLE: Duration = Duration::from_secs(15);
/// How long `berth up` waits for a stopping daemon to be gone.
const STOPPING_WAIT: Duration = Duration::from_secs(30);

pub async fn daemon(global: &Global, recovery: Option<&str>, idle_exit: Option<f64>) -> anyhow::Result<i32> {
    let mut config = global.config()?;
    if let Some(r) = recovery {
        config.recovery = r.parse()?;
        config.sources.insert("recovery", crate::config::Source::Flag);
    }
    let idle = idle_exit
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64);
    crate::daemon::run(config, idle).await?;
    Ok(0)
}

/// Start a daemon for `berth run` when none serves the instance: it exits
/// after `daemon_idle` with no job and no session. Several runs starting at
/// once share the one that wins the instance (the others' exit at once).
pub async fn on_demand(config: &crate::config::Config) -> anyhow::Result<()> {
    let idle = format!("{}", config.daemon_idle_secs);
    let log_path = config.instance_dir().join("daemon.log");
    let mut child = crate::watchdog::spawn_berth(config, &["daemon", "--idle-exit", &idle], "daemon.log")?;
    let client = Client::new(config);
    let deadline = Instant::now() + SETTLE;
    loop {
        if client.health().await.is_ok_and(|h| h.status != "stopping") {
            return Ok(());
        }
        // One that lost the race to another run's daemon exits at once:
        // keep waiting for the winner; one that could not start says why.
        let exited = matches!(child.try_wait(), Ok(Some(_)));
        let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
        if exited
            && let Some(why) = log()
                .lines()
                .rev()
                .find(|l| l.contains("berth:"))
                .map(str::to_string)
            && !why.contains("already running")
        {
            anyhow::bail!("{}", why.trim_start_matches("berth: "));
        }
        if Instant::now() > deadline {
            let log = log();
            let last = log.lines().last().unwrap_or("").to_string();
            anyhow::bail!(
                "no daemon answered within {SETTLE:?} after starting one ({}); see {} (last line: {last}), or run with --no-daemon",
                if exited { "it exited" } else { "it runs" },
                log_path.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn up(global: &Global) -> anyhow::Result<i32> {
    let config = global.config()?;
    let client = Client::new(&config);
    // A daemon that is stopping (SIGTERM, `berth down` from elsewhere) is
    // waited out, then replaced: it would refuse every job meanwhile.
    let stopping_until = Instant::now() + STOPPING_WAIT;
    loop {
        match client.health().await {
            Ok(h) if h.status == "stopping" && Instant::now() < stopping_until => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(h) if h.status == "stopping" => anyhow::bail!(
                "the daemon for instance `{}` (pid {}) is still stopping after {STOPPING_WAIT:?}; try again when it is gone",
                h.instance,
                h.pid
            ),
            Ok(h) => {
                outln!(
                    "berth daemon for instance `{}` already running (pid {})",
                    h.instance,
                    h.pid
                );
                return Ok(0);
            }
            Err(_) => break,
        }
    }
    let log_path = config.instance_dir().join("daemon.log");
    let mut child = crate::watchdog::spawn_berth(&config, &["daemon"], "daemon.log")?;
    let deadline = Instant::now() + SETTLE;
    loop {
        if let Ok(h) = client.health().await {
            outln!(
                "berth daemon for instance `{}` running (pid {}, socket {})",
                h.instance,
                h.pid,
                client.socket().display()
            );
            outln!(
                "  docker engine: {}",
                crate::runner::docker::Endpoint::current().describe()
            );
            if let Some(notice) = &h.notice {
                eprintln!("berth: {notice}");
            }
            return Ok(0);
        }
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            anyhow::bail!("the daemon exited ({status}) before answering: {}", log.trim());
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "the daemon did not answer within {SETTLE:?}; see {}",
                log_path.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn down(global: &Global) -> anyhow::Result<i32> {
    let config = global.config()?;
    let client = Client::new(&config);
    let health = match client.health().await {
        Ok(h) => h,
        Err(_) => {
            outln!(
                "no berth daemon running for instance `{}` ({})",
                config.instance,
                socket_path(&config).display()
            );
            return Ok(0);
        }
    };
    client.shutdown().await?;
    let deadline = Instant::now() + SETTLE;
    // Gone when its process no longer runs (it removes its socket on the way out).
    while alive(health.pid) {
        if Instant::now() > deadline {
            anyhow::bail!(
                "the daemon (pid {}) is still running after {SETTLE:?}",
                health.pid
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    outln!("berth daemon for instance `{}` stopped", health.instance);
    Ok(0)
}

/// A process that exists and is not a zombie waiting for its parent.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().and_then(|s| s.split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}
