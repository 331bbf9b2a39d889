//! Who may loosen the sandbox: the user, never the project.
//!
//! An agent writes the project's files (`berth.toml`, `.devcontainer/`), so a
//! job could write a `berth.toml` that turns the next job into a host
//! process, a root container or an unfiltered command. Project files may
//! tighten freely; a key that *loosens* the sandbox ([`Loosening`]) applies
//! only when the user trusted that exact file: `berth trust` records the
//! file's SHA-256 in the user's own config (`~/.config/berth/config.toml`,
//! table `[trust]`), as direnv's `allow` does, and any change to the file
//! makes it untrusted again. The user's own config, the `BERTH_*` variables
//! and the command line are the user's say and always apply.
//!
//! This module is data and files only: where the user's config lives, the
//! `[trust]` table (read, and written back with `toml_edit` so the user's
//! comments survive), and the digest. `config/loosen.rs` decides which keys loosen.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// The variable that names the user's config file (tests, unusual homes).
pub const USER_CONFIG_ENV: &str = "BERTH_USER_CONFIG";
/// The table of trusted files in the user's config.
pub const TRUST_TABLE: &str = "trust";
/// Largest config file berth reads (berth.toml, the user's config,
/// devcontainer.json): a config is a few KiB; a huge one is a mistake or an
/// attack on the manager's memory, refused without being read.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// One key of a project file that loosens the sandbox, as the file sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loosening {
    /// The file that sets it.
    pub file: PathBuf,
    /// The key, as written in the file (`runner`, `safety.default_blocklist` …).
    pub key: &'static str,
    /// The value, as berth shows it.
    pub value: String,
}

impl Loosening {
    /// The refusal a start under this loosening gets.
    pub fn refusal(&self) -> Error {
        Error::Untrusted {
            file: self.file.clone(),
            key: self.key,
            value: self.value.clone(),
        }
    }
}

/// The user's config file: `$BERTH_USER_CONFIG`, else
/// `$XDG_CONFIG_HOME/berth/config.toml`, else `~/.config/berth/config.toml`.
/// `env` reads `BERTH_USER_CONFIG` (a caller's, through a daemon); the
/// home directories are this process's (a daemon serves its own user only).
pub fn user_config_path(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(p) = env(USER_CONFIG_ENV).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    if let Some(d) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d).join("berth/config.toml"));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".config/berth/config.toml"))
}

/// The files the user trusts: canonical path → `sha256:<hex>` of the
/// content trusted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trusted {
    files: BTreeMap<String, String>,
}

impl Trusted {
    /// Take the `[trust]` table out of a parsed user config (the rest is
    /// ordinary settings). Entries that are not `"path" = "sha256:…"` are
    /// refused: a malformed trust table must not be half-read.
    pub fn take_from(table: &mut toml::Table, path: &Path) -> Result<Trusted> {
        let mut files = BTreeMap::new();
        let Some(value) = table.remove(TRUST_TABLE) else {
            return Ok(Trusted { files });
        };
        let bad = || Error::Config {
            path: path.to_path_buf(),
            message: format!(
                "[{TRUST_TABLE}] must map file paths to \"sha256:…\" digests (written by `berth trust`)"
            ),
        };
        let toml::Value::Table(t) = value else {
            return Err(bad());
        };
        for (k, v) in t {
            match v {
                toml::Value::String(d) if d.starts_with("sha256:") => {
                    files.insert(k, d);
                }
                _ => return Err(bad()),
            }
        }
        Ok(Trusted { files })
    }

    /// Whether `file` (canonical) with this content is trusted.
    pub fn allows(&self, file: &Path, content: &[u8]) -> bool {
        self.files
            .get(&file.to_string_lossy().into_owned())
            .is_some_and(|d| *d == digest(content))
    }

    /// The trusted files, for `berth trust --list`.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str)> {
        self.files.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// Whether `path` (which may not exist yet) lies inside `dir`, both taken
/// as the kernel would resolve them (the longest existing part canonical).
pub fn contains(dir: &Path, path: &Path) -> bool {
    fn real(p: &Path) -> PathBuf {
        let mut rest = Vec::new();
        let mut at = p.to_path_buf();
        loop {
            if let Ok(r) = std::fs::canonicalize(&at) {
                return rest.iter().rev().fold(r, |acc: PathBuf, n| acc.join(n));
            }
            match (at.file_name().map(|n| n.to_os_string()), at.parent()) {
                (Some(n), Some(parent)) => {
                    rest.push(n);
                    at = parent.to_path_buf();
                }
                _ => return p.to_path_buf(),
            }
        }
    }
    real(path).starts_with(real(dir))
}

/// `sha256:<hex>` of `content`.
pub fn digest(content: &[u8]) -> String {
    let hash = Sha256::digest(content);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Where `path` points when it is itself a symlink.
pub fn symlinked(path: &Path) -> Option<std::path::PathBuf> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    meta.file_type()
        .is_symlink()
        .then(|| std::fs::read_link(path).unwrap_or_default())
}

/// Read a config file whole, refusing one over [`MAX_CONFIG_BYTES`] without
/// reading past the cap.
pub fn read_capped(path: &Path) -> Result<Vec<u8>> {
    let file = std::fs::File::open(path).map_err(|e| Error::Config {
        path: path.to_path_buf(),
        message: e.kind().to_string(),
    })?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::Config {
            path: path.to_path_buf(),
            message: e.kind().to_string(),
        })?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(Error::Config {
            path: path.to_path_buf(),
            message: format!(
                "larger than {} KiB; a config file is a few KiB (is this the right file?)",
                MAX_CONFIG_BYTES >> 10
            ),
        });
    }
    Ok(bytes)
}

/// Record (`Some(digest)`) or forget (`None`) trust in `file` in the user's
/// config at `user_config`, keeping everything else in it as written. The
/// file is created 0600 in a 0700 directory when missing.
pub fn record(user_config: &Path, file: &Path, digest: Option<&str>) -> Result<()> {
    let text = match std::fs::read(user_config) {
        Ok(b) => String::from_utf8(b).map_err(|_| Error::Config {
            path: user_config.to_path_buf(),
            message: "not UTF-8".into(),
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(Error::io("read the user's config", user_config, e)),
    };
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| Error::Config {
        path: user_config.to_path_buf(),
        message: e.message().to_string(),
    })?;
    let key = file.to_string_lossy().into_owned();
    if !doc.contains_key(TRUST_TABLE) {
        let mut t = toml_edit::Table::new();
        t.decor_mut()
            .set_prefix("\n# Project files `berth trust` allowed to loosen the sandbox, by content.\n");
        doc.insert(TRUST_TABLE, toml_edit::Item::Table(t));
    }
    let table = doc[TRUST_TABLE].as_table_mut().ok_or_else(|| Error::Config {
        path: user_config.to_path_buf(),
        message: format!("`{TRUST_TABLE}` must be a table"),
    })?;
    match digest {
        Some(d) => {
            table.insert(&key, toml_edit::value(d));
        }
        None => {
            table.remove(&key);
        }
    }
    // Written beside and renamed over: a crash never leaves half a config.
    let io = |e| Error::io("write the user's config", user_config, e);
    if let Some(dir) = user_config.parent() {
        crate::store::private::create_dir(dir).map_err(io)?;
    }
    let tmp = user_config.with_extension("toml.berth-tmp");
    crate::store::private::write(&tmp, doc.to_string()).map_err(io)?;
    std::fs::rename(&tmp, user_config).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_is_by_path_and_content() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("cfg/berth/config.toml");
        std::fs::create_dir_all(user.parent().unwrap()).unwrap();
        std::fs::write(&user, "# mine\nuser = \"root\"\n").unwrap();
        let file = dir.path().join("berth.toml");
        record(&user, &file, Some(&digest(b"runner = \"host\"\n"))).unwrap();
        let text = std::fs::read_to_string(&user).unwrap();
        assert!(text.starts_with("# mine\nuser = \"root\"\n"), "{text}");
        let mut table: toml::Table = text.parse().unwrap();
        let trusted = Trusted::take_from(&mut table, &user).unwrap();
        assert!(table.contains_key("user") && !table.contains_key(TRUST_TABLE));
        assert!(trusted.allows(&file, b"runner = \"host\"\n"));
        assert!(
            !trusted.allows(&file, b"runner = \"host\" \n"),
            "one byte more is another file"
        );
        assert!(!trusted.allows(&dir.path().join("other.toml"), b"runner = \"host\"\n"));
        record(&user, &file, None).unwrap();
        let mut table: toml::Table = std::fs::read_to_string(&user).unwrap().parse().unwrap();
        assert!(
            !Trusted::take_from(&mut table, &user)
                .unwrap()
                .allows(&file, b"runner = \"host\"\n")
        );
    }

    #[test]
    fn a_malformed_trust_table_is_refused_whole() {
        let mut table: toml::Table = "[trust]\n\"/p/berth.toml\" = 1\n".parse().unwrap();
        assert!(Trusted::take_from(&mut table, Path::new("/c")).is_err());
        let mut table: toml::Table = "[trust]\n\"/p/berth.toml\" = \"md5:x\"\n".parse().unwrap();
        assert!(Trusted::take_from(&mut table, Path::new("/c")).is_err());
    }

    #[test]
    fn oversized_config_files_are_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("berth.toml");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(500 << 20).unwrap();
        let err = read_capped(&big).unwrap_err().to_string();
        assert!(err.contains("larger than 1024 KiB"), "{err}");
        std::fs::write(&big, "x = 1\n").unwrap();
        assert_eq!(read_capped(&big).unwrap(), b"x = 1\n");
    }
}
