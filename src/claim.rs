//! One manager per instance: the instance lock (`<instance>/daemon.lock`,
//! held for the life of the claim, so a second manager is refused with the
//! first one's pid) and the pid file (`<instance>/daemon.pid`) that tells
//! the crash watchdog whom it guards. A manager that ends cleanly drops its
//! claim, which removes the pid file: the watchdog then knows the end was
//! not a crash. The daemon, an MCP host and an embedding program
//! ([`crate::embed::guard`]) claim their instance the same way.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::PathBuf;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::store::private;

/// The held instance lock and the written pid file; dropping it removes the
/// pid file (a clean end), then releases the lock.
pub struct Claim {
    _lock: File,
    pid_file: PathBuf,
    /// Only a claim that wrote the pid file removes it: one left by a
    /// crashed manager is its watchdog's evidence of the crash, which a
    /// short in-process run taking the instance right after must not erase.
    published: std::sync::atomic::AtomicBool,
}

impl Claim {
    /// Take `config`'s instance for this process, or say which process holds it.
    pub fn take(config: &Config) -> Result<Claim> {
        let dir = config.instance_dir();
        private::own_dir(&dir).map_err(|e| Error::io("create state directory", &dir, e))?;
        let lock_path = dir.join("daemon.lock");
        let pid_file = dir.join("daemon.pid");
        let mut lock = private::open(
            OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true),
            &lock_path,
        )
        .map_err(|e| Error::io("open", &lock_path, e))?;
        if lock.try_lock().is_err() {
            // The holder wrote its pid into the lock; only a serving manager
            // (a daemon, an MCP host) publishes the pid file too.
            let mut pid = String::new();
            let _ = lock.read_to_string(&mut pid);
            let pid = match pid.trim() {
                "" => "unknown".to_string(),
                p => p.to_string(),
            };
            let instance = config.instance.clone();
            return Err(match pid_file.exists() {
                true => Error::DaemonRunning { instance, pid },
                false => Error::InstanceBusy { instance, pid },
            });
        }
        let _ = lock.set_len(0);
        let _ = write!(lock, "{}", std::process::id());
        Ok(Claim {
            _lock: lock,
            pid_file,
            published: Default::default(),
        })
    }

    /// Write the pid file: from now on, this process dying without dropping
    /// the claim is a crash the watchdog cleans up after.
    pub fn publish(&self) -> Result<()> {
        private::write(&self.pid_file, std::process::id().to_string())
            .map_err(|e| Error::io("write", &self.pid_file, e))?;
        self.published.store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if *self.published.get_mut() {
            let _ = std::fs::remove_file(&self.pid_file);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A claim that never published leaves a pid file it did not write (a
    /// crashed manager's, its watchdog's evidence); one that published
    /// removes its own.
    #[test]
    fn only_a_published_claim_removes_the_pid_file() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::isolated(dir.path(), "claim");
        let pid_file = config.instance_dir().join("daemon.pid");
        let claim = Claim::take(&config).unwrap();
        std::fs::write(&pid_file, "999999").unwrap();
        drop(claim);
        assert_eq!(std::fs::read_to_string(&pid_file).unwrap(), "999999");
        let claim = Claim::take(&config).unwrap();
        claim.publish().unwrap();
        assert!(Claim::take(&config).is_err(), "one claim at a time");
        drop(claim);
        assert!(!pid_file.exists());
    }
}
