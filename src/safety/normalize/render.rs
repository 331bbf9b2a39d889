//! Views: a simple command rendered as `program args… redirections`, with
//! each argument shown as the rules should see it: path clean-up
//! (`/dev//sda` is `/dev/sda`, also after `of=`), links made on the line
//! followed, a glob that matches the engine's socket naming it. When the
//! line moved (`cd /`) or an argument climbs out of the job's directory
//! (`../..`), a second view shows the relative paths resolved, so `rm -rf *`
//! after `cd /` reads as `rm -rf /*`.

use super::Walker;
use super::scope::{Cwd, Scope};
use super::words::Text;
use crate::safety::expand::{self, clean_arg, clean_path};

impl Walker<'_> {
    /// A simple command's view. A `|` inside an argument (`git commit -m "a | sh"`)
    /// is shown as `¦`, so that only real pipes look like pipes to the rules.
    pub(super) fn render(&self, name: &str, args: &[Text], redirs: &[String]) -> String {
        let mut v = name.to_string();
        for a in args {
            self.arg_forms(&mut v, a, &clean_arg(&a.s, self.home));
        }
        for r in redirs {
            v.push(' ');
            v.push_str(r);
        }
        v
    }

    /// The views with relative paths resolved against where the line is
    /// (one per directory it may be in), where they differ from
    /// [`render`](Self::render)'s.
    pub(super) fn resolved_views(
        &self,
        name: &str,
        args: &[Text],
        redirs: &[String],
        scope: &Scope,
    ) -> Vec<String> {
        let mut views = Vec::new();
        for base in self.bases(scope) {
            let mut v = name.to_string();
            let mut differs = false;
            for a in args {
                let clean = clean_arg(&a.s, self.home);
                let (key, path) = match clean.split_once('=') {
                    Some((k, p)) if !k.starts_with('-') || k.starts_with("--") => (Some(k), p),
                    _ => (None, clean.as_str()),
                };
                if path.starts_with('-') || path.contains("://") {
                    self.arg_forms(&mut v, a, &clean);
                    continue;
                }
                let r = self.resolve_under(path, &base);
                differs |= r != path;
                let form = match key {
                    Some(k) => format!("{k}={r}"),
                    None => r,
                };
                self.arg_forms(&mut v, a, &form);
            }
            for r in redirs {
                v.push(' ');
                v.push_str(r);
            }
            if differs {
                views.push(v);
            }
        }
        views
    }

    /// Append an argument (already cleaned) and what it also stands for.
    fn arg_forms(&self, v: &mut String, a: &Text, clean: &str) {
        v.push(' ');
        v.push_str(&clean.replace('|', "¦"));
        let (key, value) = match clean.split_once('=') {
            Some((k, p)) => (Some(k), p),
            None => (None, clean),
        };
        let with_key = |p: &str| match key {
            Some(k) => format!("{k}={p}"),
            None => p.to_string(),
        };
        let link = value.strip_prefix("./").unwrap_or(value);
        if let Some(target) = self.links.get(link) {
            v.push(' ');
            v.push_str(&with_key(target));
        }
        // A glob that would match the engine's socket names it.
        if a.glob
            && let Some(sock) = expand::engine_socket_glob(value)
        {
            v.push(' ');
            v.push_str(&with_key(sock));
        }
    }

    /// The one directory the line is in, when the filter knows it (`pwd`, `$PWD`).
    pub(super) fn cwd_of(&self, scope: &Scope) -> Option<String> {
        match &scope.cwd {
            Cwd::Start => self.start_cwd.as_ref().map(|c| clean_path(c, self.home)),
            Cwd::At(dirs) if dirs.len() == 1 && dirs[0] != "." => Some(dirs[0].clone()),
            _ => None,
        }
    }

    /// What a cleaned path may point at: absolute and `~` paths as they
    /// are; a relative one under each directory the line may be in after
    /// `cd`, or (`all` false) under the job's directory only when it climbs
    /// out of it (`..`, `~+`). Unresolvable paths are returned as they are.
    pub(super) fn resolve(&self, path: &str, scope: &Scope, all: bool) -> Vec<String> {
        self.bases(scope)
            .into_iter()
            .map(|mut b| {
                b.all |= all;
                self.resolve_under(path, &b)
            })
            .collect()
    }

    /// The directories relative paths are resolved under.
    fn bases(&self, scope: &Scope) -> Vec<Base> {
        let start = |all| Base {
            dir: self.start_cwd.clone(),
            all,
        };
        match &scope.cwd {
            Cwd::Start => vec![start(false)],
            Cwd::At(dirs) => dirs
                .iter()
                .map(|d| match d.as_str() {
                    "." => start(true),
                    d => Base {
                        dir: Some(d.to_string()),
                        all: true,
                    },
                })
                .collect(),
            Cwd::Unknown => vec![Base {
                dir: None,
                all: false,
            }],
        }
    }

    /// `path` (cleaned) under `base`.
    fn resolve_under(&self, path: &str, base: &Base) -> String {
        if path.starts_with('/') || (path.starts_with('~') && !path.starts_with("~+")) {
            return path.to_string();
        }
        let rel = path
            .strip_prefix("~+")
            .map_or(path, |r| r.trim_start_matches('/'));
        let climbs = rel == ".." || rel.starts_with("../") || path.starts_with("~+");
        let Some(dir) = base.dir.as_deref().filter(|_| base.all || climbs) else {
            return path.to_string();
        };
        // Under an absolute directory, so `..` climbs past the home directory too.
        let dir = match (dir.strip_prefix('~'), self.home) {
            (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => format!("{home}{rest}"),
            _ => dir.to_string(),
        };
        clean_path(&format!("{dir}/{rel}"), self.home)
    }
}

/// A directory relative paths may be under: the job's own (then only paths
/// that climb out of it are resolved, unless `all`) or one `cd` went to.
struct Base {
    dir: Option<String>,
    all: bool,
}
