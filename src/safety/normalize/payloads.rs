//! Programs that run commands named in their arguments: `find -exec` (with
//! `{}` standing for the paths it finds), `watch`, `script -c`, the
//! wrappers with their own syntax (`start-stop-daemon`, `parallel`), and
//! the dispatch to `git`/`tar` (`tools.rs`), compilers and interpreters
//! (`code.rs`); `ln -s` makes a name stand for its target. Payloads are
//! walked as nested command lines.

use super::Walker;
use super::line::At;
use super::scope::Scope;
use super::words::{Text, skip_options};
use super::written::COMPILERS;
use crate::safety::expand::{ENGINE_SOCKETS, clean_path, engine_socket_glob, glob_matches};

impl Walker<'_> {
    /// Any program that is not a shell or a builtin: follow what it runs.
    pub(super) fn program(&mut self, name: &str, args: &[Text], scope: &mut Scope, at: At) {
        let depth = at.depth;
        match name {
            "watch" | "script" => {
                let mut rest = args;
                skip_options(&mut rest, &["-n", "--interval", "-q", "-t", "-E", "-I", "-O"]);
                let text = rest.iter().map(|a| a.s.as_str()).collect::<Vec<_>>().join(" ");
                self.line(&text, &mut scope.clone(), depth + 1, true);
                if let Some(i) = args.iter().position(|a| a.s == "-c" || a.s == "--command") {
                    let payload = args.get(i + 1).map(|a| a.s.clone()).unwrap_or_default();
                    self.line(&payload, &mut scope.clone(), depth + 1, true);
                }
            }
            "find" => self.find(args, scope, depth),
            "ln" => {
                // `ln -s TARGET NAME`: NAME stands for TARGET from now on.
                let ops: Vec<&Text> = args.iter().filter(|a| !a.s.starts_with('-')).collect();
                if let [target, link] = ops.as_slice()
                    && self.links.len() < 256
                {
                    let t = clean_path(&target.s, self.home);
                    let l = clean_path(&link.s, self.home);
                    self.links.insert(
                        l.strip_prefix("./").unwrap_or(&l).to_lowercase(),
                        t.to_lowercase(),
                    );
                }
            }
            "git" => self.git(args, scope, depth),
            "tar" => self.tar(args, scope, depth),
            "go" if args.first().is_some_and(|a| a.s == "run") => {
                for a in args.iter().filter(|a| a.s.ends_with(".go")) {
                    self.files.runs(&a.s);
                }
            }
            "go" if args.first().is_some_and(|a| a.s == "build") => self.compiler(&args[1..]),
            c if COMPILERS.contains(&c) && c != "go" => self.compiler(args),
            s if s.starts_with("python")
                || [
                    "perl", "ruby", "node", "nodejs", "php", "lua", "awk", "gawk", "mawk", "nawk", "sed",
                    "gsed",
                ]
                .contains(&s) =>
            {
                self.interpreter(s, args, scope, depth)
            }
            _ => {}
        }
    }

    /// `find ROOTS… -exec CMD {} ;`: CMD is walked once per path `{}` may
    /// stand for (a root, unless a name pattern or `-mindepth` leaves it
    /// out; everything under it, `ROOT/*`, when no name pattern narrows it;
    /// and each root joined with a name pattern), so `find / -exec rm -rf {}
    /// +` reads as `rm -rf /` while `find ~ -name '*.tmp' -exec rm -rf {} +`
    /// does not.
    fn find(&mut self, args: &[Text], scope: &Scope, depth: usize) {
        let fills = find_fills(args, self.home);
        let mut i = 0;
        while i < args.len() {
            let opt = args[i].s.as_str();
            if ["-exec", "-execdir", "-ok", "-okdir"].contains(&opt) {
                let end = (i + 1..args.len())
                    .find(|&j| args[j].s == ";" || args[j].s == "+")
                    .unwrap_or(args.len());
                self.find_exec(&args[i + 1..end], &fills, scope, depth);
                i = end;
            } else if ["-fprint", "-fprint0", "-fprintf", "-fls"].contains(&opt) {
                // Writes a file: the mention is enough for `written.rs`.
                i += 1;
            }
            i += 1;
        }
    }

    /// One `-exec CMD` of `find`: CMD walked once per fill of `{}` (a path,
    /// and whether it is a glob), or once as it is when it has no `{}`.
    fn find_exec(&mut self, cmd: &[Text], fills: &[(String, bool)], scope: &Scope, depth: usize) {
        let at = At {
            depth: depth + 1,
            straight: false,
            reads_input: false,
        };
        if !cmd.iter().skip(1).any(|a| a.s.contains("{}")) {
            self.simple(cmd, &[], &[], &mut scope.clone(), at);
            return;
        }
        for (fill, glob) in fills {
            let words: Vec<Text> = cmd
                .iter()
                .enumerate()
                .map(|(k, a)| {
                    let mut t = a.clone();
                    if k > 0 && a.s.contains("{}") {
                        t.s = a.s.replace("{}", fill);
                        t.glob |= *glob;
                    }
                    t
                })
                .collect();
            self.simple(&words, &[], &[], &mut scope.clone(), at);
        }
    }

    /// `gcc -o OUT SRC…`: what a compiler reads and writes.
    fn compiler(&mut self, args: &[Text]) {
        let mut sources = Vec::new();
        let mut outputs = Vec::new();
        let mut i = 0;
        while let Some(a) = args.get(i) {
            i += 1;
            let s = a.s.as_str();
            if s == "-o" {
                outputs.extend(args.get(i).map(|o| o.s.clone()));
                i += 1;
            } else if let Some(o) = s.strip_prefix("-o") {
                outputs.push(o.to_string());
            } else if s == "-" || !s.starts_with('-') {
                sources.push(s.to_string());
            }
        }
        if outputs.is_empty() {
            outputs.push("a.out".into());
        }
        self.files.compiles(sources, outputs);
    }

    /// Wrappers with a syntax of their own. `Some(Some(rest))`: keep peeling
    /// at `rest`; `Some(None)`: walked here; `None`: not one of them.
    pub(super) fn special_wrapper<'w>(
        &mut self,
        name: &str,
        args: &'w [Text],
        redirs: &[String],
        scope: &mut Scope,
        at: At,
    ) -> Option<Option<&'w [Text]>> {
        match name {
            // `start-stop-daemon -S -x PROG [-a NAME] -- ARGS`.
            "start-stop-daemon" => {
                let mut program_word = None;
                let mut i = 0;
                while let Some(a) = args.get(i) {
                    i += 1;
                    let s = a.s.as_str();
                    if s == "--" {
                        break;
                    }
                    if let Some(v) = s.strip_prefix("--exec=").or(s.strip_prefix("--startas=")) {
                        program_word = Some(Text::plain(v));
                    } else if ["-x", "--exec", "-a", "--startas"].contains(&s) {
                        program_word = args.get(i).cloned();
                        i += 1;
                    }
                }
                let mut words: Vec<Text> = program_word.into_iter().collect();
                words.extend(args[i.min(args.len())..].iter().cloned());
                self.simple(&words, redirs, &[], scope, at);
                Some(None)
            }
            // `parallel [opts] CMD ::: ARGS` or `parallel ::: 'CMD' …`.
            "parallel" => {
                let mut rest = args;
                skip_options(
                    &mut rest,
                    &["-j", "--jobs", "-S", "--sshlogin", "-a", "--arg-file", "-d", "-I"],
                );
                let sep = rest
                    .iter()
                    .position(|a| a.s.starts_with(":::"))
                    .unwrap_or(rest.len());
                if sep == 0 {
                    for a in rest.iter().skip(1).filter(|a| !a.s.starts_with(":::")) {
                        self.line(&a.s.clone(), &mut scope.clone(), at.depth + 1, true);
                    }
                    return Some(None);
                }
                Some(Some(&rest[..sep]))
            }
            _ => None,
        }
    }
}

/// What `{}` may stand for in `find ARGS` (a path, and whether it is a
/// glob), at most 8: the roots (when they match), and paths under them
/// matching a pattern.
fn find_fills(args: &[Text], home: Option<&str>) -> Vec<(String, bool)> {
    let roots: Vec<String> = args
        .iter()
        .take_while(|a| !a.s.starts_with('-') && a.s != "(" && a.s != "!")
        .map(|a| clean_path(&a.s, home))
        .collect();
    let roots = if roots.is_empty() {
        vec![".".to_string()]
    } else {
        roots
    };
    let mut names = Vec::new();
    for pair in args.windows(2) {
        if ["-name", "-iname", "-path", "-ipath", "-wholename", "-lname"].contains(&pair[0].s.as_str()) {
            names.push(pair[1].s.to_lowercase());
        }
    }
    let below = args.windows(2).any(|p| p[0].s == "-mindepth" && p[1].s != "0");
    let matches_root = |r: &str| {
        let base = r
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .filter(|b| !b.is_empty())
            .unwrap_or("/");
        names.is_empty() || names.iter().any(|n| glob_matches(n, base))
    };
    let mut fills: Vec<(String, bool)> = roots
        .iter()
        .filter(|r| !below && matches_root(r))
        .map(|r| (r.clone(), false))
        .collect();
    // With no name pattern, everything under a root (`-mindepth 1`).
    if names.is_empty() {
        fills.extend(
            roots
                .iter()
                .map(|r| (format!("{}/*", r.trim_end_matches('/')), true)),
        );
    }
    for r in &roots {
        fills.extend(names.iter().map(|n| (named_under(r, n), true)));
    }
    // The command is walked at most 8 times.
    fills.truncate(8);
    fills
}

/// The path a name pattern `n` stands for under the root `r`: an engine
/// socket it may name (anywhere under the root), or `r/n`.
fn named_under(r: &str, n: &str) -> String {
    let path = if n.starts_with('/') {
        n.to_string()
    } else {
        format!("{}/{n}", r.trim_end_matches('/'))
    };
    let under = |sock: &&&str| {
        (r == "/" || sock.starts_with(&format!("{}/", r.trim_end_matches('/'))))
            && glob_matches(n, sock.rsplit('/').next().unwrap_or(""))
    };
    let sock = engine_socket_glob(&path).or_else(|| ENGINE_SOCKETS.iter().find(under).copied());
    sock.map_or(path, str::to_string)
}
