//! The normaliser: turns a command line (or an argv) into *views*, the
//! lower-case, quote-free strings the filter's patterns are matched against.
//!
//! Each simple command becomes one view: `program args… redirections`, with
//! the program reduced to its base name (`/usr/bin/sudo` → `sudo`) after
//! peeling off wrappers (`env`, `nohup`, `timeout 5`, `xargs`, `exec`, …) and
//! keywords (`if`, `!`, `{`). Each pipeline of two or more commands also
//! becomes a view (`curl … | sh`), as does each assignment (`DOCKER_HOST=…`)
//! and each function definition (for fork bombs). Payloads of `sh -c`,
//! `eval`, `trap`, `find -exec`, here-strings to a shell, command
//! substitutions, prompt and arithmetic expansions, and the commands named in
//! interpreter code and tool settings are followed recursively. Paths are
//! shown as they resolve (`/dev//sda`, `~root`, `../..` from the job's
//! directory, `*` after `cd /`).
//!
//! The filter fails closed on what it cannot read. A command name is known
//! only when it is a literal after quote removal or built from variables
//! assigned literally earlier in the same straight-line script (see
//! `scope.rs`); anything else (a variable set by `read`, a loop, `+=`, a
//! default expansion, a `{}`/`$1` placeholder, a glob, a substitution the
//! filter cannot evaluate), a shell reading its script from anything but
//! the job's own input or a here-document, interpreter code that runs a
//! command it computes, and a file written and run on the same line are
//! rendered as [`DYNAMIC`], which the default rules block. Here-document
//! bodies are data, except for the substitutions of an unquoted one and the
//! script of a shell.
//!
//! # Cost
//! Every step is linear in the input: each token is visited a bounded number
//! of times (nesting is capped at [`MAX_DEPTH`], wrappers at [`MAX_WRAPPERS`],
//! variables at `scope::MAX_VARS`, each part of a brace-expanded word is
//! resolved once), views are de-duplicated through a hash set, and the total
//! output is capped at [`MAX_OUTPUT`] bytes. Every walker of one check (the
//! scratch walkers that evaluate substitutions too) spends the same
//! [`Budget`]: past the depth, wrapper, variable and brace caps what is left
//! is undecided ([`DYNAMIC`]); a walk that reaches the output cap or spends
//! its budget stops and reports itself [`incomplete`](Analysis::incomplete),
//! and the filter then refuses the command.

mod builtins;
mod code;
mod commands;
mod line;
mod params;
mod payloads;
mod render;
mod scope;
mod tools;
mod words;
mod wrappers;
mod written;

use std::collections::{HashMap, HashSet};

use super::budget::Budget;
use scope::Scope;
use words::Text;

/// How an undecidable command name (or anything nested too deeply) appears in a view.
pub const DYNAMIC: &str = "$(?)";
/// How many levels of `sh -c`, `eval` and substitution are followed.
pub const MAX_DEPTH: usize = 8;
/// How many wrappers (`nohup nice timeout 5 …`) are peeled off one command.
pub const MAX_WRAPPERS: usize = 16;
/// Most bytes of views (and of one expanded word) a walk may produce.
pub const MAX_OUTPUT: usize = 1 << 20;

/// What the normaliser saw.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Analysis {
    /// Lower-case views, in order, without duplicates.
    pub views: Vec<String>,
    /// A top-level shell reads its commands from the job's stdin (`input`).
    pub stdin_is_script: bool,
    /// The walk stopped early (budget or output cap): the views are partial.
    pub incomplete: bool,
}

/// Where a command runs, for resolving what it names.
#[derive(Debug, Clone, Copy, Default)]
pub struct Place<'a> {
    /// `$HOME` of the manager (shown as `~`).
    pub home: Option<&'a str>,
    /// The job's working directory (absolute), for `..` and `cd`.
    pub cwd: Option<&'a str>,
    /// The job's environment: values the line may use as literals.
    pub env: &'a [(String, String)],
}

/// Views of a shell command line (a spec's `shell`), with a fresh budget.
pub fn line(text: &str, home: Option<&str>) -> Analysis {
    let place = Place {
        home,
        ..Default::default()
    };
    analyse(text, &place, &Budget::steps_only())
}

/// Views of a shell command line run at `place`, spending `budget`.
pub fn analyse(text: &str, place: &Place, budget: &Budget) -> Analysis {
    let mut w = Walker::new(place, budget.clone());
    let mut scope = Scope::new();
    w.environment(place, &mut scope);
    w.line(text, &mut scope, 0, true);
    w.done()
}

/// Views of an argv run directly (no shell expands it).
pub fn argv(argv: &[String], place: &Place, budget: &Budget) -> Analysis {
    let mut w = Walker::new(place, budget.clone());
    let mut scope = Scope::new();
    w.environment(place, &mut scope);
    let words: Vec<Text> = argv.iter().map(|a| Text::plain(a)).collect();
    let at = line::At {
        depth: 0,
        straight: true,
        reads_input: true,
    };
    w.simple(&words, &[], &[], &mut scope, at);
    w.done()
}

/// Walks one command line (and what it runs), collecting views.
struct Walker<'a> {
    out: Vec<String>,
    seen: HashSet<String>,
    home: Option<&'a str>,
    /// The job's directory (absolute), when known.
    start_cwd: Option<String>,
    stdin_is_script: bool,
    /// What the line writes and runs (see `written.rs`).
    files: written::Files,
    /// `ln -s TARGET NAME` on the line: NAME stands for TARGET.
    links: HashMap<String, String>,
    /// `hash -p PATH NAME`: NAME runs PATH.
    renames: HashMap<String, String>,
    /// Names of functions and aliases the line defines: calling one runs
    /// code that may change any variable.
    functions: HashSet<String>,
    /// `PATH` is assigned on the line: a bare name may be a file it wrote.
    path_changed: bool,
    /// `exec <FILE` (or `<&N`) moved the script's stdin: a later shell
    /// reading its stdin does not read the job's input.
    stdin_moved: bool,
    /// Bytes of views so far.
    bytes: usize,
    budget: Budget,
    incomplete: bool,
    /// A scratch walker (evaluating a substitution) does not walk nested lines again.
    scratch: bool,
    /// Walking a substitution's line: its output is data for another
    /// command, so naming the engine's socket there is not just looking.
    captured: bool,
}

impl<'a> Walker<'a> {
    fn new(place: &Place<'a>, budget: Budget) -> Self {
        Walker {
            out: Vec::new(),
            seen: HashSet::new(),
            home: place.home,
            start_cwd: place.cwd.map(|c| super::expand::clean_path(c, None)),
            stdin_is_script: false,
            files: written::Files::default(),
            links: HashMap::new(),
            renames: HashMap::new(),
            functions: HashSet::new(),
            path_changed: false,
            stdin_moved: false,
            bytes: 0,
            budget,
            incomplete: false,
            scratch: false,
            captured: false,
        }
    }

    /// The job's environment: its values are literals, and the ones tools
    /// run as commands are walked. (A `PATH` the caller set is not one the
    /// line changed.)
    fn environment(&mut self, place: &Place, scope: &mut Scope) {
        for (k, v) in place.env {
            self.assign(k, &Text::plain(v), false, true, scope, 0);
        }
        self.path_changed = false;
    }

    /// A walker that evaluates a substitution's output: it shares this
    /// check's budget and collects no views of its own.
    fn scratch_walker(&self) -> Walker<'a> {
        let mut w = Walker::new(
            &Place {
                home: self.home,
                ..Default::default()
            },
            self.budget.clone(),
        );
        w.start_cwd = self.start_cwd.clone();
        w.scratch = true;
        w
    }

    fn done(mut self) -> Analysis {
        // Files run by assignments (`BASH_ENV=x cmd`) outside any command's views.
        self.files.settle(0, Vec::new());
        self.files_run_that_the_line_wrote();
        Analysis {
            views: self.out,
            stdin_is_script: self.stdin_is_script,
            incomplete: self.incomplete || self.budget.spent().is_some(),
        }
    }

    /// One unit of work; false (and the walk marked incomplete) once this
    /// check's budget is spent or stopped.
    fn tick(&mut self) -> bool {
        if !self.budget.tick() {
            self.incomplete = true;
        }
        !self.incomplete
    }

    fn push(&mut self, view: String) {
        let view = view.trim().to_lowercase();
        if view.is_empty() || self.seen.contains(&view) {
            return;
        }
        self.bytes += view.len();
        if self.bytes > MAX_OUTPUT {
            self.incomplete = true;
            return;
        }
        self.seen.insert(view.clone());
        self.out.push(view);
    }
}
