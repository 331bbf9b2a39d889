//! A project image's build context on disk: the files under the context
//! directory minus what `.dockerignore` excludes, walked without following a
//! single symlink (a link is sent as a link, so nothing outside the
//! workspace is ever read), bounded in size, hashed (the image's tag says
//! which context it was built from) and written as the tar the engine's
//! build endpoint takes. Plain files and std I/O only: testable without an
//! engine, and run off the async workers by the Docker runner.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use regex::Regex;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Largest build context berth sends (the engine copies all of it).
pub const MAX_CONTEXT_BYTES: u64 = 512 << 20;

/// The name a Dockerfile that lies outside its context gets in the tar.
const OUTSIDE_DOCKERFILE: &str = ".berth.Dockerfile";

/// One path of the context, relative, `/`-separated.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Dir,
    File { size: u64, stamp: super::digest::Stamp },
    Link { target: PathBuf },
}

#[derive(Debug, Clone)]
struct Entry {
    rel: String,
    kind: Kind,
    mode: u32,
    mtime: u64,
}

/// A walked context: what will be sent, its hash, where the Dockerfile is.
#[derive(Debug, Clone)]
pub struct Context {
    pub dir: PathBuf,
    entries: Vec<Entry>,
    /// The Dockerfile's path inside the tar.
    pub dockerfile_in_tar: String,
    dockerfile_text: Vec<u8>,
    /// Hex SHA-256 over the files, the Dockerfile and the build args.
    pub hash: String,
    pub bytes: u64,
}

/// One `.dockerignore` rule.
struct Rule {
    re: Regex,
    negate: bool,
}

fn ignore_rules(dir: &Path) -> Vec<Rule> {
    let Ok(text) = std::fs::read_to_string(dir.join(".dockerignore")) else {
        return Vec::new();
    };
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let (negate, pat) = match l.strip_prefix('!') {
                Some(p) => (true, p.trim()),
                None => (false, l),
            };
            let pat = pat.trim_start_matches('/').trim_start_matches("./");
            let pat = pat.trim_end_matches('/');
            Regex::new(&glob_regex(pat)).ok().map(|re| Rule { re, negate })
        })
        .collect()
}

/// `.dockerignore` glob → anchored regex: `**` any depth, `*` and `?`
/// within one path element, `[…]` as written.
fn glob_regex(pat: &str) -> String {
    let mut re = String::from("^");
    let chars: Vec<char> = pat.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' if chars.get(i + 1) == Some(&'*') => {
                if chars.get(i + 2) == Some(&'/') {
                    re.push_str("(?:.*/)?");
                    i += 3;
                } else {
                    re.push_str(".*");
                    i += 2;
                }
                continue;
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            '[' => match chars[i..].iter().position(|&c| c == ']') {
                Some(end) => {
                    let class: String = chars[i + 1..i + end].iter().collect();
                    re.push('[');
                    re.push_str(&class.replacen('!', "^", 1).replace('\\', "\\\\"));
                    re.push(']');
                    i += end + 1;
                    continue;
                }
                None => re.push_str("\\["),
            },
            c => re.push_str(&regex::escape(&c.to_string())),
        }
        i += 1;
    }
    re.push('$');
    re
}

/// Excluded when the last rule matching the path (or a directory above it) excludes it.
fn ignored(rules: &[Rule], rel: &str) -> bool {
    let mut out = false;
    for rule in rules {
        let mut hit = rule.re.is_match(rel);
        let mut prefix = rel;
        while !hit && let Some((parent, _)) = prefix.rsplit_once('/') {
            hit = rule.re.is_match(parent);
            prefix = parent;
        }
        if hit {
            out = !rule.negate;
        }
    }
    out
}

fn bad(path: &Path, message: impl Into<String>) -> Error {
    Error::BuildContext {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Walk `dir` (inside `workspace`) for a build of `dockerfile` with `args`.
pub fn walk(
    workspace: &Path,
    dir: &Path,
    dockerfile: &Path,
    args: &BTreeMap<String, String>,
) -> Result<Context> {
    let root = std::fs::canonicalize(workspace).map_err(|e| bad(workspace, e.to_string()))?;
    let dir = std::fs::canonicalize(dir).map_err(|e| bad(dir, format!("the context directory: {e}")))?;
    if !dir.starts_with(&root) {
        return Err(bad(
            &dir,
            format!("the context must be inside the workspace {}", root.display()),
        ));
    }
    let df =
        std::fs::canonicalize(dockerfile).map_err(|e| bad(dockerfile, format!("the Dockerfile: {e}")))?;
    if !df.starts_with(&root) || !df.is_file() {
        return Err(bad(
            dockerfile,
            format!(
                "the Dockerfile must be a file inside the workspace {}",
                root.display()
            ),
        ));
    }
    let dockerfile_text = std::fs::read(&df).map_err(|e| bad(&df, e.to_string()))?;
    let rules = ignore_rules(&dir);
    let mut entries = Vec::new();
    let mut bytes = 0;
    let mut stack = vec![(dir.clone(), String::new())];
    while let Some((path, rel)) = stack.pop() {
        let read = std::fs::read_dir(&path).map_err(|e| bad(&path, e.to_string()))?;
        for item in read {
            let item = item.map_err(|e| bad(&path, e.to_string()))?;
            let name = item.file_name().to_string_lossy().into_owned();
            let rel = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            // symlink_metadata: a link is never followed, only recorded.
            let meta =
                std::fs::symlink_metadata(item.path()).map_err(|e| bad(&item.path(), e.to_string()))?;
            let is_dir = meta.is_dir();
            // An excluded directory is still entered when a `!` rule could bring something back.
            if ignored(&rules, &rel) && !(is_dir && rules.iter().any(|r| r.negate)) {
                continue;
            }
            use std::os::unix::fs::MetadataExt;
            let (mode, mtime) = (meta.mode() & 0o7777, meta.mtime().max(0) as u64);
            let kind = if meta.file_type().is_symlink() {
                let target = std::fs::read_link(item.path()).map_err(|e| bad(&item.path(), e.to_string()))?;
                Kind::Link { target }
            } else if is_dir {
                stack.push((item.path(), rel.clone()));
                Kind::Dir
            } else if meta.is_file() {
                bytes += meta.len();
                if bytes > MAX_CONTEXT_BYTES {
                    return Err(bad(
                        &dir,
                        format!(
                            "more than {} MiB to send; exclude what the build does not need in {}",
                            MAX_CONTEXT_BYTES >> 20,
                            dir.join(".dockerignore").display()
                        ),
                    ));
                }
                Kind::File {
                    size: meta.len(),
                    stamp: super::digest::stamp(&meta),
                }
            } else {
                continue; // sockets, fifos, devices: nothing a build can copy
            };
            entries.push(Entry {
                rel,
                kind,
                mode,
                mtime,
            });
        }
    }
    entries.sort_by(|a, b| a.rel.cmp(&b.rel));
    let dockerfile_in_tar = match df.strip_prefix(&dir) {
        Ok(rel) if entries.iter().any(|e| Path::new(&e.rel) == rel) => rel.to_string_lossy().into_owned(),
        // Outside the context, or excluded by .dockerignore: sent under a name of its own.
        _ => OUTSIDE_DOCKERFILE.to_string(),
    };
    let mut ctx = Context {
        dir,
        entries,
        dockerfile_in_tar,
        dockerfile_text,
        hash: String::new(),
        bytes,
    };
    ctx.hash = ctx.digest(args)?;
    Ok(ctx)
}

impl Context {
    fn digest(&self, args: &BTreeMap<String, String>) -> Result<String> {
        let mut h = Sha256::new();
        h.update(b"berth-context-v1\0");
        h.update(self.dockerfile_in_tar.as_bytes());
        h.update(b"\0");
        h.update(&self.dockerfile_text);
        for (k, v) in args {
            h.update(format!("\0arg {k}={v}").as_bytes());
        }
        for e in &self.entries {
            h.update(format!("\0{}\0{:o}\0", e.rel, e.mode).as_bytes());
            match &e.kind {
                Kind::Dir => h.update(b"d"),
                Kind::Link { target } => h.update(format!("l{}", target.display()).as_bytes()),
                Kind::File { size, stamp } => {
                    h.update(format!("f{size}\0").as_bytes());
                    let path = self.dir.join(&e.rel);
                    let digest = super::digest::file_digest(&path, *stamp, *size)
                        .map_err(|err| bad(&path, err.to_string()))?;
                    h.update(digest);
                }
            }
        }
        Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Write the context as a tar (owned by root, as `docker build` sends it).
    pub fn write_tar<W: Write>(&self, out: W) -> std::io::Result<()> {
        let mut tar = tar::Builder::new(out);
        tar.follow_symlinks(false);
        let header = |e: &Entry, kind: tar::EntryType, size: u64| {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(kind);
            h.set_mode(e.mode);
            h.set_mtime(e.mtime);
            h.set_uid(0);
            h.set_gid(0);
            h.set_size(size);
            h
        };
        for e in &self.entries {
            match &e.kind {
                Kind::Dir => {
                    let mut h = header(e, tar::EntryType::Directory, 0);
                    tar.append_data(&mut h, &e.rel, std::io::empty())?;
                }
                Kind::Link { target } => {
                    let mut h = header(e, tar::EntryType::Symlink, 0);
                    tar.append_link(&mut h, &e.rel, target)?;
                }
                Kind::File { size, .. } => {
                    let f = std::fs::File::open(self.dir.join(&e.rel))?;
                    // Exactly the size hashed: a file that grew meanwhile is cut, not overrun.
                    let mut h = header(e, tar::EntryType::Regular, *size);
                    tar.append_data(&mut h, &e.rel, f.take(*size))?;
                }
            }
        }
        if self.dockerfile_in_tar == OUTSIDE_DOCKERFILE {
            let mut h = tar::Header::new_gnu();
            h.set_mode(0o644);
            h.set_size(self.dockerfile_text.len() as u64);
            tar.append_data(&mut h, OUTSIDE_DOCKERFILE, self.dockerfile_text.as_slice())?;
        }
        tar.into_inner()?.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &str) -> Vec<Rule> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".dockerignore"), text).unwrap();
        ignore_rules(dir.path())
    }

    #[test]
    fn dockerignore_rules() {
        let r = rules("# comment\ntarget\n*.log\n**/node_modules\n!keep.log\n/secret/\n");
        assert!(ignored(&r, "target"));
        assert!(ignored(&r, "target/debug/x"));
        assert!(ignored(&r, "a.log"));
        assert!(!ignored(&r, "keep.log"));
        assert!(!ignored(&r, "sub/a.log"), "* stays within one element");
        assert!(ignored(&r, "web/node_modules/x/y.js"));
        assert!(ignored(&r, "secret/key"));
        assert!(!ignored(&r, "src/main.rs"));
    }

    #[test]
    fn hash_follows_files_args_and_ignores() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::write(ws.join("Dockerfile"), "FROM scratch\n").unwrap();
        std::fs::write(ws.join("a.txt"), "one").unwrap();
        let args = BTreeMap::new();
        let first = walk(ws, ws, &ws.join("Dockerfile"), &args).unwrap();
        assert_eq!(first.dockerfile_in_tar, "Dockerfile");
        assert_eq!(
            walk(ws, ws, &ws.join("Dockerfile"), &args).unwrap().hash,
            first.hash
        );
        std::fs::write(ws.join("a.txt"), "two").unwrap();
        let changed = walk(ws, ws, &ws.join("Dockerfile"), &args).unwrap();
        assert_ne!(changed.hash, first.hash);
        let with_arg = BTreeMap::from([("V".to_string(), "1".to_string())]);
        assert_ne!(
            walk(ws, ws, &ws.join("Dockerfile"), &with_arg).unwrap().hash,
            changed.hash
        );
        std::fs::write(ws.join(".dockerignore"), "*.log\n").unwrap();
        let base = walk(ws, ws, &ws.join("Dockerfile"), &args).unwrap().hash;
        std::fs::write(ws.join("x.log"), "noise").unwrap();
        assert_eq!(walk(ws, ws, &ws.join("Dockerfile"), &args).unwrap().hash, base);
    }

    #[test]
    fn links_are_not_followed_and_outside_is_refused() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::write(ws.join("Dockerfile"), "FROM scratch\n").unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.join("out")).unwrap();
        let ctx = walk(ws, ws, &ws.join("Dockerfile"), &BTreeMap::new()).unwrap();
        let mut tar = Vec::new();
        ctx.write_tar(&mut tar).unwrap();
        assert!(!String::from_utf8_lossy(&tar).contains("s3cret"));
        let names: Vec<String> = tar::Archive::new(tar.as_slice())
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert_eq!(names, ["Dockerfile", "out"]);
        let err = walk(ws, outside.path(), &ws.join("Dockerfile"), &BTreeMap::new()).unwrap_err();
        assert!(err.to_string().contains("inside the workspace"), "{err}");
    }

    #[test]
    fn a_context_over_the_bound_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::write(ws.join("Dockerfile"), "FROM scratch\n").unwrap();
        // Sparse: its size counts, nothing is written.
        let big = std::fs::File::create(ws.join("big")).unwrap();
        big.set_len(MAX_CONTEXT_BYTES + 1).unwrap();
        let err = walk(ws, ws, &ws.join("Dockerfile"), &BTreeMap::new()).unwrap_err();
        assert!(
            err.to_string().contains("more than 512 MiB") && err.to_string().contains(".dockerignore"),
            "{err}"
        );
    }
}
