//! Programs that run commands named in their arguments: `find -exec` (with
//! `{}` standing for the paths it finds), `watch`, `script -c`, `git`
//! (settings that run commands in every spelling: `-c`, `--config-env`,
//! `git config`, `GIT_CONFIG_PARAMETERS`, and the subcommands and options
//! that take a command), `tar` (`--checkpoint-action=exec=`, `--to-command`,
//! `-I`, also abbreviated as getopt allows), and the wrappers with their
//! own syntax (`start-stop-daemon`, `parallel`). Their payloads are walked
//! as nested command lines.

use super::commands::Via;
use super::line::At;
use super::scope::Scope;
use super::words::{Text, skip_options};
use super::written::COMPILERS;
use super::{DYNAMIC, Walker};
use crate::safety::expand::{ENGINE_SOCKETS, clean_path, engine_socket_glob, glob_matches};

/// git settings whose values git runs as commands (keys lower case; a
/// trailing `.` means any key under it).
const GIT_RUNS: &[&str] = &[
    "core.pager",
    "core.sshcommand",
    "core.editor",
    "core.fsmonitor",
    "core.hookspath",
    "core.askpass",
    "core.gitproxy",
    "sequence.editor",
    "diff.external",
    "credential.helper",
    "pager.",
    "filter.",
    "diff.",
    "merge.",
    "mergetool.",
    "difftool.",
    "gpg.",
    "uploadpack.packobjectshook",
    "remote.",
    "protocol.",
    "url.",
    "alias.",
    "include.path",
    "includeif.",
];

/// git options (any subcommand) whose value is a command.
const GIT_COMMAND_OPTIONS: &[&str] = &[
    "--exec",
    "-x",
    "--extcmd",
    "--upload-pack",
    "-u",
    "--receive-pack",
    "--tree-filter",
    "--index-filter",
    "--msg-filter",
    "--env-filter",
    "--commit-filter",
    "--tag-name-filter",
    "--parent-filter",
    "--subdirectory-filter",
    "--access-hook",
    "--sendmail-cmd",
    "--smtp-server",
    "--to-cmd",
    "--cc-cmd",
    "--header-cmd",
];

/// tar's long options that take a command, and tar options that share a
/// prefix with them but are not them (getopt takes an exact name first).
const TAR_COMMANDS: &[&str] = &[
    "--checkpoint-action",
    "--to-command",
    "--use-compress-program",
    "--info-script",
    "--new-volume-script",
];
const TAR_NOT_COMMANDS: &[&str] = &[
    "--checkpoint",
    "--to-stdout",
    "--newer",
    "--newer-mtime",
    "--usage",
];

impl Walker<'_> {
    /// Any program that is not a shell or a builtin: follow what it runs.
    pub(super) fn program(&mut self, name: &str, args: &[Text], scope: &mut Scope, at: At, _via: Via) {
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
                    "perl", "ruby", "node", "nodejs", "php", "lua", "awk", "gawk", "mawk", "nawk", "busybox",
                    "sed", "gsed",
                ]
                .contains(&s) =>
            {
                self.interpreter(s, args, scope, depth)
            }
            _ => {}
        }
    }

    /// `find ROOTS… -exec CMD {} ;`: CMD is walked once per path `{}` may
    /// stand for (each root, and each root joined with a `-name` pattern),
    /// so `find / -exec rm -rf {} +` reads as `rm -rf /`.
    fn find(&mut self, args: &[Text], scope: &Scope, depth: usize) {
        let roots: Vec<String> = args
            .iter()
            .take_while(|a| !a.s.starts_with('-') && a.s != "(" && a.s != "!")
            .map(|a| clean_path(&a.s, self.home))
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
        // What `{}` may be: the roots, and paths under them matching a pattern.
        let mut fills: Vec<(String, bool)> = roots.iter().map(|r| (r.clone(), false)).collect();
        for r in &roots {
            for n in &names {
                let path = if n.starts_with('/') {
                    n.clone()
                } else {
                    format!("{}/{n}", r.trim_end_matches('/'))
                };
                // A socket of the engine anywhere under the root, by name.
                let under = |sock: &&&str| {
                    (r == "/" || sock.starts_with(&format!("{}/", r.trim_end_matches('/'))))
                        && glob_matches(n, sock.rsplit('/').next().unwrap_or(""))
                };
                let sock = engine_socket_glob(&path).or_else(|| ENGINE_SOCKETS.iter().find(under).copied());
                fills.push((sock.map_or(path, str::to_string), true));
            }
        }
        fills.truncate(8);
        let mut i = 0;
        while i < args.len() {
            let opt = args[i].s.as_str();
            if ["-exec", "-execdir", "-ok", "-okdir"].contains(&opt) {
                let end = (i + 1..args.len())
                    .find(|&j| args[j].s == ";" || args[j].s == "+")
                    .unwrap_or(args.len());
                let cmd = &args[i + 1..end];
                let placeholder = cmd.iter().skip(1).any(|a| a.s.contains("{}"));
                let at = At {
                    depth: depth + 1,
                    straight: false,
                    reads_input: false,
                };
                if placeholder {
                    for (fill, glob) in &fills {
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
                } else {
                    self.simple(cmd, &[], &[], &mut scope.clone(), at);
                }
                i = end;
            } else if ["-fprint", "-fprint0", "-fprintf", "-fls"].contains(&opt) {
                // Writes a file: the mention is enough for `written.rs`.
                i += 1;
            }
            i += 1;
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

    /// A git setting (`key=value`): walk its value when git runs it.
    pub(super) fn git_setting(&mut self, key: &str, value: &str, scope: &Scope, depth: usize) {
        let key = key.to_lowercase();
        if let Some(cmd) = value.strip_prefix('!') {
            self.line(cmd, &mut scope.clone(), depth + 1, true);
        } else if GIT_RUNS
            .iter()
            .any(|k| key == *k || (k.ends_with('.') && key.starts_with(k)))
        {
            self.line(value, &mut scope.clone(), depth + 1, true);
        }
    }

    /// `GIT_CONFIG_PARAMETERS='key'='value' …`: settings for every git run.
    pub(super) fn git_parameters(&mut self, text: &str, scope: &Scope, depth: usize) {
        for pair in text.split("' '") {
            let pair = pair.trim_matches('\'');
            if let Some((k, v)) = pair.split_once("'='").or_else(|| pair.split_once('=')) {
                self.git_setting(k, v, scope, depth);
            }
        }
    }

    /// `git -c k=v`, `--config-env=k=VAR`, `git config k v`, subcommand
    /// options that take a command, and `ext::` remotes.
    fn git(&mut self, args: &[Text], scope: &Scope, depth: usize) {
        for (i, a) in args.iter().enumerate() {
            let s = a.s.as_str();
            let next = args.get(i + 1).map(|n| n.s.as_str());
            if s == "-c"
                && let Some((k, v)) = next.and_then(|n| n.split_once('='))
            {
                self.git_setting(k, v, scope, depth);
            } else if let Some(kv) = s.strip_prefix("--config-env=").or(s.strip_prefix("-c")) {
                if let Some((k, v)) = kv.split_once('=') {
                    if s.starts_with("--config-env=") {
                        self.push(format!("{DYNAMIC} git --config-env {k}=${v}"));
                    } else {
                        self.git_setting(k, v, scope, depth);
                    }
                }
            } else if let Some((_, v)) = s.split_once('=').filter(|(o, _)| GIT_COMMAND_OPTIONS.contains(o)) {
                self.line(v, &mut scope.clone(), depth + 1, true);
            } else if GIT_COMMAND_OPTIONS.contains(&s)
                && let Some(v) = next
            {
                self.line(v, &mut scope.clone(), depth + 1, true);
            } else if let Some(cmd) = s.strip_prefix("ext::") {
                self.line(
                    &cmd.replace("% ", " ").replace('%', " "),
                    &mut scope.clone(),
                    depth + 1,
                    true,
                );
            }
        }
        let words: Vec<&str> = args.iter().map(|a| a.s.as_str()).collect();
        // `git config [--global …] KEY VALUE`, `git config set KEY VALUE`.
        if let Some(c) = words.iter().position(|w| *w == "config") {
            let ops: Vec<&str> = words[c + 1..]
                .iter()
                .copied()
                .filter(|w| !w.starts_with('-') && *w != "set" && *w != "--add")
                .collect();
            if let [k, v, ..] = ops.as_slice() {
                self.git_setting(k, v, scope, depth);
            }
        }
        // `git submodule foreach CMD`, `git bisect run CMD`.
        for (a, b) in [("foreach", 1), ("run", 1)] {
            if let Some(p) = words.iter().position(|w| *w == a)
                && words.iter().any(|w| *w == "submodule" || *w == "bisect")
            {
                let mut rest = &args[p + b..];
                skip_options(&mut rest, &[]);
                let text = rest.iter().map(|a| a.s.as_str()).collect::<Vec<_>>().join(" ");
                self.line(&text, &mut scope.clone(), depth + 1, true);
            }
        }
    }

    /// `tar` options that run a command, as getopt reads them: long options
    /// by any unambiguous prefix (`--checkpoint-act=exec=…`), with `=` or
    /// the next word; `-I CMD`/`-ICMD`/`-F`; old-style `tar cIf CMD …`.
    fn tar(&mut self, args: &[Text], scope: &Scope, depth: usize) {
        let mut cmds = Vec::new();
        for (i, a) in args.iter().enumerate() {
            let s = a.s.as_str();
            let next = || args.get(i + 1).map(|n| n.s.clone());
            if let Some(long) = s.strip_prefix("--") {
                let (name, value) = match long.split_once('=') {
                    Some((n, v)) => (format!("--{n}"), Some(v.to_string())),
                    None => (s.to_string(), None),
                };
                let runs = name.len() >= 4
                    && !TAR_NOT_COMMANDS.contains(&name.as_str())
                    && TAR_COMMANDS.iter().any(|c| c.starts_with(&name));
                if runs && let Some(v) = value.or_else(next) {
                    cmds.push(v.strip_prefix("exec=").map(str::to_string).unwrap_or(v));
                }
            } else if let Some(short) = s.strip_prefix('-') {
                if let Some(k) = short.find(['I', 'F']) {
                    let rest = &short[k + 1..];
                    cmds.extend(if rest.is_empty() {
                        next()
                    } else {
                        Some(rest.to_string())
                    });
                }
            } else if i == 0 && s.contains(['I', 'F']) && s.chars().all(|c| c.is_ascii_alphabetic()) {
                // Old style: every word after may be the command.
                cmds.extend(args[1..].iter().map(|a| a.s.clone()));
            }
        }
        for cmd in cmds {
            self.line(&cmd, &mut scope.clone(), depth + 1, true);
        }
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
