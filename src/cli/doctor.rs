//! `berth doctor`: is the instance's state sound, and if not, make it so.
//!
//! It says whether a daemon serves the instance and whether its store can
//! be written (`degraded`, since when, why), checks the store (its
//! write-ahead log frame by frame and the database's integrity, see
//! `store::damage`), and the size of the daemon's log. With no manager
//! using the store it also repairs: a damaged store is moved aside under a
//! dated name and a fresh one made, and what dead managers left running
//! (containers by label, host jobs by tag) is removed. While a daemon runs
//! it only reports (the daemon checked the store when it started, and a
//! store in use is not moved): `berth down`, then `berth doctor`.

use clap::Args;

use super::Global;
use super::out::outln;
use crate::api::client::Client;
use crate::store::damage;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Only report: move nothing aside, remove nothing.
    #[arg(long)]
    pub check: bool,
}

fn size(path: &std::path::Path) -> String {
    crate::card::bytes(std::fs::metadata(path).map(|m| m.len()).unwrap_or(0))
}

/// The instance's layers: how many, and each one half-applied or damaged
/// (what to do about it). False when one is.
async fn layers(config: &crate::config::Config) -> anyhow::Result<bool> {
    use crate::model::LayerState;
    let layers = crate::layers::Layers::new(config.instance_dir().join("layers"));
    let all = tokio::task::spawn_blocking(move || {
        layers.names().iter().map(|n| layers.info(n)).collect::<Vec<_>>()
    })
    .await?;
    if all.is_empty() {
        return Ok(true);
    }
    let bytes: u64 = all.iter().map(|l| l.counts.bytes).sum();
    outln!(
        "layers    {} ({} in all; `berth layers` lists them)",
        all.len(),
        crate::card::bytes(bytes)
    );
    let mut sound = true;
    for l in &all {
        match &l.state {
            LayerState::HalfApplied => {
                sound = false;
                outln!(
                    "          {} is HALF-APPLIED (an apply stopped before its end): run `berth apply {}` again to finish it",
                    l.name,
                    l.name
                );
            }
            LayerState::Damaged { reason } => {
                sound = false;
                outln!(
                    "          {} is DAMAGED ({reason}): `berth discard {}` removes it",
                    l.name,
                    l.name
                );
            }
            _ => {}
        }
    }
    Ok(sound)
}

fn side(path: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    p.into()
}

pub async fn doctor(global: &Global, a: DoctorArgs) -> anyhow::Result<i32> {
    let config = global.config()?;
    let db = config.instance_dir().join("berth.db");
    outln!(
        "instance  {} ({})",
        config.instance,
        config.instance_dir().display()
    );
    let (daemon, mut sound) = daemon(&config).await?;
    // The engine too: a doctor that says "sound" while no container job
    // can start would mislead.
    let engine = crate::runner::docker::Engine::new(&config);
    match engine.resolve(crate::model::RunnerChoice::Docker).await {
        Ok(_) => {
            outln!("engine    {} answers", engine.endpoint());
            gvisor(&engine, &config).await?;
        }
        Err(e) => outln!("engine    NOT reachable: {e}"),
    }
    if !db.exists() {
        outln!("store     none yet ({})", db.display());
        return Ok(0);
    }
    outln!(
        "store     {} ({}, log {})",
        db.display(),
        size(&db),
        size(&side(&db, "-wal"))
    );
    // Alone with the store, or not: only then is its log read whole and a
    // damaged one moved.
    let lock = damage::lock_file(&db)?;
    let alone = daemon.is_none() && lock.try_lock().is_ok();
    sound &= store(&db, alone, a.check, &lock)?;
    sound &= blocks(&db)?;
    if alone && !a.check {
        // What dead managers left running, whose records may be gone.
        let engine = crate::runner::docker::Engine::new(&config);
        let containers = engine.remove_dead_owners(&[], false).await;
        let config2 = config.clone();
        let hosts = tokio::task::spawn_blocking(move || crate::teardown::reap_tagged(&config2)).await?;
        outln!(
            "leftovers removed {containers} container(s) and killed {hosts} host job(s) of managers that died"
        );
    }
    drop(lock);
    sound &= layers(&config).await?;
    let log = config.instance_dir().join("daemon.log");
    if log.exists() {
        outln!(
            "log       {} ({}, capped at {} MiB and rotated to .1)",
            log.display(),
            size(&log),
            crate::logfile::MAX_LOG_BYTES >> 20
        );
    }
    Ok(if sound { 0 } else { 1 })
}

/// The daemon serving the instance, if one answers, said with its store's
/// trouble; false when its store cannot be written.
async fn daemon(config: &crate::Config) -> anyhow::Result<(Option<crate::api::Health>, bool)> {
    let mut sound = true;
    let daemon = match Client::connect(config).await {
        Ok(c) => c.health().await.ok(),
        Err(_) => None,
    };
    match &daemon {
        Some(h) => {
            outln!("daemon    pid {}, {}", h.pid, h.status);
            if let Some(t) = &h.store {
                sound = false;
                outln!(
                    "          the store cannot be written since {} ({}); {} of output held in memory; new jobs are refused until it can",
                    t.since.format("%Y-%m-%d %H:%M:%S UTC"),
                    t.reason,
                    t.held_bytes
                );
            }
            if let Some(n) = &h.notice {
                outln!("          at its start: {n}");
            }
        }
        None => outln!("daemon    none answers"),
    }
    Ok((daemon, sound))
}

/// The store's integrity (its log frame by frame when `alone` with it); a
/// damaged one is moved aside and a fresh one made when alone and not
/// only a `check`. False when it stays damaged.
fn store(db: &std::path::Path, alone: bool, check: bool, lock: &std::fs::File) -> anyhow::Result<bool> {
    let verdict = if alone {
        damage::check(db)
    } else {
        damage::quick_check(db)
    };
    match verdict {
        Ok(()) => outln!(
            "          sound (integrity check passed{})",
            if alone { ", log checked frame by frame" } else { "" }
        ),
        Err(damage::Damage(what)) => {
            outln!("          DAMAGED: {what}");
            if !alone {
                outln!(
                    "          in use: stop its manager (`berth down`), then run `berth doctor` to repair it"
                );
                return Ok(false);
            } else if check {
                outln!(
                    "          run `berth doctor` (without --check) to move it aside and start a fresh one"
                );
                return Ok(false);
            } else {
                let aside = damage::move_aside(db)?;
                // The new store takes the lock itself (a second hold here would wait on ours).
                lock.unlock()?;
                crate::store::Store::open(db)?;
                outln!(
                    "          moved aside to {}; a fresh store was made",
                    aside.display()
                );
            }
        }
    }
    Ok(true)
}

/// Output blocks whose bytes changed on disk (SQLite's checks pass
/// those): every read says their lines are lost; here they are counted.
/// False when one is damaged or they could not be checked.
fn blocks(db: &std::path::Path) -> anyhow::Result<bool> {
    match damage::check_blocks(db) {
        Ok(found) if found.damaged.is_empty() => {
            outln!("          {} output block(s) checked, all sound", found.checked);
            Ok(true)
        }
        Ok(found) => {
            outln!(
                "          {} of {} output block(s) DAMAGED: their lines are lost (reads mark them as lost ranges)",
                found.damaged.len(),
                found.checked
            );
            for (job, first, last) in found.damaged.iter().take(20) {
                outln!("          {job}: lines {first}–{last}");
            }
            Ok(false)
        }
        Err(damage::Damage(what)) => {
            outln!("          output blocks not checked: {what}");
            Ok(false)
        }
    }
}

/// Whether the engine can run `isolation = "gvisor"` jobs, and if not, the
/// lines that make it so.
async fn gvisor(engine: &crate::runner::docker::Engine, config: &crate::Config) -> anyhow::Result<()> {
    use crate::runner::docker::gvisor;
    let name = &config.gvisor_runtime;
    let runtimes = gvisor::registered(engine.client().await?).await?;
    if runtimes.iter().any(|r| r == name) {
        outln!("          gVisor: runtime `{name}` registered (isolation = \"gvisor\" works)");
    } else {
        outln!(
            "          gVisor: runtime `{name}` NOT registered (isolation = \"gvisor\" jobs are refused);"
        );
        outln!(
            "          add {} to /etc/docker/daemon.json",
            gvisor::daemon_json(name)
        );
        outln!("          (Debian: apt install runsc), then `kill -HUP $(pidof dockerd)`: no restart needed");
    }
    Ok(())
}
