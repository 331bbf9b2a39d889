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

pub async fn daemon(global: &Global, recovery: Option<&str>) -> anyhow::Result<i32> {
    let mut config = global.config()?;
    if let Some(r) = recovery {
        config.recovery = r.parse()?;
        config.sources.insert("recovery", crate::config::Source::Flag);
    }
    crate::daemon::run(config).await?;
    Ok(0)
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
