//! What the filter knows of the shell's state at a point of the line: the
//! variables whose values it can vouch for, the working directory, and
//! whether word splitting is still the default.
//!
//! A variable is [`Val::Known`] only when a plain `NAME=literal` assignment
//! set it earlier in the same straight-line script (not after `&&`/`||`,
//! not in a loop, conditional, subshell, pipeline or background job, not by
//! `+=`), or the job's `env` did. Anything else that touches a name (`read`,
//! `printf -v`, `declare`, `export`, `for`, `${x:=…}`, arithmetic, a prefix
//! assignment) makes it [`Val::Unknown`], and something that may change any
//! name (a sourced file, a function or alias defined on the line, a trap, a
//! nameref, `eval` of unknown text) *poisons* the scope: from there on every
//! name is unknown.

use std::collections::HashMap;
use std::rc::Rc;

/// What a variable holds, as far as the filter knows.
#[derive(Debug, Clone)]
pub(super) enum Val {
    Known(String),
    Unknown,
}

/// Most variables a scope tracks; past that every unknown name is undecided.
pub(super) const MAX_VARS: usize = 256;
/// Longest value a variable is known to hold; longer ones are undecided
/// (`a=$a$a` doubling would otherwise grow without bound).
pub(super) const MAX_VALUE: usize = 4096;
/// Most directories a working directory may be one of (`cd` in a branch).
const MAX_CWDS: usize = 8;

/// Where the line is, as far as the filter knows.
#[derive(Debug, Clone, Default)]
pub(super) enum Cwd {
    /// The job's own directory (no `cd` yet).
    #[default]
    Start,
    /// One of these directories (absolute, or `~`-based), after `cd`.
    At(Rc<Vec<String>>),
    /// A directory the filter cannot tell (`cd "$X"`, `cd -`).
    Unknown,
}

/// Variables assigned so far on this line (and `$0`, `$1`… inside `sh -c`).
/// Cloning is cheap (shared until written): every substitution and nested
/// line gets its own copy, and a deep copy per copy would make the walk
/// quadratic.
#[derive(Debug, Clone, Default)]
pub(super) struct Scope {
    vars: Rc<HashMap<String, Val>>,
    /// More than [`MAX_VARS`] names were assigned: unknown names are undecided.
    full: bool,
    /// Something ran that may have changed any variable: all are unknown.
    poisoned: bool,
    /// `IFS` was assigned: how an expansion splits into words is unknown.
    pub(super) ifs: bool,
    /// A `declare -i` was seen: an assignment may be evaluated as
    /// arithmetic (`declare -i n; n='a[$(id)]'` runs `id`), whichever name.
    pub(super) integers: bool,
    /// Names a `for NAME in WORDS` set, with its literal WORDS: still
    /// unknown as values (one at a time, globs expanded), but a shell that
    /// runs `"$NAME"` runs one of these files (see `commands.rs`).
    loops: Rc<HashMap<String, Rc<Vec<String>>>>,
    pub(super) cwd: Cwd,
}

impl Scope {
    pub(super) fn new() -> Self {
        Scope::default()
    }

    pub(super) fn insert(&mut self, name: String, val: Val) {
        let val = match val {
            Val::Known(v) if v.len() > MAX_VALUE || self.poisoned => Val::Unknown,
            v => v,
        };
        if self.vars.len() >= MAX_VARS && !self.vars.contains_key(&name) {
            self.full = true;
            return;
        }
        if self.loops.contains_key(&name) {
            Rc::make_mut(&mut self.loops).remove(&name);
        }
        Rc::make_mut(&mut self.vars).insert(name, val);
    }

    /// `name` was touched in a way the filter does not follow.
    pub(super) fn unknown(&mut self, name: &str) {
        self.insert(name.to_string(), Val::Unknown);
    }

    /// `for name in words`: unknown, but one of `words` (all literal).
    pub(super) fn loop_over(&mut self, name: &str, words: Vec<String>) {
        self.unknown(name);
        Rc::make_mut(&mut self.loops).insert(name.to_string(), Rc::new(words));
    }

    /// The literal words `name` loops over, if it is still a loop's variable.
    pub(super) fn loop_words(&self, name: &str) -> Option<Rc<Vec<String>>> {
        match self.get(name) {
            Some(Val::Unknown) if !self.poisoned => self.loops.get(name).cloned(),
            _ => None,
        }
    }

    /// Anything may have changed: every name is unknown from here on.
    pub(super) fn poison(&mut self) {
        self.poisoned = true;
    }

    /// `name`'s value: `None` when the line never touched it (it comes from
    /// the caller's environment, if anywhere).
    pub(super) fn get(&self, name: &str) -> Option<&Val> {
        const UNKNOWN: &Val = &Val::Unknown;
        if self.poisoned {
            return self.vars.get(name).map(|_| UNKNOWN).or(Some(UNKNOWN));
        }
        self.vars.get(name).or(self.full.then_some(UNKNOWN))
    }

    /// The line assigned `name` (rather than inheriting it).
    pub(super) fn assigned(&self, name: &str) -> bool {
        self.vars.contains_key(name)
    }

    /// After `cd` to one of `dirs` (`None`: unknown). In a branch
    /// (`straight` false) the shell may or may not have gone there.
    pub(super) fn cd(&mut self, dirs: Option<Vec<String>>, straight: bool) {
        let Some(mut dirs) = dirs else {
            self.cwd = Cwd::Unknown;
            return;
        };
        if !straight {
            match &self.cwd {
                Cwd::At(old) => dirs.extend(old.iter().cloned()),
                // The job's own directory stays possible: keep it with `.`.
                Cwd::Start => dirs.push(".".into()),
                Cwd::Unknown => return,
            }
        }
        dirs.sort();
        dirs.dedup();
        self.cwd = if dirs.len() > MAX_CWDS {
            Cwd::Unknown
        } else {
            Cwd::At(Rc::new(dirs))
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poison_makes_every_name_unknown_even_later_ones() {
        let mut s = Scope::new();
        s.insert("a".into(), Val::Known("ls".into()));
        s.poison();
        assert!(matches!(s.get("a"), Some(Val::Unknown)));
        s.insert("b".into(), Val::Known("ls".into()));
        assert!(matches!(s.get("b"), Some(Val::Unknown)));
        assert!(matches!(s.get("never"), Some(Val::Unknown)));
    }

    #[test]
    fn a_cd_in_a_branch_keeps_both_directories() {
        let mut s = Scope::new();
        s.cd(Some(vec!["/".into()]), true);
        s.cd(Some(vec!["/tmp".into()]), false);
        let Cwd::At(dirs) = &s.cwd else { panic!() };
        assert_eq!(**dirs, vec!["/".to_string(), "/tmp".to_string()]);
        s.cd(None, true);
        assert!(matches!(s.cwd, Cwd::Unknown));
    }
}
