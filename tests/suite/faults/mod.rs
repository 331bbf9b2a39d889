//! Faults without loss: an engine that goes away for a while, a log that
//! cannot be written, a full or failing state disk, a huge read, a double
//! crash, a damaged store, and the memory a finished job keeps. Each test plays the fault for real (a /dev/full
//! stderr, a tmpfs the test mounts and fills, SIGKILLs, garbled files).

mod blip;
mod crashes;
mod damage;
mod full_disk;
mod held;
mod history;
mod logging;
mod memory;
mod reads;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of a fixed size mounted for one test (the tests run as root),
/// unmounted when dropped, whatever happened.
pub struct Tmpfs {
    pub dir: tempfile::TempDir,
}

impl Tmpfs {
    pub fn mount(size_mib: u64) -> Tmpfs {
        let dir = tempfile::tempdir().unwrap();
        let o = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size_mib}m,mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output()
            .expect("mount(8)");
        assert!(o.status.success(), "mounting a tmpfs (needs root): {o:?}");
        Tmpfs { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fill `mib` MiB of it with a file, to give back later by removing it.
    pub fn ballast(&self, mib: usize) -> PathBuf {
        let path = self.path().join("ballast");
        std::fs::write(&path, vec![7u8; mib << 20]).unwrap();
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazily: a process still holding a file in it cannot keep it mounted.
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

/// The crash watchdog of the manager with pid `owner`, once it runs.
pub(crate) fn watchdog_of(owner: u32) -> Option<u32> {
    let needle = format!("watchdog\0--owner\0{owner}:");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_string_lossy().parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        String::from_utf8_lossy(&cmdline).contains(&needle).then_some(pid)
    })
}

/// A daemon process a test started itself (a restart on the same state),
/// SIGKILLed if the test ends early.
pub struct Started(pub std::process::Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
