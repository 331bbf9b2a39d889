//! A directory tree read and changed through descriptors, never through a
//! path that a job could have turned into a symlink.
//!
//! Both sides of a layer are written by others: the upper by the job (its
//! files, and symlinks it planted), the checkout by the user and, in
//! `direct` mode, by jobs. So every step here is relative to a directory
//! already open (`openat`), one name at a time, with `O_NOFOLLOW`: a
//! symlink is read as a symlink and never entered, and a file is written
//! into a directory berth holds open (a temporary name, then `renameat`).
//! `statx` gives the birth time a copy-up has (`layers/scan.rs` reads the
//! checkout's changes against it) and xattrs the overlay's opaque marks.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, StatxFlags};

/// What one entry of a tree is (links not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Link,
    /// overlayfs's mark of a deleted path: a character device 0/0.
    Whiteout,
    /// Sockets, fifos, other devices.
    Other,
}

/// A point in time as the file system keeps it (seconds, nanoseconds).
pub type Time = (i64, u32);

/// One entry as `statx` saw it.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: OsString,
    pub kind: Kind,
    pub size: u64,
    /// Bytes it takes on disk.
    pub blocks: u64,
    /// Permission bits (`0o7777`).
    pub mode: u32,
    pub ino: u64,
    pub mtime: Time,
    pub ctime: Time,
    /// When the inode was made (a copy-up's time); not every file system keeps it.
    pub btime: Option<Time>,
}

/// An open directory.
#[derive(Debug)]
pub struct Node {
    fd: OwnedFd,
}

const DIR: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// The overlay's opaque mark: `user.` when mounted with `userxattr` (berth's
/// layers), `trusted.` otherwise (readable by root only).
const OPAQUE: [&str; 2] = ["user.overlay.opaque", "trusted.overlay.opaque"];

fn stat_at(fd: impl AsFd, name: &OsStr) -> io::Result<Entry> {
    let st = rustix::fs::statx(
        fd,
        name,
        AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::BASIC_STATS | StatxFlags::BTIME,
    )?;
    let ty = FileType::from_raw_mode(st.stx_mode.into());
    let kind = match ty {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Dir,
        FileType::Symlink => Kind::Link,
        FileType::CharacterDevice if st.stx_rdev_major == 0 && st.stx_rdev_minor == 0 => Kind::Whiteout,
        _ => Kind::Other,
    };
    let btime =
        (st.stx_mask & StatxFlags::BTIME.bits() != 0).then_some((st.stx_btime.tv_sec, st.stx_btime.tv_nsec));
    Ok(Entry {
        name: name.to_os_string(),
        kind,
        size: st.stx_size,
        blocks: st.stx_blocks * 512,
        mode: u32::from(st.stx_mode) & 0o7777,
        ino: st.stx_ino,
        mtime: (st.stx_mtime.tv_sec, st.stx_mtime.tv_nsec),
        ctime: (st.stx_ctime.tv_sec, st.stx_ctime.tv_nsec),
        btime,
    })
}

/// A name free for a file being written, in the directory it will land in.
fn temp_name() -> OsString {
    static N: AtomicU64 = AtomicU64::new(0);
    OsString::from(format!(
        ".berth-apply.{}.{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

impl Node {
    /// Open `path`, a directory berth trusts the way to; its last element
    /// must not be a symlink.
    pub fn open(path: &Path) -> io::Result<Node> {
        Ok(Node {
            fd: rustix::fs::open(path, DIR, Mode::empty())?,
        })
    }

    /// The subdirectory `name` (not a symlink to one).
    pub fn sub(&self, name: &OsStr) -> io::Result<Node> {
        Ok(Node {
            fd: rustix::fs::openat(&self.fd, name, DIR, Mode::empty())?,
        })
    }

    /// `name` in this directory; `None` when there is none.
    pub fn stat(&self, name: &OsStr) -> io::Result<Option<Entry>> {
        match stat_at(&self.fd, name) {
            Ok(e) => Ok(Some(e)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// This directory itself.
    pub fn itself(&self) -> io::Result<Entry> {
        let st = stat_at(&self.fd, OsStr::new(""));
        // statx of "" needs AT_EMPTY_PATH; "." is the same directory.
        st.or_else(|_| stat_at(&self.fd, OsStr::new(".")))
    }

    /// Every entry but `.` and `..`, sorted by name.
    pub fn entries(&self) -> io::Result<Vec<Entry>> {
        let dup = rustix::fs::openat(&self.fd, ".", DIR, Mode::empty())?;
        let mut dir = rustix::fs::Dir::new(dup)?;
        let mut out = Vec::new();
        while let Some(e) = dir.read() {
            let e = e?;
            let name = OsStr::from_bytes(e.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            match stat_at(&self.fd, name) {
                Ok(entry) => out.push(entry),
                // Removed since it was listed.
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(err),
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Whether the overlay marked this directory opaque (it hides the
    /// checkout's directory of the same name: the job removed and remade it).
    pub fn opaque(&self) -> bool {
        OPAQUE.iter().any(|name| {
            let mut buf = [0u8; 4];
            matches!(rustix::fs::fgetxattr(&self.fd, *name, &mut buf), Ok(n) if buf[..n] == *b"y")
        })
    }

    /// The regular file `name`, for reading.
    pub fn read(&self, name: &OsStr) -> io::Result<std::fs::File> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = rustix::fs::openat(&self.fd, name, flags, Mode::empty())?;
        let file = std::fs::File::from(fd);
        if !file.metadata()?.is_file() {
            return Err(io::Error::other(format!(
                "`{}` is not a regular file",
                name.to_string_lossy()
            )));
        }
        Ok(file)
    }

    /// The whole regular file `name`, at most `limit` bytes (`None` when larger).
    pub fn read_all(&self, name: &OsStr, limit: u64) -> io::Result<Option<Vec<u8>>> {
        let mut bytes = Vec::new();
        self.read(name)?.take(limit + 1).read_to_end(&mut bytes)?;
        Ok((bytes.len() as u64 <= limit).then_some(bytes))
    }

    /// Where the symlink `name` points (never followed).
    pub fn link(&self, name: &OsStr) -> io::Result<OsString> {
        let target = rustix::fs::readlinkat(&self.fd, name, Vec::new())?;
        Ok(OsStr::from_bytes(target.as_bytes()).to_os_string())
    }

    /// Make the subdirectory `name` with `mode` (set-id bits dropped); an
    /// existing directory is kept.
    pub fn mkdir(&self, name: &OsStr, mode: u32) -> io::Result<Node> {
        match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(mode & 0o1777)) {
            Ok(()) => {}
            Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        self.sub(name)
    }

    /// Replace whatever `name` is with a regular file of `from`'s bytes and
    /// `mode` (set-uid/set-gid dropped): written under a temporary name in
    /// this directory, then renamed over `name`, so no reader ever sees half
    /// a file and a symlink at `name` is replaced, not written through.
    pub fn write_file(&self, name: &OsStr, from: &mut impl Read, mode: u32) -> io::Result<()> {
        let temp = temp_name();
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, &temp, flags, Mode::from_raw_mode(0o600))?;
        let mut file = std::fs::File::from(fd);
        let written = io::copy(from, &mut file)
            .and_then(|_| file.flush())
            .and_then(|_| Ok(rustix::fs::fchmod(&file, Mode::from_raw_mode(mode & 0o1777))?));
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(&self.fd, &temp, AtFlags::empty());
            return Err(e);
        }
        self.replace(&temp, name)
    }

    /// Replace whatever `name` is with a symlink to `target` (never followed).
    pub fn symlink(&self, name: &OsStr, target: &OsStr) -> io::Result<()> {
        let temp = temp_name();
        rustix::fs::symlinkat(target, &self.fd, &temp)?;
        self.replace(&temp, name)
    }

    /// Rename `temp` over `name`; a directory at `name` is removed first
    /// (rename cannot replace a directory with a file).
    fn replace(&self, temp: &OsStr, name: &OsStr) -> io::Result<()> {
        let renamed = match rustix::fs::renameat(&self.fd, temp, &self.fd, name) {
            // A directory is in the way (rare): it goes, then the rename.
            Err(rustix::io::Errno::ISDIR) => self
                .remove(name)
                .and_then(|()| Ok(rustix::fs::renameat(&self.fd, temp, &self.fd, name)?)),
            r => r.map_err(io::Error::from),
        };
        renamed.inspect_err(|_| {
            let _ = rustix::fs::unlinkat(&self.fd, temp, AtFlags::empty());
        })
    }

    /// Remove the file, symlink or whiteout `name`, or the directory `name`
    /// when it is empty (`false`: a directory with entries); a missing one
    /// is fine. One call for the common case, a file.
    pub fn unlink(&self, name: &OsStr) -> io::Result<bool> {
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(true),
            Err(rustix::io::Errno::ISDIR) => self.rmdir_empty(name),
            Err(e) => Err(e.into()),
        }
    }

    /// Mark `name` deleted, as the overlay does (a 0/0 character device;
    /// the kernel lets any user make one).
    pub fn whiteout(&self, name: &OsStr) -> io::Result<()> {
        if self.stat(name)?.is_some() {
            self.remove(name)?;
        }
        rustix::fs::mknodat(&self.fd, name, FileType::CharacterDevice, Mode::empty(), 0)?;
        Ok(())
    }

    /// Remove `name` and, for a directory, everything below it (no symlink
    /// followed). A missing `name` is fine.
    pub fn remove(&self, name: &OsStr) -> io::Result<()> {
        let Some(e) = self.stat(name)? else {
            return Ok(());
        };
        if e.kind == Kind::Dir {
            // An empty one goes without being read (the overlay's `work/work`
            // is 0000 and the kernel's).
            if self.rmdir_empty(name)? {
                return Ok(());
            }
            let sub = self.sub(name)?;
            for child in sub.entries()? {
                sub.remove(&child.name)?;
            }
            drop(sub);
            rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR)?;
        } else {
            rustix::fs::unlinkat(&self.fd, name, AtFlags::empty())?;
        }
        Ok(())
    }

    /// Remove the directory `name` if it is empty; `false` when it is not.
    pub fn rmdir_empty(&self, name: &OsStr) -> io::Result<bool> {
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::NOTEMPTY | rustix::io::Errno::EXIST | rustix::io::Errno::NOENT) => {
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The directory at `rel` below this one, every element a real directory
    /// (`..` and absolute paths refused).
    pub fn walk(&self, rel: &Path) -> io::Result<Node> {
        let mut at = Node {
            fd: rustix::fs::openat(&self.fd, ".", DIR, Mode::empty())?,
        };
        for name in elements(rel)? {
            at = at.sub(name)?;
        }
        Ok(at)
    }
}

/// The plain elements of a relative path; `..`, a root or a prefix refused.
pub fn elements(rel: &Path) -> io::Result<Vec<&OsStr>> {
    use std::path::Component;
    let mut out = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => {
                return Err(io::Error::other(format!(
                    "`{}` leaves the directory it is read from",
                    rel.display()
                )));
            }
        }
    }
    Ok(out)
}

/// Bytes the tree under `node` takes on disk, looking at no more than
/// `max_entries` entries (`None` past them).
pub fn usage(node: &Node, max_entries: u64) -> io::Result<Option<u64>> {
    let mut stack = vec![node.walk(Path::new(""))?];
    let (mut bytes, mut seen) = (0u64, 0u64);
    while let Some(dir) = stack.pop() {
        for e in dir.entries()? {
            seen += 1;
            if seen > max_entries {
                return Ok(None);
            }
            bytes += e.blocks;
            if e.kind == Kind::Dir {
                stack.push(dir.sub(&e.name)?);
            }
        }
    }
    Ok(Some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_replace_symlinks_and_never_follow_them() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::write(&outside, "keep").unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("a")).unwrap();
        std::os::unix::fs::symlink(tmp.path(), ws.join("d")).unwrap();
        let root = Node::open(&ws).unwrap();
        root.write_file(OsStr::new("a"), &mut &b"new"[..], 0o4755)
            .unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(ws.join("a")).unwrap(), "new");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(ws.join("a")).unwrap().permissions().mode() & 0o7777,
            0o755
        );
        assert!(
            root.walk(Path::new("d")).is_err(),
            "a symlinked directory is never entered"
        );
        assert!(root.walk(Path::new("../ws")).is_err());
        root.remove(OsStr::new("d")).unwrap();
        assert!(
            tmp.path().join("outside").exists(),
            "removing a symlink leaves its target"
        );
        root.whiteout(OsStr::new("w")).unwrap();
        assert_eq!(root.stat(OsStr::new("w")).unwrap().unwrap().kind, Kind::Whiteout);
        let names: Vec<_> = root.entries().unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(names, [OsString::from("a"), OsString::from("w")]);
    }
}
