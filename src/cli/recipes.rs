//! berth's own image recipes (`images/build.sh` and the Dockerfiles it
//! builds from), compiled into the binary: `berth images build` writes them
//! to a private directory of its own and runs them from there.
//!
//! Why embedded: an installed berth (`cargo install --path .`) has no
//! checkout to find them in. And never the workspace's copy: the workspace
//! is the agent's to write, and `images build` runs its script on the host,
//! outside any sandbox, so a script found there would be an agent's code run
//! as the user.

use std::os::unix::fs::PermissionsExt;
#[cfg(test)]
use std::path::Path;
use std::path::PathBuf;

/// Each recipe file: its path under `images/`, its text, and whether it is executable.
const FILES: &[(&str, &str, bool)] = &[
    ("build.sh", include_str!("../../images/build.sh"), true),
    (
        "sandbox/Dockerfile",
        include_str!("../../images/sandbox/Dockerfile"),
        false,
    ),
    (
        "sandbox/.dockerignore",
        include_str!("../../images/sandbox/.dockerignore"),
        false,
    ),
    (
        "berth/Dockerfile",
        include_str!("../../images/berth/Dockerfile"),
        false,
    ),
];

/// A private copy of the recipes (`<dir>/images/…`), removed when dropped.
pub struct Recipes {
    dir: PathBuf,
}

impl Recipes {
    /// Write the recipes into a new directory only this user can read.
    pub fn write() -> std::io::Result<Recipes> {
        let dir = private_dir()?;
        let recipes = Recipes { dir };
        for (path, text, executable) in FILES {
            let dest = recipes.images().join(path);
            std::fs::create_dir_all(dest.parent().expect("under images/"))?;
            std::fs::write(&dest, text)?;
            let mode = if *executable { 0o700 } else { 0o600 };
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(mode))?;
        }
        Ok(recipes)
    }

    /// The `images/` directory of the copy.
    pub fn images(&self) -> PathBuf {
        self.dir.join("images")
    }

    /// The build script of the copy.
    pub fn script(&self) -> PathBuf {
        self.images().join("build.sh")
    }
}

impl Drop for Recipes {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh 0700 directory under the temp dir, never one that existed.
fn private_dir() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::temp_dir();
    for n in 0..100u32 {
        let dir = base.join(format!("berth-images-{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other(format!(
        "no free directory name under {}",
        base.display()
    )))
}

/// Whether `dir` holds exactly the recipes this binary carries (a test's check).
#[cfg(test)]
fn matches(dir: &Path) -> bool {
    FILES
        .iter()
        .all(|(path, text, _)| std::fs::read_to_string(dir.join(path)).is_ok_and(|t| t == *text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_is_private_complete_and_removed() {
        let recipes = Recipes::write().unwrap();
        let images = recipes.images();
        assert!(matches(&images));
        let mode = std::fs::metadata(images.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        let root = images.parent().unwrap().to_path_buf();
        drop(recipes);
        assert!(!root.exists());
    }
}
