//! Private state on disk: every directory berth creates for its state is
//! 0700 and every file 0600, whatever the umask. Modes are set at creation
//! (so there is no window where a file is readable) and set again on files
//! that already existed (state written by an older berth, or under a
//! different umask).
//!
//! A directory the user named and berth did not create (a state root such as
//! `/tmp`) keeps its mode: only berth's own directories (the instance
//! directory and what is below it) are forced to 0700.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Mode of berth's state directories.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file berth writes.
pub const FILE_MODE: u32 = 0o600;

/// Create `dir` and any missing parents as 0700; an existing one keeps its mode.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)?;
    Ok(())
}

/// Create `dir` (berth's own: the instance directory, a job's log directory)
/// and make sure it is 0700 even if it already existed.
pub fn own_dir(dir: &Path) -> io::Result<()> {
    create_dir(dir)?;
    restrict(dir, DIR_MODE)
}

/// Open with `options`, creating the file as 0600; an existing file is set to 0600.
pub fn open(options: &mut OpenOptions, path: &Path) -> io::Result<File> {
    let file = options.mode(FILE_MODE).open(path)?;
    if file.metadata()?.permissions().mode() & 0o7777 != FILE_MODE {
        file.set_permissions(Permissions::from_mode(FILE_MODE))?;
    }
    Ok(file)
}

/// Write `contents` to `path` as a 0600 file (replacing what was there).
pub fn write(path: &Path, contents: impl AsRef<[u8]>) -> io::Result<()> {
    use std::io::Write;
    let mut f = open(OpenOptions::new().write(true).create(true).truncate(true), path)?;
    f.write_all(contents.as_ref())
}

/// Set `path`'s mode to `mode` if it is not already (a missing path is fine).
pub fn restrict(path: &Path, mode: u32) -> io::Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.permissions().mode() & 0o7777 != mode => {
            std::fs::set_permissions(path, Permissions::from_mode(mode))
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_0600_and_own_dirs_0700_even_when_they_existed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("inst/jobs");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, Permissions::from_mode(0o755)).unwrap();
        own_dir(&d).unwrap();
        assert_eq!(std::fs::metadata(&d).unwrap().permissions().mode() & 0o777, 0o700);
        let f = d.join("x.log");
        std::fs::write(&f, "old").unwrap();
        std::fs::set_permissions(&f, Permissions::from_mode(0o644)).unwrap();
        open(OpenOptions::new().append(true), &f).unwrap();
        assert_eq!(std::fs::metadata(&f).unwrap().permissions().mode() & 0o777, 0o600);
        let g = d.join("new");
        write(&g, "1").unwrap();
        assert_eq!(std::fs::metadata(&g).unwrap().permissions().mode() & 0o777, 0o600);
    }
}
