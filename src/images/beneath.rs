//! Reading a tree that a job may be changing while berth reads it, without
//! ever following a symlink.
//!
//! A path checked and then opened later is a race: a job flipping `sub/`
//! between a directory and a symlink to a file outside the workspace gets
//! that file read by the manager (which may run as root) and sent to the
//! engine. So every open here is relative to an already open directory
//! (`openat`), one path element at a time, with `O_NOFOLLOW` (a symlink at
//! any element fails the open), and what is opened is checked against what
//! the walk saw (device and inode): a file swapped since is refused, not read.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::fcntl::{AtFlags, OFlag, openat, readlinkat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};

/// Which file a walk saw: device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ident {
    pub dev: u64,
    pub ino: u64,
}

impl Ident {
    fn of(st: &FileStat) -> Ident {
        Ident {
            dev: st.st_dev,
            ino: st.st_ino,
        }
    }
}

/// What one directory entry is, as `lstat` says (links not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Link,
    /// Sockets, fifos, devices: nothing berth copies.
    Other,
}

/// One entry of a directory.
#[derive(Debug, Clone)]
pub struct Item {
    pub name: String,
    pub kind: Kind,
    pub ident: Ident,
    pub size: u64,
    /// Permission bits (`0o7777`).
    pub mode: u32,
    pub mtime: i64,
    /// `[ino, size, mtime, mtime_nsec, ctime, ctime_nsec]` (see `digest.rs`).
    pub stamp: [i64; 6],
}

fn kind_of(st: &FileStat) -> Kind {
    match SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) {
        SFlag::S_IFDIR => Kind::Dir,
        SFlag::S_IFREG => Kind::File,
        SFlag::S_IFLNK => Kind::Link,
        _ => Kind::Other,
    }
}

/// `what` is not what the walk saw: refused in berth's own words.
pub fn changed(what: &Path) -> io::Error {
    io::Error::other(format!(
        "`{}` changed while berth read it (a symlink or another file took its place); try again once nothing writes there",
        what.display()
    ))
}

/// An open directory; every path below it is opened through it.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    ident: Ident,
}

const DIR_FLAGS: OFlag = OFlag::O_RDONLY
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_NOFOLLOW)
    .union(OFlag::O_CLOEXEC);

impl Dir {
    /// Open `path`, a directory berth trusts the way to (a canonical
    /// workspace root): its own last element must not be a symlink.
    pub fn open_root(path: &Path) -> io::Result<Dir> {
        let fd = nix::fcntl::open(path, DIR_FLAGS, Mode::empty()).map_err(io::Error::from)?;
        let ident = Ident::of(&fstat(&fd).map_err(io::Error::from)?);
        Ok(Dir { fd, ident })
    }

    /// Which directory this is.
    pub fn ident(&self) -> Ident {
        self.ident
    }

    /// This open directory as a path other processes of this machine can
    /// reach it by (`/proc/PID/fd/N`): the directory itself, wherever it
    /// was moved since and whatever took its old name.
    pub fn proc_path(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        PathBuf::from(format!("/proc/{}/fd/{}", std::process::id(), self.fd.as_raw_fd()))
    }

    /// The directory `rel` below this one (`..` and absolute paths refused,
    /// no symlink at any element).
    pub fn dir(&self, rel: &Path) -> io::Result<Dir> {
        let mut at: Option<Dir> = None;
        for name in elements(rel)? {
            let parent = at.as_ref().unwrap_or(self);
            let fd = openat(parent.fd.as_fd(), name.as_path(), DIR_FLAGS, Mode::empty())
                .map_err(io::Error::from)?;
            let ident = Ident::of(&fstat(&fd).map_err(io::Error::from)?);
            at = Some(Dir { fd, ident });
        }
        match at {
            Some(d) => Ok(d),
            None => Dir::reopen(self),
        }
    }

    fn reopen(d: &Dir) -> io::Result<Dir> {
        let fd = openat(d.fd.as_fd(), ".", DIR_FLAGS, Mode::empty()).map_err(io::Error::from)?;
        Ok(Dir { fd, ident: d.ident })
    }

    /// The subdirectory `name` the walk saw as `expect`.
    pub fn subdir(&self, name: &str, expect: Ident) -> io::Result<Dir> {
        let fd = openat(self.fd.as_fd(), name, DIR_FLAGS, Mode::empty()).map_err(io::Error::from)?;
        let ident = Ident::of(&fstat(&fd).map_err(io::Error::from)?);
        if ident != expect {
            return Err(changed(Path::new(name)));
        }
        Ok(Dir { fd, ident })
    }

    /// The regular file `rel` below this directory; when `expect` is given,
    /// it must be the file the walk saw.
    pub fn file(&self, rel: &Path, expect: Option<Ident>) -> io::Result<File> {
        let mut names = elements(rel)?;
        let last = names
            .pop()
            .ok_or_else(|| io::Error::other("an empty path names no file"))?;
        let parent = match names.is_empty() {
            true => None,
            false => Some(self.dir(&names.iter().collect::<PathBuf>())?),
        };
        let parent = parent.as_ref().unwrap_or(self);
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK;
        let fd = openat(parent.fd.as_fd(), last.as_path(), flags, Mode::empty()).map_err(io::Error::from)?;
        let st = fstat(&fd).map_err(io::Error::from)?;
        if kind_of(&st) != Kind::File || expect.is_some_and(|e| e != Ident::of(&st)) {
            return Err(changed(rel));
        }
        Ok(File::from(fd))
    }

    /// The entries of this directory (not `.` and `..`), as `lstat` sees them.
    pub fn items(&self) -> io::Result<Vec<Item>> {
        let mut list =
            nix::dir::Dir::openat(self.fd.as_fd(), ".", DIR_FLAGS, Mode::empty()).map_err(io::Error::from)?;
        let mut names = Vec::new();
        for e in list.iter() {
            let e = e.map_err(io::Error::from)?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name != "." && name != ".." {
                names.push(name);
            }
        }
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let st = match fstatat(self.fd.as_fd(), name.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                // Removed since it was listed: not part of the tree any more.
                Err(nix::errno::Errno::ENOENT) => continue,
                Err(e) => return Err(e.into()),
            };
            out.push(Item {
                kind: kind_of(&st),
                ident: Ident::of(&st),
                size: st.st_size.max(0) as u64,
                mode: st.st_mode & 0o7777,
                mtime: st.st_mtime,
                stamp: [
                    st.st_ino as i64,
                    st.st_size,
                    st.st_mtime,
                    st.st_mtime_nsec,
                    st.st_ctime,
                    st.st_ctime_nsec,
                ],
                name,
            });
        }
        Ok(out)
    }

    /// Clear the set-uid and set-gid bits of the regular file `name` the walk
    /// saw as `expect`. The file is pinned first (`O_PATH|O_NOFOLLOW`, type
    /// and inode checked) and changed through that handle, so a symlink
    /// swapped in meanwhile never makes berth chmod a file elsewhere (as
    /// root, `/usr/bin/sudo`). `Ok(false)`: nothing to clear any more.
    pub fn clear_setid(&self, name: &str, expect: Ident) -> io::Result<bool> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::PermissionsExt;
        let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = openat(self.fd.as_fd(), name, flags, Mode::empty()).map_err(io::Error::from)?;
        let st = fstat(&fd).map_err(io::Error::from)?;
        if kind_of(&st) != Kind::File || Ident::of(&st) != expect {
            return Err(changed(Path::new(name)));
        }
        if st.st_mode & 0o6000 == 0 {
            return Ok(false);
        }
        // chmod through the descriptor's magic link: the pinned inode itself.
        let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(st.st_mode & 0o1777))?;
        Ok(true)
    }

    /// Where the symlink `name` points (never followed).
    pub fn link_target(&self, name: &str) -> io::Result<PathBuf> {
        readlinkat(self.fd.as_fd(), name)
            .map(PathBuf::from)
            .map_err(io::Error::from)
    }
}

/// The plain elements of a relative path; `..`, a root or a prefix refused.
fn elements(rel: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => out.push(PathBuf::from(n)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn no_symlink_is_followed_at_any_element() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir(ws.join("sub")).unwrap();
        std::fs::write(ws.join("sub/a"), "a").unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.join("out")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), ws.join("link")).unwrap();
        let root = Dir::open_root(ws).unwrap();
        let mut s = String::new();
        root.file(Path::new("sub/a"), None)
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "a");
        assert!(root.file(Path::new("out/secret"), None).is_err());
        assert!(root.file(Path::new("link"), None).is_err());
        assert!(root.dir(Path::new("out")).is_err());
        assert!(root.file(Path::new("../x"), None).is_err());
        let mut items = root.items().unwrap();
        items.sort_by(|a, b| a.name.cmp(&b.name));
        let kinds: Vec<(&str, Kind)> = items.iter().map(|i| (i.name.as_str(), i.kind)).collect();
        assert_eq!(
            kinds,
            [("link", Kind::Link), ("out", Kind::Link), ("sub", Kind::Dir)]
        );
        assert_eq!(root.link_target("out").unwrap(), outside.path());
    }

    #[test]
    fn a_file_swapped_after_the_walk_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::write(ws.join("a"), "one").unwrap();
        let root = Dir::open_root(ws).unwrap();
        let seen = root.items().unwrap().into_iter().find(|i| i.name == "a").unwrap();
        // The old file stays (under another name), so its inode is not reused.
        std::fs::rename(ws.join("a"), ws.join("a.old")).unwrap();
        std::fs::write(ws.join("b"), "two").unwrap();
        std::fs::rename(ws.join("b"), ws.join("a")).unwrap();
        let err = root.file(Path::new("a"), Some(seen.ident)).unwrap_err();
        assert!(err.to_string().contains("changed while berth read it"), "{err}");
    }
}
