//! Digests of a build context's files, remembered by what `stat` says
//! (inode, size, modification and change times to the nanosecond): a
//! long-lived manager that starts many jobs of one project reads each
//! unchanged file once, not at every start. Any write or `chmod` moves the
//! change time, so a changed file is read again. File times are coarse (a
//! kernel tick), so a file changed within a tick of being read could keep its
//! stamp: only files whose change time is over a second older than the read
//! are remembered (the "racy git" rule).

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use sha2::{Digest, Sha256};

/// Files remembered at most; past it the memory starts over.
const MAX_REMEMBERED: usize = 200_000;

/// What `stat` says of a file, for telling whether it changed.
pub type Stamp = [i64; 6];

type Memory = Mutex<HashMap<PathBuf, (Stamp, [u8; 32])>>;

fn memory() -> &'static Memory {
    static MEMORY: OnceLock<Memory> = OnceLock::new();
    MEMORY.get_or_init(Default::default)
}

/// SHA-256 of the first `size` bytes of `path`, whose stat was `stamp`;
/// `open` opens it (through its directory, see `beneath.rs`) when it is not
/// remembered.
pub fn file_digest(
    path: &Path,
    stamp: Stamp,
    size: u64,
    open: impl FnOnce() -> std::io::Result<std::fs::File>,
) -> std::io::Result<[u8; 32]> {
    if let Some((s, d)) = memory().lock().unwrap().get(path)
        && *s == stamp
    {
        return Ok(*d);
    }
    let read_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let mut h = Sha256::new();
    let mut f = open()?.take(size);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    let digest: [u8; 32] = h.finalize().into();
    let changed_at = stamp[4] as f64 + stamp[5] as f64 / 1e9;
    if read_at - changed_at < 1.0 {
        return Ok(digest);
    }
    let mut mem = memory().lock().unwrap();
    if mem.len() >= MAX_REMEMBERED {
        mem.clear();
    }
    mem.insert(path.to_path_buf(), (stamp, digest));
    Ok(digest)
}
