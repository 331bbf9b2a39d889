//! A project image's build context on disk: the files under the context
//! directory minus what `.dockerignore` excludes, walked without following a
//! single symlink (a link is sent as a link, so nothing outside the
//! workspace is ever read), bounded in size, hashed (the image's tag says
//! which context it was built from) and written as the tar the engine's
//! build endpoint takes. Every file is opened through its directory
//! (`beneath.rs`: `openat`, `O_NOFOLLOW`, the inode the walk saw), so a job
//! that swaps a directory for a symlink while the context is read gets the
//! build refused, never a file from outside into the image. Testable without
//! an engine, and run off the async workers by the Docker runner.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::beneath::{self, Ident};

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
    File {
        size: u64,
        stamp: super::digest::Stamp,
        ident: Ident,
    },
    Link {
        target: PathBuf,
    },
}

#[derive(Debug, Clone)]
struct ContextFile {
    rel: String,
    kind: Kind,
    mode: u32,
    mtime: u64,
}

/// A walked context: what will be sent, its hash, where the Dockerfile is.
#[derive(Debug, Clone)]
pub struct Context {
    pub dir: PathBuf,
    /// The context directory, open: every file is read through it.
    root: Arc<beneath::Dir>,
    entries: Vec<ContextFile>,
    /// The Dockerfile's path inside the tar.
    pub dockerfile_in_tar: String,
    dockerfile_text: Vec<u8>,
    /// Hex SHA-256 over the files, the Dockerfile and the build args.
    pub hash: String,
    pub bytes: u64,
    /// Entries `.dockerignore` kept out (a directory counts once).
    pub excluded: usize,
}

/// One `.dockerignore` rule.
struct Rule {
    re: Regex,
    negate: bool,
}

fn ignore_rules(dir: &beneath::Dir) -> Vec<Rule> {
    let mut text = String::new();
    let read = dir
        .file(Path::new(".dockerignore"), None)
        .and_then(|f| f.take(1 << 20).read_to_string(&mut text));
    if read.is_err() {
        return Vec::new();
    }
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
    let ws = beneath::Dir::open_root(&root).map_err(|e| bad(&root, e.to_string()))?;
    // Both named relative to the workspace and opened through it: no
    // symlink (checked now or swapped in later) leads out of it.
    let rel = |p: &Path, what: &str| -> Result<PathBuf> {
        let abs = match p.is_absolute() {
            true => p.to_path_buf(),
            false => root.join(p),
        };
        let outside = || {
            bad(
                p,
                format!("{what} must be inside the workspace {}", root.display()),
            )
        };
        let rel = abs
            .strip_prefix(&root)
            .or_else(|_| abs.strip_prefix(workspace))
            .map_err(|_| outside())?;
        // `.devcontainer/..` is the workspace: `..` taken lexically (no
        // element is ever followed as a symlink, so this is what is opened).
        let mut out = PathBuf::new();
        for c in rel.components() {
            match c {
                std::path::Component::ParentDir if !out.pop() => return Err(outside()),
                std::path::Component::ParentDir | std::path::Component::CurDir => {}
                other => out.push(other),
            }
        }
        Ok(out)
    };
    let dir_rel = rel(dir, "the context")?;
    let df_rel = rel(dockerfile, "the Dockerfile")?;
    let dockerfile_text = read_small(&ws, &df_rel).map_err(|e| {
        bad(
            dockerfile,
            format!(
                "the Dockerfile must be a file inside the workspace {} (no symlinks): {e}",
                root.display()
            ),
        )
    })?;
    let mut ctx = gather(&root, &ws, &dir_rel, dir, "the build does not need")?;
    ctx.dockerfile_in_tar = match df_rel.strip_prefix(&dir_rel) {
        Ok(rel) if ctx.entries.iter().any(|e| Path::new(&e.rel) == rel) => rel.to_string_lossy().into_owned(),
        // Outside the context, or excluded by .dockerignore: sent under a name of its own.
        _ => OUTSIDE_DOCKERFILE.to_string(),
    };
    ctx.dockerfile_text = dockerfile_text;
    ctx.hash = ctx.digest(args)?;
    Ok(ctx)
}

/// The whole `workspace` minus what its `.dockerignore` excludes, walked
/// the same way (no symlink followed, bounded): what a job on a remote
/// engine gets in place of the bind mount. No Dockerfile, no hash.
pub fn walk_workspace(workspace: &Path) -> Result<Context> {
    let root = std::fs::canonicalize(workspace).map_err(|e| bad(workspace, e.to_string()))?;
    let ws = beneath::Dir::open_root(&root).map_err(|e| bad(&root, e.to_string()))?;
    gather(&root, &ws, Path::new(""), workspace, "the job does not need")
}

/// The entries under `dir_rel` of the workspace `ws` (at `root`), with
/// `.dockerignore` applied; `need` ends the over-size refusal.
fn gather(root: &Path, ws: &beneath::Dir, dir_rel: &Path, dir: &Path, need: &str) -> Result<Context> {
    let open_dir = ws.dir(dir_rel).map_err(|e| {
        bad(
            dir,
            format!(
                "the context directory (inside the workspace {}, no symlinks): {e}",
                root.display()
            ),
        )
    })?;
    let dir = root.join(dir_rel);
    let rules = ignore_rules(&open_dir);
    let mut entries = Vec::new();
    let (mut bytes, mut excluded) = (0, 0);
    // The walk reads the context through its own handle (a directory's
    // listing position is per handle); files are read later through `open_dir`.
    let mut stack = vec![(
        ws.dir(dir_rel).map_err(|e| bad(&dir, e.to_string()))?,
        String::new(),
    )];
    let open_dir = Arc::new(open_dir);
    while let Some((at, rel)) = stack.pop() {
        let items = at.items().map_err(|e| bad(&dir.join(&rel), e.to_string()))?;
        for item in items {
            let rel = if rel.is_empty() {
                item.name.clone()
            } else {
                format!("{rel}/{}", item.name)
            };
            let is_dir = item.kind == beneath::Kind::Dir;
            // An excluded directory is still entered when a `!` rule could bring something back.
            if ignored(&rules, &rel) && !(is_dir && rules.iter().any(|r| r.negate)) {
                excluded += 1;
                continue;
            }
            let Some(kind) =
                entry_kind(&at, &item, &rel, &mut stack).map_err(|e| bad(&dir.join(&rel), e.to_string()))?
            else {
                continue; // sockets, fifos, devices: nothing a build can copy
            };
            if let Kind::File { size, .. } = kind {
                bytes += size;
                if bytes > MAX_CONTEXT_BYTES {
                    return Err(too_big(&dir, need));
                }
            }
            entries.push(ContextFile {
                rel,
                kind,
                mode: item.mode,
                mtime: item.mtime.max(0) as u64,
            });
        }
    }
    entries.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(Context {
        dir,
        root: open_dir,
        entries,
        dockerfile_in_tar: String::new(),
        dockerfile_text: Vec::new(),
        hash: String::new(),
        bytes,
        excluded,
    })
}

/// What the walk sends for `item`, listed in `at` at `rel`: a link as its
/// target (never followed), a directory (queued on `stack` to be walked),
/// a file; `None` for anything else.
fn entry_kind(
    at: &beneath::Dir,
    item: &beneath::Item,
    rel: &str,
    stack: &mut Vec<(beneath::Dir, String)>,
) -> std::io::Result<Option<Kind>> {
    Ok(Some(match item.kind {
        beneath::Kind::Link => Kind::Link {
            target: at.link_target(&item.name)?,
        },
        beneath::Kind::Dir => {
            stack.push((at.subdir(&item.name, item.ident)?, rel.to_string()));
            Kind::Dir
        }
        beneath::Kind::File => Kind::File {
            size: item.size,
            stamp: item.stamp,
            ident: item.ident,
        },
        beneath::Kind::Other => return Ok(None),
    }))
}

/// The refusal of a context past [`MAX_CONTEXT_BYTES`] at `dir`; `need`
/// says whose files to exclude (the build's, or the job's).
fn too_big(dir: &Path, need: &str) -> Error {
    let mib = MAX_CONTEXT_BYTES >> 20;
    let ignore = dir.join(".dockerignore");
    bad(
        dir,
        format!(
            "more than {mib} MiB to send; exclude what {need} in {}",
            ignore.display()
        ),
    )
}

impl Context {
    /// How many entries (files, directories, links) will be sent.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing will be sent.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Largest Dockerfile read (a Dockerfile is text of a few KiB).
const MAX_DOCKERFILE_BYTES: u64 = 1 << 20;

fn read_small(dir: &beneath::Dir, rel: &Path) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    dir.file(rel, None)?
        .take(MAX_DOCKERFILE_BYTES + 1)
        .read_to_end(&mut out)?;
    if out.len() as u64 > MAX_DOCKERFILE_BYTES {
        return Err(std::io::Error::other("larger than 1 MiB"));
    }
    Ok(out)
}

impl Context {
    /// This context (a workspace's, [`walk_workspace`]) built from
    /// `dockerfile`, text berth wrote, sent under a name of its own; `hash`
    /// names the build (the caller's choice of what it covers).
    pub fn with_dockerfile(mut self, dockerfile: Vec<u8>, hash: String) -> Context {
        self.dockerfile_in_tar = OUTSIDE_DOCKERFILE.into();
        self.dockerfile_text = dockerfile;
        self.hash = hash;
        self
    }

    /// The Dockerfile as sent.
    pub fn dockerfile_text(&self) -> &[u8] {
        &self.dockerfile_text
    }

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
                Kind::File { size, stamp, ident } => {
                    h.update(format!("f{size}\0").as_bytes());
                    let path = self.dir.join(&e.rel);
                    let open = || self.root.file(Path::new(&e.rel), Some(*ident));
                    let digest = super::digest::file_digest(&path, *stamp, *size, open)
                        .map_err(|err| bad(&path, err.to_string()))?;
                    h.update(digest);
                }
            }
        }
        Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
    }
}

mod pack;

#[cfg(test)]
mod tests;
